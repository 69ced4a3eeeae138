"""`duckscore run --engine spark`: the same DuckDB SQL on Spark executors, one shard per task.

Every fused ranking and every score is computed within one query_id, so the log is hash-shuffled
by query_id and each shard runs the unchanged pipeline (orchestrator/runner/pipeline.py) in DuckDB inside
`mapInArrow`. Nothing is transpiled, so the rows are those of the DuckDB engine by construction.
A shard's outputs travel as Arrow IPC payloads in a cached (table, payload) frame; each output is
then decoded on the executors and written by Spark's own writer, so no row passes the driver.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..common.extras import needs_extra
from ..core.errors import DuckscoreError
from ..core.outputs import atomic_output_dir, write_json
from ..core.reporting import module_logger
from ..fusion.recipe import refuse_rerank
from ..runner.graph import RUN_OUTPUTS
from ..runner.job import DEFAULT_JOB, Job
from ..runner.pipeline import run

logger = module_logger(__name__)

# the Parquet outputs of the run graph's stages (contract.jsonl travels as its lines)
TABLES = tuple(Path(name).stem for name in RUN_OUTPUTS if name.endswith(".parquet"))
ERROR = "__error__"
SHARD = "<query_id shard>"  # stands for the shard's temporary file in error messages
BUNDLE_SCHEMA = "table string, payload binary"


@dataclass(frozen=True)
class ShardJob:
    """What every shard runs: the run's job (its recipe named, Job.resolved), pickled to the
    executors."""

    job: Job
    tag: str | None = None  # a column of the log copied to every output row (by query_id)

    def __call__(self, shard: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = list(shard)
        if not batches or sum(b.num_rows for b in batches) == 0:
            return
        with tempfile.TemporaryDirectory(prefix="duckscore-shard-") as folder:
            # through Parquet, not pandas: NaN stays NaN and integer columns with NULLs stay integers
            log = Path(folder) / "shard.parquet"
            shard_log = pa.Table.from_batches(batches)
            # the tag is the partitions' own column, not the log's: no payload of its hits
            untagged = shard_log if self.tag is None else shard_log.drop_columns([self.tag])
            pq.write_table(untagged, log)
            out = Path(folder) / "out"
            try:
                run(log, out, replace(self.job, settings=None))
            except DuckscoreError as exc:
                yield _bundle(ERROR, str(exc).replace(str(log), SHARD).encode("utf-8"))
                return
            tags = self._tags(shard_log)
            for table in TABLES:
                yield _bundle(table, _ipc(tags(pq.read_table(out / f"{table}.parquet"))))
            lines = (out / "contract.jsonl").read_text(encoding="utf-8").splitlines()
            ids = [json.loads(line)["query_id"] for line in lines]
            contract = pa.table({"value": pa.array(lines, pa.string()), "query_id": ids})
            yield _bundle("contract", _ipc(tags(contract).drop_columns(["query_id"])))

    def _tags(self, log: pa.Table) -> Callable[[pa.Table], pa.Table]:
        """Adds the tag column to an output, by the output's query_id (a query has one tag)."""
        if self.tag is None:
            return lambda table: table
        tag = self.tag
        of_query = dict(zip(log["query_id"].to_pylist(), log[tag].to_pylist(), strict=True))

        def tagged(table: pa.Table) -> pa.Table:
            values = [of_query[q] for q in table["query_id"].to_pylist()]
            return table.append_column(tag, pa.array(values, log.schema.field(tag).type))

        return tagged


BUNDLE_FIELDS: dict[str, pa.DataType] = {"table": pa.string(), "payload": pa.binary()}


def _bundle(table: str, payload: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"table": [table], "payload": [payload]}, schema=pa.schema(BUNDLE_FIELDS)
    )


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


@dataclass(frozen=True)
class _Decode:
    """The payloads' tables as batches of one `schema`: every field nullable, so a shard whose
    column DuckDB wrote NOT NULL (its plan proved no NULL there) and one with NULLs in it are
    written as one dataset."""

    schema: pa.Schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for payload in batch.column("payload").to_pylist():
                assert payload is not None
                table = pa.ipc.open_stream(payload).read_all()
                yield from table.cast(self.schema).to_batches()


