"""`run_log`: which engine runs a log, whole or a partition at a time — the one place
`duckscore run` and `ds.run` decide it, and refuse the options a combination does not support."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..core.errors import OptionError
from ..core.inputs import Table
from ..core.session import Relations
from ..fusion.traces import TraceLog
from .job import DEFAULT_JOB, Engine, Job
from .pipeline import RunResult, run

if TYPE_CHECKING:
    from ..fusion.code_plan import CodeTarget
    from .incremental import Compute, PartitionedResult
    from .spark import SparkRunResult

    Outcome = RunResult | PartitionedResult | SparkRunResult  # what `run_log` returns, by engine


class Unsupported(OptionError):
    """Options that do not go together (the command line prints it as a usage error)."""


DUCKDB = Engine()


def run_log(
    log: Table,
    out_dir: str | Path | Relations,
    job: Job = DEFAULT_JOB,
    engine: Engine = DUCKDB,
    *,
    queries: Table | None = None,
    rerank_scores: Table | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
    code: CodeTarget | None = None,
) -> Outcome:
    """`log` fused and scored into `out_dir` by `engine`: `runner/pipeline.py`'s run, the
    partitioned run (`runner/incremental.py`, its partitions on DuckDB or in one Spark job) or
    `runner/spark.py`'s. A combination of options the engine does not support is refused
    (`Unsupported`, one line) before anything is read."""
    _refuse_unsupported(log, job, engine, queries, rerank_scores)
    if code is not None and (engine.engine == "spark" or engine.partition_by is not None):
        flag = "--engine spark" if engine.partition_by is None else "--partition-by"
        raise Unsupported(f"--entities (a code run) is not supported with {flag} yet")
    if engine.partition_by is not None:
        return _run_partitioned(log, out_dir, job, engine, engine.partition_by)
    if engine.engine == "spark":
        from .spark import run_on_spark

        return run_on_spark(
            _path_of(log, "--engine spark"),
            _folder(out_dir, "--engine spark"),
            job,
            shards=engine.shards,
            master=engine.spark_master,
        )
    return run(
        log,
        out_dir,
        job,
        queries=queries,
        connection=connection,
        rerank_scores=rerank_scores,
        code=code,
    )


def _refuse_unsupported(
    log: Table, job: Job, engine: Engine, queries: Table | None, rerank_scores: Table | None
) -> None:
    for needs_partitions, flag in ((engine.incremental, "--incremental"),
                                   (engine.force, "--force")):  # fmt: skip
        if needs_partitions and engine.partition_by is None:
            raise Unsupported(f"{flag} needs --partition-by")
    if engine.engine == "spark":
        for refused, flag in ((queries is not None, "--queries"), (not job.explain, "--no-explain"),
                              (rerank_scores is not None, "--rerank-scores"),
                              (isinstance(log, TraceLog), "--log-format"),
                              (not job.sorted_outputs, "--unsorted")):  # fmt: skip
            if refused:
                raise Unsupported(f"{flag} is not supported with --engine spark yet")
    if engine.partition_by is not None:
        for refused, flag in ((queries is not None, "--queries"),
                              (not job.sorted_outputs, "--unsorted"),
                              (rerank_scores is not None, "--rerank-scores")):  # fmt: skip
            if refused:
                raise Unsupported(f"{flag} is not supported with --partition-by")


def _run_partitioned(
    log: Table,
    out_dir: str | Path | Relations,
    job: Job,
    engine: Engine,
    partition_by: str,
) -> PartitionedResult:
    from .incremental import RETRIEVAL_LOG, compute_on_duckdb, run_partitioned

    compute: Compute = compute_on_duckdb
    if engine.engine == "spark":
        from .spark_partitions import compute_on_spark

        compute = compute_on_spark(engine.shards, engine.spark_master)
    given, log_format = (log, RETRIEVAL_LOG)
    if isinstance(log, TraceLog):
        given, log_format = log.given, log.format
    return run_partitioned(
        _path_of(given, "--partition-by"), _folder(out_dir, "--partition-by"),
        partition_by, job, incremental=engine.incremental, force=engine.force,
        log_format=log_format, compute=compute,
    )  # fmt: skip


def _path_of(log: object, flag: str) -> str:
    """The log's path (a file, glob or folder): what Spark and the partitions read."""
    if not isinstance(log, str | Path):
        raise Unsupported(
            f"--log: {flag} reads files (a path, glob or folder), not a {type(log).__name__}"
        )
    return str(log)


def _folder(out_dir: str | Path | Relations, flag: str) -> Path:
    if isinstance(out_dir, Relations):
        raise Unsupported(f"{flag} writes an output folder: give --out")
    return Path(out_dir)
