"""`run --engine spark --partition-by KEY`: every stale partition in one Spark job.

The stale partitions' files are read together, each row tagged with its partition's number;
the job shards them by query_id as `run --engine spark` does (a query is in one partition, so
a shard's outputs carry their query's tag), and Spark writes each output partitioned by the
tag. The partitions are then handed to the partitioned run (runner/incremental.py) one at a time,
each to be published with its ledger line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.outputs import write_json
from ..core.reporting import module_logger
from ..runner.incremental import Compute, Computed, PartitionJob
from ..runner.partitions import Partition
from .spark import (
    TABLES,
    ShardJob,
    read_log,
    scored_shards,
    spark_failures,
    spark_session,
    write_table,
)

logger = module_logger(__name__)

TAG = "duckscore_partition"


def compute_on_spark(shards: int, master: str | None) -> Compute:
    """A Compute running the partitions as one Spark job with `shards` query_id shards."""

    def compute(
        job: PartitionJob, partitions: Sequence[Partition], scratch: Path
    ) -> Iterator[Computed]:
        if not partitions:
            return
        spark = spark_session(master)
        logger.info(
            f"{len(partitions)} partitions on Spark ({spark.sparkContext.master}), "
            f"{shards} shards by query_id"
        )
        shard_job = ShardJob(job.job, TAG)
        with spark_failures("reading the log"):
            log = _tagged_log(spark, partitions)
        bundle = scored_shards(log, shard_job, shards, "--log")
        stage = scratch / "spark"
        try:
            rows = {
                table: write_table(spark, bundle, table, stage, TAG)
                for table in (*TABLES, "contract")
            }
        finally:
            bundle.unpersist()
        for number, partition in enumerate(partitions):
            folder = scratch / partition.name
            folder.mkdir()
            counts = {table: by_tag.get(number, 0) for table, by_tag in rows.items()}
            for table in rows:
                name = "contract.jsonl" if table == "contract" else f"{table}.parquet"
                written = stage / name / f"{TAG}={number}"
                if written.is_dir():  # Spark writes no folder for a partition without rows
                    os.rename(written, folder / name)
            write_json(
                folder / "manifest.json",
                {"command": "run", "engine": "spark", "spark_master": spark.sparkContext.master,
                 "shards": shards, "log": partition.folder, "recipe": job.job.recipe,
                 "score_policy": job.job.policy, "top_n": job.job.top_n, "rows": counts},
            )  # fmt: skip
            yield Computed(partition, folder, counts)

    return compute


def _tagged_log(spark: Any, partitions: Sequence[Partition]) -> Any:
    from pyspark.sql import functions

    frames = [
        read_log(spark, list(p.files)).withColumn(TAG, functions.lit(number))
        for number, p in enumerate(partitions)
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    return union
