"""`run --partition-by KEY [--incremental]`: a hive-partitioned log scored into an output
partitioned the same way, one partition at a time.

Every partition's outputs are those of `run` on its files alone, laid out as hive folders
(`fused/dt=…/part.parquet`, `contract/dt=…/part.jsonl`, `manifest/dt=…/manifest.json` …). Each
partition is published as one revision of the output folder (core/outputs.py: the folder is
exchanged whole, its other partitions hard-linked, so they stay the same files) together with
its line of the ledger: a kill leaves every partition old or new, and the ledger true.

With `incremental`, partitions whose fingerprint and settings equal the ledger's are left as
they are, and so are partitions whose log is gone; without it every partition of the log is
computed and partitions the log no longer has are removed (last, after the others are in).
Before anything is computed, every partition to compute is checked, and no query may have hits
in two partitions (the kept partitions' queries included).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..core.errors import InputError, OutputError
from ..core.inputs import Table
from ..core.outputs import OutputTarget, output_target, write_json
from ..core.policy import Policy
from ..core.progress import SILENT, Progress
from ..core.render import lit
from ..core.session import Session
from ..fuse.log import open_log
from ..fuse.traces import TraceLog
from .job import DEFAULT_JOB, Job
from .partitions import (
    LEDGER,
    MANIFESTS,
    Entry,
    FileRecord,
    Ledger,
    Partition,
    checked_key,
    file_records,
    find_partitions,
    fingerprint_of,
    now,
    read_ledger,
    settings_digest,
    state_of,
)
from .pipeline import run

RETRIEVAL_LOG = "retrieval_log"


@dataclass(frozen=True)
class PartitionedResult:
    out_dir: Path
    partition_by: str
    computed: list[str]
    kept: list[str]
    removed: list[str]
    queries: int
    parents: int


@dataclass(frozen=True)
class PartitionJob:
    """What every partition of one run is computed with: the run's job, its recipe named
    (Job.resolved), and the log's format."""

    job: Job
    log_format: str = RETRIEVAL_LOG

    @classmethod
    def resolved(cls, job: Job, log_format: str = RETRIEVAL_LOG) -> PartitionJob:
        return cls(job.resolved(), log_format)

    def loaded(self) -> tuple[Policy, Policy, str]:
        """The recipe and the policy, loaded, and the digest of every setting that decides a
        partition's outputs (what the ledger compares)."""
        recipe, policy = self.job.load()
        digest = settings_digest(recipe, policy, self.job.top_n, self.job.explain, self.log_format)
        return recipe, policy, digest

    def log_of(self, partition: Partition) -> Table:
        files = partition.log()
        return files if self.log_format == RETRIEVAL_LOG else TraceLog(files, self.log_format)


class Computed(NamedTuple):
    """One partition computed into `folder`, as `run` writes an output folder (each output a
    file, or a folder of parts), and the rows of each output (by name without suffix)."""

    partition: Partition
    folder: Path
    rows: dict[str, int]


# computes the partitions into folders under the scratch folder, yielding each when it is done
Compute = Callable[[PartitionJob, Sequence[Partition], Path, Progress], Iterator[Computed]]


def compute_on_duckdb(
    job: PartitionJob, partitions: Sequence[Partition], scratch: Path, progress: Progress
) -> Iterator[Computed]:
    """One `run` per partition, in turn: each is published before the next starts."""
    for number, partition in enumerate(partitions, 1):
        progress.step(f"{partition.name} ({number}/{len(partitions)}): fusing and scoring")
        folder = scratch / partition.name
        result = run(job.log_of(partition), folder, job.job)
        rows = {Path(name).stem: r["rows"] for name, r in result.manifest["outputs"].items()}
        yield Computed(partition, folder, rows)


def run_partitioned(
    log: str,
    out_dir: str | Path,
    partition_by: str,
    job: Job = DEFAULT_JOB,
    *,
    incremental: bool = False,
    progress: Progress = SILENT,
    log_format: str = RETRIEVAL_LOG,
    compute: Compute = compute_on_duckdb,
) -> PartitionedResult:
    """Score the stale partitions of `log` into `out_dir` (see the module doc); `compute` runs
    them (on DuckDB, one at a time, unless another engine is given)."""
    key = checked_key(partition_by)
    each = PartitionJob.resolved(job, log_format)
    loaded_recipe, loaded_policy, digest = each.loaded()
    partitions = find_partitions(log, key)
    with output_target(out_dir, inputs=[p.folder for p in partitions]) as target:
        ledger = _ledger_of(target, key)
        records = {p.value: file_records(p, ledger.entries.get(p.value)) for p in partitions}
        stale = [
            p
            for p in partitions
            if not incremental
            or state_of(ledger.entries.get(p.value), records[p.value], digest) != "fresh"
        ]
        present = {p.value for p in partitions}
        computing = {p.value for p in stale}
        removed = [] if incremental else [v for v in ledger.entries if v not in present]
        kept = [v for v in ledger.entries if v not in computing and v not in removed]
        progress.step(
            f"{len(partitions)} partitions by {key}: {len(stale)} to compute, {len(kept)} kept"
        )
        _check_queries(stale, kept, key, target.destination, each, loaded_recipe)
        versions = (loaded_recipe.version, loaded_policy.version, digest)
        queries = parents = 0
        scratch = target.scratch()
        finished = 0
        try:
            for computed in compute(each, stale, scratch, progress):
                entry = _publish(
                    target, ledger, computed, records[computed.partition.value], versions
                )
                finished += 1
                queries += entry.rows.get("queries", 0)
                parents += entry.rows.get("parents", 0)
        except BaseException as exc:
            if finished:  # what an interrupt message says the output keeps
                exc.add_note(f"the {finished} partition{'s' * (finished > 1)} it finished")
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if removed:
            with target.revision(keep_current=True) as staging:
                for value in removed:
                    _remove_partition(staging, ledger.entries.pop(value), key)
                _write_ledger(staging, ledger)
    return PartitionedResult(
        Path(out_dir), key, [p.name for p in stale], [f"{key}={v}" for v in kept],
        [f"{key}={v}" for v in removed], queries, parents,
    )  # fmt: skip


