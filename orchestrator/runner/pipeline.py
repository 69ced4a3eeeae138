"""`run()`: fuse a retrieval log (seed 003), then score its parents (seed 000), on one Session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..core.inputs import Table
from ..core.outputs import check_output_dir
from ..core.reporting import module_logger
from ..core.session import Relations, Session, folder_of
from ..fusion.code_plan import CodeTarget, code_inputs
from ..fusion.log import open_log, open_rerank_scores
from ..fusion.recipe_view import Recipe
from ..fusion.stages import keeps_source_parents, manifest_fields
from ..fusion.traces import TraceLog, trace_queries
from ..scoring.policy_view import ScorePolicy
from ..scoring.stages import DecisionCounts, decided
from ..scoring.tables import QUERY_IDS
from .graph import run_graph
from .job import DEFAULT_JOB, Job

logger = module_logger(__name__)


@dataclass(frozen=True)
class RunResult:
    out_dir: Path | None  # None: the outputs are tables of the connection (Relations)
    recipe: Recipe
    policy: ScorePolicy
    queries: int
    parents: int
    manifest: dict[str, Any]
    decisions: DecisionCounts


def run(
    log: Table,
    out_dir: str | Path | Relations,
    job: Job = DEFAULT_JOB,
    *,
    queries: Table | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    rerank_scores: Table | None = None,
    code: CodeTarget | None = None,
) -> RunResult:
    """Fuse then score into out_dir: fused.parquet, parent_features.parquet, parents.parquet,
    queries.parquet, contract.jsonl, manifest.json (recipe and policy) and the rendered SQL.
    `job.explain` False: fused.parquet's contributions and best_provenance are NULL (faster).
    `code`: a code run's entities table (docs/code.md): loc_outputs.jsonl too, the parents the
    files."""
    loaded_recipe, loaded_policy = job.load()
    top_n, explain = job.top_n, job.explain
    given = {"--log": log, "--queries": queries, "--rerank-scores": rerank_scores}
    check_output_dir(out_dir, "--out", given | code_inputs(code))
    with Session(job.settings, connection=connection) as session:
        logger.info(
            f"checking the log (recipe {loaded_recipe.version}, policy {loaded_policy.version})"
        )
        # a log of trace spans: every trace with a retrieval span decides, even with no hit
        opened, fuse_plan = open_log(session, log, loaded_recipe, allow_empty=True, code=code)
        open_rerank_scores(session, rerank_scores, fuse_plan)
        if queries is None:
            queries = trace_queries(session, log)
        if queries is not None:
            session.open("queries", QUERY_IDS, queries, "--queries")
        logger.info(f"{opened.rows:,} hits from {len(fuse_plan.sources)} sources")
        graph = run_graph(
            fuse_plan,
            loaded_policy,
            top_n,
            explain=explain,
            sorted_outputs=job.sorted_outputs,
            shared=keeps_source_parents(session, fuse_plan),
            spans=isinstance(log, TraceLog),
            with_query_ids=queries is not None,
        )
        with session.publish(out_dir) as out:
            session.materialise(graph, out)
            decisions = decided(session, loaded_policy)
            manifest = out.manifest(
                "run",
                fuse_plan.recipe.policy.as_record(),
                {"settings": session.settings.record()},
                **manifest_fields(fuse_plan, explain),
                score_policy=loaded_policy.as_record(),
                top_n=top_n,
                sorted_outputs=job.sorted_outputs,
            )
    return RunResult(
        folder_of(out_dir),
        fuse_plan.recipe,
        loaded_policy,
        out.counts["queries.parquet"],
        out.counts["parents.parquet"],
        manifest,
        decisions,
    )
