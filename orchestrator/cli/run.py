"""`duckscore run`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..common.defaults import DEFAULT_POLICY
from ..core.reporting import module_logger
from .app import cli
from .options import (
    allow_recipe_mismatch_option,
    engine_options,
    explain_option,
    given_and_format,
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

logger = module_logger(__name__)


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
def run(
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
    for needs_partitions, flag in ((incremental, "--incremental"), (force, "--force")):
        if needs_partitions and partition_by is None:
            raise click.UsageError(f"{flag} needs --partition-by")
    if engine == "spark":
        for refused, flag in ((queries is not None, "--queries"), (not explain, "--no-explain"),
                              (rerank_scores is not None, "--rerank-scores"),
                              (not isinstance(log, str), "--log-format"),
                              (unsorted, "--unsorted")):  # fmt: skip
            if refused:
                raise click.UsageError(f"{flag} is not supported with --engine spark yet")
    from ..run.job import Job

    job = Job(
        recipe, policy, recipe_overrides, overrides, top_n, explain, allow_recipe_mismatch,
        settings, sorted_outputs=not unsorted,
    )  # fmt: skip
    if partition_by is not None:
        for refused, flag in ((queries is not None, "--queries"), (unsorted, "--unsorted"),
                              (rerank_scores is not None, "--rerank-scores")):  # fmt: skip
            if refused:
                raise click.UsageError(f"{flag} is not supported with --partition-by")
        from ..run.incremental import Compute, compute_on_duckdb, run_partitioned

        compute: Compute = compute_on_duckdb
        if engine == "spark":
            from ..engines.spark_partitions import compute_on_spark

            compute = compute_on_spark(shards, spark_master)
        given, log_format = given_and_format(log)
        partitioned = run_partitioned(
            given, out_dir, partition_by, job, incremental=incremental, force=force,
            log_format=log_format, compute=compute,
        )  # fmt: skip
        partitions_written(partitioned)
        if partitioned.decisions is not None:
            decided(partitioned.decisions)
        return
    if engine == "spark":
        from ..engines.spark import run_on_spark

        spark_result = run_on_spark(log, out_dir, job, shards=shards, master=spark_master)
        logger.info(
            f"done on Spark: {spark_result.rows['queries']:,} queries, "
            f"{spark_result.rows['parents']:,} parents -> {out_dir}"
        )
        return
    from ..run.pipeline import run as run_pipeline

    result = run_pipeline(log, out_dir, job, queries=queries, rerank_scores=rerank_scores)
    logger.info(f"done: {result.queries:,} queries, {result.parents:,} parents -> {out_dir}")
    written(
        f"fused and scored {result.parents:,} parents of {result.queries:,} queries",
        out_dir,
        result.manifest,
    )
    decided(result.decisions)
