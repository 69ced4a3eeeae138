"""`duckscore demo`: the bundled SciFact log, fused and scored end to end, checked against qrels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.connection import EngineSettings
from ..core.render import lit, render
from ..core.reporting import silenced
from ..core.resources import fixtures_dir
from ..core.session import Session
from ..metrics.retrieval import evaluate
from ..metrics.tables import QRELS
from ..runner.job import Job
from ..runner.pipeline import run
from .calibration import POLICY_FILE, SCORES_DIR, SEED_DIR, calibration_screen


def scifact_path(name: str) -> Path:
    return fixtures_dir() / "scifact" / name


def run_demo(out_dir: Path, settings: EngineSettings | None) -> str:
    out_dir = Path(out_dir)
    result = run(
        scifact_path("retrieval_log.parquet"),
        out_dir,
        Job(settings=settings),
        queries=scifact_path("queries.parquet"),
    )
    rows = summarise(out_dir / "queries.parquet", settings)
    with silenced():  # the demo's summary says what the evaluation found
        means, _ = evaluate(
            out_dir / "fused.parquet", scifact_path("qrels.parquet"), "ndcg@10,recall@100", settings
        )
    lines = [
        f"SciFact demo: {result.queries} queries, recipe {result.recipe.version}, "
        f"policy {result.policy.version}",
        f"fused ranking: nDCG@10 {means['ndcg@10']:.4f}, Recall@100 {means['recall@100']:.4f} "
        "(reference RRF: 0.6605, 0.9560)",
        "",
        f"{'confidence':<12}{'queries':>8}{'top-1 relevant':>16}{'need_hitl':>11}{'web_fallback':>14}",
    ]
    for level, queries, relevant, hitl, fallback in rows:
        lines.append(f"{level:<12}{queries:>8}{relevant:>16.1%}{hitl:>11}{fallback:>14}")
    lines += [
        f"({result.policy.version} was calibrated on these queries' labels: in-sample)",
        "",
        *calibration_screen(out_dir, scifact_path("qrels.parquet"), settings),
        "",
        f"outputs in {out_dir}/: fused.parquet, parent_features.parquet, parents.parquet, "
        "queries.parquet, contract.jsonl, manifest.json, sql/,",
        f"  {POLICY_FILE} and {SCORES_DIR}/ (the calibrated policy and its scores), {SEED_DIR}/ "
        "(overall_v1's)",
    ]
    return "\n".join(lines)


def summarise(queries_parquet: Path, settings: EngineSettings | None) -> list[tuple[Any, ...]]:
    """Per confidence level: queries, share whose best parent is relevant, HITL, web fallback."""
    with Session(settings) as session:
        session.execute(
            f"CREATE TEMP VIEW decisions AS SELECT * FROM read_parquet({lit(str(queries_parquet))})"
        )
        session.open("qrels", QRELS, str(scifact_path("qrels.parquet")), "qrels")
        rendered = render("demo/summary.sql", inputs={"decisions": "decisions", "qrels": "qrels"})
        return [tuple(row.values()) for row in session.rows(rendered)]
