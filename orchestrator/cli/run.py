"""`duckscore run`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..common.defaults import DEFAULT_POLICY
from .app import cli
from .options import (
    allow_recipe_mismatch_option,
    engine_options,
    explain_option,
    log_option,
    out_dir_option,
    policy_options,
    queries_option,
    recipe_options,
    rerank_scores_option,
    top_n_option,
)
from .summary import decided, partitions_written, written

if TYPE_CHECKING:
    from ..core.connection import EngineSettings
    from ..core.progress import Progress
    from ..run.dispatch import Outcome


@cli.command()
@log_option
@out_dir_option()
@queries_option
@rerank_scores_option
@top_n_option
@click.option(
    "--engine",
    type=click.Choice(["duckdb", "spark"]),
    default="duckdb",
    show_default=True,
    help="spark: shard the log by query_id and run the same DuckDB SQL per shard on Spark "
    "executors (mapInArrow); outputs are Parquet datasets (folders of parts).",
)
@click.option(
    "--spark-master",
    metavar="URL",
    help="Spark master for --engine spark (default: $DUCKSCORE_SPARK_MASTER, the one "
    "spark-submit gives, else local[*]).",
)
@click.option(
    "--shards",
    default=8,
    show_default=True,
    type=click.IntRange(min=1),
    help="Query_id shards (Spark tasks) for --engine spark (with --partition-by: for all "
    "the partitions to compute, in one Spark job).",
)
@click.option(
    "--partition-by",
    metavar="KEY",
    help="The log is hive-partitioned by KEY (logs/KEY=VALUE/…): score each partition on its "
    "own into KEY=VALUE folders of every output, with a ledger.json (docs/partitions.md).",
)
@click.option(
    "--incremental",
    is_flag=True,
    help="With --partition-by: compute only partitions whose files changed or whose outputs "
    "are damaged since the ledger's run; leave the others byte for byte.",
)
@click.option(
    "--force",
    is_flag=True,
    help="With --partition-by --incremental: compute every partition again when the recipe, "
    "policy or options are not those of the ledger (refused without it).",
)
@click.option(
    "--unsorted",
    is_flag=True,
    help="Write fused.parquet, parent_features.parquet and parents.parquet in the engine's "
    "order, not sorted by query: the same rows, about a tenth less CPU at 10M log rows "
    "(docs/performance.md). queries.parquet and contract.jsonl stay sorted.",
)
@recipe_options(None)
@allow_recipe_mismatch_option
@explain_option
@policy_options(DEFAULT_POLICY, "risk_flags.single_spike.max_score_norm_at_least=0.9")
@engine_options
@click.pass_obj
def run(
    progress: Progress,
    log: Any,
    out_dir: Path,
    queries: str | None,
    rerank_scores: str | None,
    top_n: int,
    engine: str,
    spark_master: str | None,
    shards: int,
    partition_by: str | None,
    incremental: bool,
    force: bool,
    unsorted: bool,
    recipe: str | None,
    recipe_overrides: tuple[str, ...],
    allow_recipe_mismatch: bool,
    explain: bool,
    policy: str,
    overrides: tuple[str, ...],
    settings: EngineSettings,
) -> None:
    """Fuse a retrieval log, then score its parents: every output of `fuse` and `score`."""
    from ..run.dispatch import Engine, Unsupported, run_log
    from ..run.job import Job

    job = Job(
        recipe, policy, recipe_overrides, overrides, top_n, explain, allow_recipe_mismatch,
        settings, sorted_outputs=not unsorted,
    )  # fmt: skip
    how = Engine(engine, spark_master, shards, partition_by, incremental, force)
    try:
        outcome = run_log(
            log, out_dir, job, how, queries=queries, rerank_scores=rerank_scores, progress=progress
        )
    except Unsupported as exc:
        raise click.UsageError(str(exc)) from None
    _said(outcome, out_dir, progress)


def _said(outcome: Outcome, out_dir: Path, progress: Progress) -> None:
    """What the run did, on stderr: the partitions, Spark's rows, or the outputs and decisions."""
    from ..run.incremental import PartitionedResult
    from ..run.pipeline import RunResult

    if isinstance(outcome, PartitionedResult):
        partitions_written(outcome)
        if outcome.decisions is not None:
            decided(outcome.decisions)
    elif isinstance(outcome, RunResult):
        progress.step(
            f"done: {outcome.queries:,} queries, {outcome.parents:,} parents -> {out_dir}"
        )
        written(
            f"fused and scored {outcome.parents:,} parents of {outcome.queries:,} queries",
            out_dir,
            outcome.manifest,
        )
        decided(outcome.decisions)
    else:
        progress.step(
            f"done on Spark: {outcome.rows['queries']:,} queries, "
            f"{outcome.rows['parents']:,} parents -> {out_dir}"
        )