def _ledger_of(target: OutputTarget, key: str) -> Ledger:
    ledger = read_ledger(target.destination, target.shown)
    if ledger is None:
        return Ledger(key, {})
    if ledger.partition_by != key:
        raise OutputError(
            f"{target.shown}: is partitioned by {ledger.partition_by}, not {key}; give "
            f"--partition-by {ledger.partition_by} or another folder"
        )
    return ledger


def _check_queries(
    stale: Sequence[Partition],
    kept: Sequence[str],
    key: str,
    out_dir: Path,
    job: PartitionJob,
    recipe: Policy,
) -> None:
    """Every partition to compute passes the log's checks, and no query has hits in two
    partitions (the kept ones' queries read from their outputs)."""
    if not stale:
        return
    with Session(job.job.settings) as session:
        session.execute("CREATE TEMP TABLE query_partitions (query_id VARCHAR, part VARCHAR)")
        for partition in stale:
            open_log(session, job.log_of(partition), recipe)
            session.execute(
                f"INSERT INTO query_partitions SELECT DISTINCT query_id, {lit(partition.name)} "
                "FROM retrieval_log"
            )
        for value in kept:
            queries = out_dir / "queries" / f"{key}={value}" / "part.parquet"
            if queries.exists():
                session.execute(
                    f"INSERT INTO query_partitions SELECT DISTINCT query_id, "
                    f"{lit(f'{key}={value}')} FROM read_parquet({lit(str(queries))})"
                )
        clash = session.first_row(
            "SELECT query_id, min(part), max(part) FROM query_partitions GROUP BY query_id "
            "HAVING count(DISTINCT part) > 1 ORDER BY query_id LIMIT 1"
        )
    if clash is not None:
        query_id, first, second = clash
        raise InputError(
            f"--log: query_id {query_id!r} has hits in two partitions, {first} and {second}; "
            "a query belongs to one partition"
        )


def _publish(
    target: OutputTarget,
    ledger: Ledger,
    computed: Computed,
    records: list[FileRecord],
    versions: tuple[str, str, str],
) -> Entry:
    """One computed partition moved into a new revision of the output, with its ledger line."""
    partition = computed.partition
    recipe, policy, digest = versions
    entry = Entry(
        partition.value, partition.folder, fingerprint_of(records), records, recipe, policy,
        digest, computed.rows, now(),
    )  # fmt: skip
    with target.revision(keep_current=True) as staging:
        old = ledger.entries.get(partition.value)
        if old is not None:
            _remove_partition(staging, old, partition.key)
        _place(computed.folder, staging, partition.name)
        ledger.entries[partition.value] = entry  # a failure from here on ends the run
        _write_ledger(staging, ledger)
    return entry


def _place(run_folder: Path, staging: Path, name: str) -> None:
    """`run`'s files as hive partitions: x.parquet → x/<name>/part.parquet (.jsonl alike; a
    folder of parts x.parquet/ → x/<name>/); manifest.json and sql/ → manifest/<name>/."""
    for entry in sorted(run_folder.iterdir()):
        if entry.suffix in (".parquet", ".jsonl") and entry.is_dir():
            destination = staging / entry.stem / name
        elif entry.suffix in (".parquet", ".jsonl"):
            destination = staging / entry.stem / name / f"part{entry.suffix}"
        else:
            destination = staging / MANIFESTS / name / entry.name
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.rename(entry, destination)


def _remove_partition(staging: Path, entry: Entry, key: str) -> None:
    for kind in [*entry.rows, MANIFESTS]:
        shutil.rmtree(staging / kind / f"{key}={entry.partition}", ignore_errors=True)
        if (staging / kind).is_dir() and not any((staging / kind).iterdir()):
            (staging / kind).rmdir()


def _write_ledger(staging: Path, ledger: Ledger) -> None:
    path = staging / LEDGER
    path.unlink(missing_ok=True)  # a hard link to the published ledger: never write through it
    write_json(path, ledger.document())
