"""`duckscore demo`: the bundled SciFact log, scored end to end and checked against qrels."""

from __future__ import annotations

from pathlib import Path

from .contracts import QRELS, RETRIEVAL_LOG
from .engine import EngineSettings, connect
from .errors import DuckscoreError
from .inputs import open_input, schema_of
from .outputs import atomic_output_dir
from .progress import Progress
from .render import lit, render
from .resources import fixtures_dir
from .score import score
from .sqlcheck import check_sql

RRF_K = 60


def scifact_path(name: str) -> Path:
    return fixtures_dir() / "scifact" / name


def derive_parent_features(log: str | Path, destination: Path, settings: EngineSettings | None = None) -> int:
    """Write seed-000 parent features derived from a retrieval log (the documented demo query)."""
    con = connect(settings)
    open_input(con, RETRIEVAL_LOG, str(log), "--log")
    rendered = render("features/parent_features_from_log.sql", rrf_k=RRF_K,
                      inputs={"retrieval_log": "retrieval_log"})
    check_sql(rendered, {"retrieval_log": schema_of(con, "retrieval_log")})
    try:
        row = con.execute(f"COPY ({rendered.text}) TO {lit(str(destination))} (FORMAT parquet)").fetchone()
    except Exception as exc:  # duckdb.Error, named for the template
        raise DuckscoreError(f"sql/{rendered.template}: DuckDB failed: {exc}") from None
    return int(row[0]) if row else 0


def run_demo(out_dir: Path, settings: EngineSettings | None, progress: Progress) -> str:
    out_dir = Path(out_dir)
    progress.step("deriving parent features from the bundled SciFact log")
    with atomic_output_dir(out_dir) as stage:
        features = stage / "parent_features.parquet"
        derive_parent_features(scifact_path("retrieval_log.parquet"), features, settings)
        result = score(features, stage / "score", "overall_v1", settings=settings, progress=progress,
                       queries=str(scifact_path("queries.parquet")))
        rows = summarise(stage / "score" / "queries.parquet", settings)
    lines = [
        f"SciFact demo: {result.queries} queries, policy {result.policy.version}",
        "",
        f"{'confidence':<12}{'queries':>8}{'top-1 relevant':>16}{'need_hitl':>11}{'web_fallback':>14}",
    ]
    for level, queries, relevant, hitl, fallback in rows:
        lines.append(f"{level:<12}{queries:>8}{relevant:>16.1%}{hitl:>11}{fallback:>14}")
    lines += ["", f"outputs: {out_dir}/score/ (contract.jsonl, parents.parquet, queries.parquet, "
                  f"manifest.json, sql/) and {out_dir}/parent_features.parquet"]
    return "\n".join(lines)


def summarise(queries_parquet: Path, settings: EngineSettings | None) -> list[tuple]:
    con = connect(settings)
    con.execute(f"CREATE TEMP VIEW decisions AS SELECT * FROM read_parquet({lit(str(queries_parquet))})")
    open_input(con, QRELS, str(scifact_path("qrels.parquet")), "qrels")
    rendered = render("demo/summary.sql", inputs={"decisions": "decisions", "qrels": "qrels"})
    check_sql(rendered, {"decisions": schema_of(con, "decisions"), "qrels": schema_of(con, "qrels")})
    return con.execute(rendered.text).fetchall()
