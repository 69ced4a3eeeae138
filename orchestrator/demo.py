"""`duckscore demo`: the bundled SciFact log, fused and scored end to end, checked against qrels."""

from __future__ import annotations

from pathlib import Path

from .contracts import QRELS
from .engine import EngineSettings, connect
from .evaluate import evaluate
from .inputs import open_input, schema_of
from .pipeline import run
from .progress import Progress
from .render import lit, render
from .resources import fixtures_dir
from .sqlcheck import check_sql

DEMO_RECIPE = "canonical_rrf"


def scifact_path(name: str) -> Path:
    return fixtures_dir() / "scifact" / name


def run_demo(out_dir: Path, settings: EngineSettings | None, progress: Progress) -> str:
    out_dir = Path(out_dir)
    result = run(scifact_path("retrieval_log.parquet"), out_dir, recipe=DEMO_RECIPE,
                 queries=scifact_path("queries.parquet"), settings=settings, progress=progress)
    rows = summarise(out_dir / "queries.parquet", settings)
    means, _ = evaluate(out_dir / "fused.parquet", scifact_path("qrels.parquet"),
                        "ndcg@10,recall@100", settings)
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
    lines += ["", f"outputs in {out_dir}/: fused.parquet, parent_features.parquet, parents.parquet, "
                  "queries.parquet, contract.jsonl, manifest.json, sql/"]
    return "\n".join(lines)


def summarise(queries_parquet: Path, settings: EngineSettings | None) -> list[tuple]:
    con = connect(settings)
    con.execute(f"CREATE TEMP VIEW decisions AS SELECT * FROM read_parquet({lit(str(queries_parquet))})")
    open_input(con, QRELS, str(scifact_path("qrels.parquet")), "qrels")
    rendered = render("demo/summary.sql", inputs={"decisions": "decisions", "qrels": "qrels"})
    check_sql(rendered, {"decisions": schema_of(con, "decisions"), "qrels": schema_of(con, "qrels")})
    return con.execute(rendered.text).fetchall()


def run_evaluate_demo(out_dir: Path, settings: EngineSettings | None, progress: Progress) -> str:
    """Seed 002 on the bundled tender: the contract, summarised one line per supplier."""
    from .bid_evaluate import evaluate_bids

    tender = fixtures_dir() / "evaluate" / "tender"
    result = evaluate_bids(tender, out_dir, settings=settings, progress=progress)
    con = connect(settings)
    rows = con.execute(
        f"SELECT evaluation_id, supplier_id, total_score, confidence, risk_level, recommendation_status, "
        f"coalesce(recommendation, '-'), array_to_string(hitl_reasons, ', ') "
        f"FROM read_parquet({lit(str(Path(out_dir) / 'evaluations.parquet'))}) "
        f"ORDER BY evaluation_id, rank NULLS LAST, supplier_id").fetchall()
    lines = [f"Tender demo: {result.evaluations} supplier evaluations, policy {result.policy.version}",
             f"{'evaluation':<14}{'supplier':<10}{'total':>8}{'conf.':>7}  {'risk':<7}{'status':<14}"
             f"{'recommendation':<15}human review because"]
    for evaluation, supplier, total, confidence, risk, status, recommendation, reasons in rows:
        lines.append(f"{evaluation:<14}{supplier:<10}{total:>8.2f}{confidence:>7.3f}  {risk:<7}{status:<14}"
                     f"{recommendation:<15}{reasons or '-'}")
    gates = ", ".join(f"{g['name']} {g['status']}" for g in result.gates["gates"])
    lines.append(f"gates: {gates}")
    lines.append(f"outputs in {out_dir}/ (contract.jsonl, evaluations.parquet, gates.json, …)")
    return "\n".join(lines)