def _nullable(schema: pa.Schema) -> pa.Schema:
    return pa.schema([_nullable_field(field) for field in schema])


def _nullable_field(field: pa.Field[Any]) -> pa.Field[Any]:
    kind = field.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = _nullable_field(kind.value_field)
        kind = pa.large_list(item) if pa.types.is_large_list(kind) else pa.list_(item)
    elif pa.types.is_struct(kind):
        kind = pa.struct([_nullable_field(child) for child in kind])
    return pa.field(field.name, kind, nullable=True, metadata=field.metadata)


@dataclass(frozen=True)
class SparkRunResult:
    out_dir: Path
    shards: int
    rows: dict[str, int]
    manifest: dict[str, Any]


def run_on_spark(
    log: str | Path,
    out_dir: str | Path,
    job: Job = DEFAULT_JOB,
    *,
    shards: int = 8,
    master: str | None = None,
) -> SparkRunResult:
    """`duckscore run` with Spark sharding the log by query_id. Outputs: Parquet datasets
    fused.parquet/, parent_features.parquet/, parents.parquet/, queries.parquet/ (folders of
    parts, readable as one table), contract.jsonl/ (text parts) and manifest.json."""
    shard_job = ShardJob(job.resolved())
    recipe, policy = shard_job.job.load()  # fail early, once
    refuse_rerank(recipe, "--engine spark")
    if shards < 1:
        raise DuckscoreError(f"--shards must be at least 1, got {shards}")
    spark = spark_session(master)
    logger.info(
        f"reading {log} on Spark ({spark.sparkContext.master}), {shards} shards by query_id"
    )
    with spark_failures("reading the log"):
        frame = read_log(spark, str(log))
    bundle = scored_shards(frame, shard_job, shards, str(log))
    try:
        rows: dict[str, int] = {}
        with atomic_output_dir(Path(out_dir)) as stage:
            for table in (*TABLES, "contract"):
                rows[table] = sum(write_table(spark, bundle, table, stage).values())
            manifest = {
                "command": "run",
                "engine": "spark",
                "spark_master": spark.sparkContext.master,
                "shards": shards,
                "log": str(log),
                "recipe": recipe.policy.as_record(),
                "score_policy": policy.as_record(),
                "top_n": job.top_n,
                "rows": rows,
            }
            write_json(stage / "manifest.json", manifest)
    finally:
        bundle.unpersist()
    return SparkRunResult(Path(out_dir), shards, rows, manifest)


def scored_shards(frame: Any, job: ShardJob, shards: int, shown: str) -> Any:
    """The (table, payload) frame of every shard's outputs, cached; a shard's error is raised,
    naming `shown` (the log) rather than the shard's temporary file."""
    with warnings.catch_warnings():  # pyspark 4.3 warns that it does not fully support pandas 3
        warnings.simplefilter("ignore", FutureWarning)
        bundle = frame.repartition(shards, "query_id").mapInArrow(job, BUNDLE_SCHEMA).cache()
    with spark_failures("scoring the shards"):
        failure = (
            bundle.filter(f"`table` = '{ERROR}'")
            .select("payload")
            .orderBy("payload")
            .limit(1)
            .collect()
        )
    if failure:
        bundle.unpersist()
        message = bytes(failure[0][0]).decode("utf-8")
        # a row number within a shard would mislead; the key names the row
        raise DuckscoreError(
            re.sub(re.escape(SHARD) + r"(, row \d+)?", f"{shown}, a query_id shard", message)
        )
    return bundle


def write_table(
    spark: Any, bundle: Any, table: str, stage: Path, partition_by: str | None = None
) -> dict[Any, int]:
    """One output of the bundle written by Spark into `stage` (partitioned by `partition_by`,
    a column the shards tagged); its rows by partition value (None: unpartitioned)."""
    name = "contract.jsonl" if table == "contract" else f"{table}.parquet"
    with spark_failures(f"writing {name}"):
        return _write(bundle, table, name, stage, partition_by)


def _write(
    bundle: Any, table: str, name: str, stage: Path, partition_by: str | None
) -> dict[Any, int]:
    from pyspark.sql.pandas.types import from_arrow_schema

    parts = bundle.filter(bundle["table"] == table).select("payload")
    first = parts.limit(1).collect()
    if not first:
        return {}
    # the first shard's schema, but DuckDB decides NOT NULL per shard, from its plan
    schema = _nullable(pa.ipc.open_stream(bytes(first[0][0])).schema)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        decoded = parts.mapInArrow(_Decode(schema), from_arrow_schema(schema))
    if table == "contract":  # lines sorted: by part, and within each part of each partition
        decoded = decoded.orderBy("value")
        if partition_by is not None:
            decoded = decoded.sortWithinPartitions(partition_by, "value")
    writer = decoded.write.mode("error")
    if partition_by is not None:
        writer = writer.partitionBy(partition_by)
    (writer.text if table == "contract" else writer.parquet)(str(stage / name))
    if partition_by is None:
        written = _rows_written(stage / name, text=table == "contract")
        return {None: int(decoded.count()) if written is None else written}
    return {value: int(n) for value, n in decoded.groupBy(partition_by).count().collect()}


def _rows_written(folder: Path, *, text: bool) -> int | None:
    """The rows of an output Spark wrote unpartitioned, read from its parts (a Parquet part's
    footer, a plain text part's lines): a second Spark job over the shards took a fifth of a
    run. None when a text part is compressed (a cluster's Hadoop settings): Spark counts."""
    parts = sorted(folder.glob("part-*"))
    if not text:
        return sum(pq.ParquetFile(part).metadata.num_rows for part in parts)
    if any(part.suffix != ".txt" for part in parts):
        return None
    return sum(part.read_bytes().count(b"\n") for part in parts)


@contextmanager
def spark_failures(stage: str) -> Iterator[None]:
    """A failure inside Spark (the JVM's, or a Python worker's) as one line naming the stage and
    its deepest cause, not py4j's traceback of the JVM's stack."""
    from py4j.protocol import Py4JError, Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        yield
    except Py4JJavaError as exc:
        raise DuckscoreError(f"Spark failed {stage}: {_root_cause(exc.java_exception)}") from None
    except (PySparkException, Py4JError) as exc:
        raise DuckscoreError(f"Spark failed {stage}: {_first_line(str(exc))}") from None


def _root_cause(throwable: Any) -> str:
    while throwable.getCause() is not None and throwable.getCause() != throwable:
        throwable = throwable.getCause()
    return _first_line(str(throwable.toString()))


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "no message"


def read_log(spark: Any, log: str | list[str]) -> Any:
    """The log (a path, glob or folder, or a list of files of one type) as a Spark frame."""
    paths = [log] if isinstance(log, str) else log
    suffix = Path(paths[0].rstrip("/*")).suffix.lower()
    if suffix in (".csv", ".tsv"):
        return spark.read.option("header", True).option("inferSchema", True).csv(paths)
    if suffix in (".json", ".jsonl", ".ndjson"):
        return spark.read.json(paths)
    return spark.read.parquet(*paths)


def spark_session(master: str | None) -> Any:
    """A Spark session: `master` or $DUCKSCORE_SPARK_MASTER, else the one spark-submit gave,
    else local mode on every core. Executors run this Python (they need duckscore installed)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise DuckscoreError(needs_extra("--engine spark", "spark")) from None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName("duckscore")
    master = master or os.environ.get("DUCKSCORE_SPARK_MASTER")
    if master:
        builder = builder.master(master)
    elif SparkSession.getActiveSession() is None and "SPARK_HOME" not in os.environ:
        builder = builder.master("local[*]")
    if SparkSession.getActiveSession() is not None:  # the user's (spark-submit): as it is
        return builder.getOrCreate()
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")
    )
    with warnings.catch_warnings():  # pyspark 4.3 warns that it does not fully support pandas 3
        warnings.simplefilter("ignore", FutureWarning)
        spark = builder.getOrCreate()
    # a failure is duckscore's one line (spark_failures), not the JVM's logged stack traces
    spark.sparkContext.setLogLevel("OFF")
    return spark
