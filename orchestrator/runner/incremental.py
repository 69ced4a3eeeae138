"""`run --partition-by KEY [--incremental]`: a hive-partitioned log scored into an output
partitioned the same way, one partition at a time.

Every partition's outputs are those of `run` on its files alone, laid out as hive folders
(`fused/dt=…/part.parquet`, `contract/dt=…/part.jsonl`, `manifest/dt=…/manifest.json` …). Each
partition is published as one revision of the output folder together with its ledger line
(core/swap.py exchanges the folder whole): a kill leaves every partition old or new, and the
ledger true. A revision is built from the one before (publish.py): publishing a partition costs
the same however many are already out.

With `incremental`, partitions whose fingerprint and settings equal the ledger's and whose
outputs are whole are left as they are, and so are partitions whose log is gone; without it
every partition of the log is computed and partitions the log no longer has are removed (last,
after the others are in). Partitions computed with other settings than the run's are refused
with `incremental` unless `force`; otherwise they are computed again and every partition is
published in one revision, so that one output never mixes two settings. An output whose ledger
is gone is computed again whole. Before anything is computed, every partition to compute is
checked, and no query may have hits in two partitions (the kept partitions' queries included).
"""

from __future__ import annotations

import glob
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..core.errors import InputError, OptionError, OutputError
from ..core.inputs import Table
from ..core.outputs import OutputTarget, check_output_dir, output_target
from ..core.render import lit
from ..core.reporting import module_logger, silenced
from ..core.session import Session
from ..fusion.log import open_log
from ..fusion.recipe import refuse_rerank
from ..fusion.recipe_view import Recipe
from ..fusion.traces import TraceLog
from ..scoring.policy_view import ScorePolicy
from ..scoring.stages import DecisionCounts
from ..scoring.stages import decided as counted_and_warned
from .job import DEFAULT_JOB, Job
from .partitions import (
    LEDGER,
    Entry,
    FileRecord,
    Ledger,
    Partition,
    checked_key,
    damage_of,
    differences,
    digest_of,
    file_records,
    find_partitions,
    held_partitions,
    read_ledger,
    settings_record,
    state_of,
)
from .pipeline import run
from .publish import Publisher

logger = module_logger(__name__)

RETRIEVAL_LOG = "retrieval_log"
QUERIES = "queries"  # the output folder of the partitions' queries files (publish.py's _place)


@dataclass(frozen=True)
class PartitionedResult:
    out_dir: Path
    partition_by: str
    computed: list[str]
    kept: list[str]
    removed: list[str]
    queries: int
    parents: int
    # how the policy decided the queries of the partitions computed (None: none computed)
    decisions: DecisionCounts | None = None


@dataclass(frozen=True)
class PartitionJob:
    """What every partition of one run is computed with: the run's job, its recipe named
    (Job.resolved), and the log's format."""

    job: Job
    log_format: str = RETRIEVAL_LOG

    @classmethod
    def resolved(cls, job: Job, log_format: str = RETRIEVAL_LOG) -> PartitionJob:
        return cls(job.resolved(), log_format)

    def loaded(self) -> tuple[Recipe, ScorePolicy, dict[str, Any]]:
        """The recipe and the policy, loaded, and every setting that decides a partition's
        outputs (what the ledger records, and compares by its digest)."""
        recipe, policy = self.job.load()
        refuse_rerank(recipe, "--partition-by")
        decided = settings_record(recipe, policy, self.job.top_n, self.job.explain, self.log_format)
        return recipe, policy, decided

    def log_of(self, partition: Partition) -> Table:
        files = partition.log()
        return files if self.log_format == RETRIEVAL_LOG else TraceLog(files, self.log_format)


class Computed(NamedTuple):
    """One partition computed into `folder`, as `run` writes an output folder (each output a
    file, or a folder of parts), and the rows of each output (by name without suffix)."""

    partition: Partition
    folder: Path
    rows: dict[str, int]
    decisions: DecisionCounts | None = None  # how `run` decided its queries (None: not counted)


# computes the partitions into folders under the scratch folder, yielding each when it is done
Compute = Callable[[PartitionJob, Sequence[Partition], Path], Iterator[Computed]]


def compute_on_duckdb(
    job: PartitionJob, partitions: Sequence[Partition], scratch: Path
) -> Iterator[Computed]:
    """One `run` per partition, in turn: each is staged (and published) before the next
    starts."""
    for number, partition in enumerate(partitions, 1):
        logger.info(f"{partition.name} ({number}/{len(partitions)}): fusing and scoring")
        folder = scratch / partition.name
        with silenced():  # the partition's line above, the decisions of all of them after
            result = run(job.log_of(partition), folder, job.job)
        rows = {Path(name).stem: r["rows"] for name, r in result.manifest["outputs"].items()}
        yield Computed(partition, folder, rows, result.decisions)


@dataclass(frozen=True)
class Plan:
    """What a run does: the partitions it computes (with their files' records), the ledger's
    partitions it keeps and those it removes, and whether it publishes all in one revision."""

    stale: list[Partition]
    records: dict[str, list[FileRecord]]
    kept: list[str]
    removed: list[str]
    at_once: bool


def run_partitioned(
    log: str,
    out_dir: str | Path,
    partition_by: str,
    job: Job = DEFAULT_JOB,
    *,
    incremental: bool = False,
    force: bool = False,
    log_format: str = RETRIEVAL_LOG,
    compute: Compute = compute_on_duckdb,
) -> PartitionedResult:
    """Score the stale partitions of `log` into `out_dir` (see the module doc); `compute` runs
    them (on DuckDB, one at a time, unless another engine is given). `force`: with
    `incremental`, compute every partition again when the ledger's settings are not these."""
    key = checked_key(partition_by)
    each = PartitionJob.resolved(job, log_format)
    loaded_recipe, loaded_policy, decided = each.loaded()
    check_output_dir(out_dir, "--out", {"--log": log})
    partitions = find_partitions(log, key)
    publisher: Publisher | None = None
    queries = parents = 0
    try:
        with output_target(out_dir, inputs=[p.folder for p in partitions]) as target:
            ledger = _ledger_of(target, key)
            unlisted = _unlisted(target, ledger)
            plan = _plan(target, ledger, partitions, decided, incremental, force)
            logger.info(
                f"{len(partitions)} partitions by {key}: {len(plan.stale)} to compute, "
                f"{len(plan.kept)} kept"
            )
            _check_queries(plan.stale, plan.kept, key, target.destination, each, loaded_recipe)
            versions = (loaded_recipe.version, loaded_policy.version, decided)
            publisher = Publisher(target, ledger)
            done: list[Computed] = []
            try:
                publisher.clear(f"{key}={value}" for value in unlisted)
                for computed in compute(each, plan.stale, publisher.scratch):
                    partition, folder, rows = computed.partition, computed.folder, computed.rows
                    entry = publisher.stage(
                        partition, folder, rows, plan.records[partition.value], versions
                    )
                    done.append(computed)
                    queries += entry.rows.get("queries", 0)
                    parents += entry.rows.get("parents", 0)
                    if not plan.at_once:
                        publisher.publish()
                for value in plan.removed:
                    publisher.remove(value)
                publisher.publish()
            finally:
                publisher.close()
            decisions = _decided(target.destination, done, each, loaded_policy)
    except BaseException as exc:
        finished = publisher.finished if publisher else 0
        if finished:  # what an interrupt message says the output keeps
            exc.add_note(f"the {_count(finished, 'partition')} it finished")
        raise
    return PartitionedResult(
        Path(out_dir), key, [p.name for p in plan.stale], [f"{key}={v}" for v in plan.kept],
        [f"{key}={v}" for v in plan.removed], queries, parents, decisions,
    )  # fmt: skip


def _decided(
    out_dir: Path,
    computed: Sequence[Computed],
    job: PartitionJob,
    policy: ScorePolicy,
) -> DecisionCounts | None:
    """How the policy decided the queries of the partitions this run computed, read back from
    their published queries files, with the warnings a run prints about them; None when none
    was computed, or a Compute did not decide them as `run` does (Spark's: `run --engine spark`
    prints no decisions either)."""
    if not computed or any(c.decisions is None for c in computed):
        return None
    files = [
        str(path)
        for c in computed
        for path in sorted((out_dir / QUERIES / c.partition.name).glob("**/*.parquet"))
    ]
    if not files:
        return None
    with Session(job.job.settings) as session:
        session.execute(f"CREATE TEMP VIEW decided AS FROM read_parquet({lit(files)})")
        return counted_and_warned(session, policy, "decided")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


def _ledger_of(target: OutputTarget, key: str) -> Ledger:
    ledger = read_ledger(target.destination, target.shown)
    # without its ledger, an output's key is its manifest folders'
    keys = {name.split("=", 1)[0] for name in held_partitions(target.destination)}
    partition_by = ledger.partition_by if ledger else min(keys - {key}, default=key)
    if partition_by != key:
        raise OutputError(
            f"{target.shown}: is partitioned by {partition_by}, not {key}; give "
            f"--partition-by {partition_by} or another folder"
        )
    return ledger or Ledger(key, {})


def _unlisted(target: OutputTarget, ledger: Ledger) -> list[str]:
    """The partitions the output holds and its ledger does not list: removed by the first
    revision (a deleted ledger: all of them, the log's computed again)."""
    key = ledger.partition_by
    held = [
        n.split("=", 1)[1] for n in held_partitions(target.destination) if n.startswith(f"{key}=")
    ]
    unlisted = [value for value in held if value not in ledger.entries]
    if unlisted and not (target.destination / LEDGER).exists():
        logger.warning(
            f"{target.shown}: {LEDGER} is missing: every partition of the log is computed again "
            f"and the {_count(len(unlisted), 'partition')} the output holds "
            f"{'is' if len(unlisted) == 1 else 'are'} replaced"
        )
    elif unlisted:
        names = ", ".join(f"{key}={value}" for value in unlisted[:3])
        logger.warning(
            f"{target.shown}: holds {_count(len(unlisted), 'partition')} its {LEDGER} does not "
            f"list ({names}{', …' * (len(unlisted) > 3)}): removed"
        )
    return unlisted


def _plan(
    target: OutputTarget,
    ledger: Ledger,
    partitions: Sequence[Partition],
    decided: dict[str, Any],
    incremental: bool,
    force: bool,
) -> Plan:
    """Which partitions to compute, keep and remove (see the module doc); refused when an
    incremental run would change the settings of the output without `force`."""
    key, digest = ledger.partition_by, digest_of(decided)
    records = {p.value: file_records(p, ledger.entries.get(p.value)) for p in partitions}
    present = {p.value for p in partitions}
    other = [entry for entry in ledger.entries.values() if entry.settings != digest]
    gone = [e.partition for e in other if e.partition not in present] if incremental else []
    if other:
        _other_settings(target, ledger, other, gone, decided, incremental and not force)
    stale = []
    for partition in partitions:
        entry = ledger.entries.get(partition.value)
        state = state_of(entry, records[partition.value], digest)
        if incremental and entry is not None and state == "fresh":
            damage = damage_of(target.destination, key, entry)
            state = state_of(entry, records[partition.value], digest, damage)
        if not incremental or state != "fresh":
            stale.append(partition)
    computing = {p.value for p in stale}
    removed = [
        v for v in sorted(ledger.entries) if v not in present and (not incremental or v in gone)
    ]
    kept = [v for v in sorted(ledger.entries) if v not in computing and v not in removed]
    for value in kept:
        damage = (
            None if value in present else damage_of(target.destination, key, ledger.entries[value])
        )
        if damage:
            logger.warning(
                f"{key}={value}: {damage}, and the log has no such partition to compute it "
                "again: kept as it is"
            )
    return Plan(stale, records, kept, removed, at_once=bool(other))


def _other_settings(
    target: OutputTarget,
    ledger: Ledger,
    other: list[Entry],
    gone: list[str],
    decided: dict[str, Any],
    refused: bool,
) -> None:
    """Partitions computed with other settings than the run's: refused (one line), or said."""
    said = "; ".join(dict.fromkeys(d for entry in other for d in differences(entry, decided)))
    count, total = len(other), len(ledger.entries)
    which = (
        f"the {_count(count, 'partition')}"
        if count == total
        else f"{count} of the {total} partitions"
    )
    subject = f"{which} of {target.shown} {'were' if count > 1 else 'was'}"
    if refused:
        raise OptionError(
            f"--incremental: {subject} computed with other settings ({said}); give --force to "
            f"compute {'every partition' if count == total else 'them'} again under these, or "
            "the options the ledger's run was given"
        )
    no_log = (
        f"; the {_count(len(gone), 'partition')} with no log {'is' if len(gone) == 1 else 'are'} "
        "removed"
        if gone
        else ""
    )
    logger.warning(
        f"{subject} computed with other settings ({said}): computed again under these, the "
        f"output moves to them at once, when all are done{no_log}"
    )


def _check_queries(
    stale: Sequence[Partition],
    kept: Sequence[str],
    key: str,
    out_dir: Path,
    job: PartitionJob,
    recipe: Recipe,
) -> None:
    """Every partition to compute passes the log's checks, and no query has hits in two
    partitions (the kept ones' queries read from their outputs)."""
    if not stale:
        return
    with Session(job.job.settings) as session:
        session.execute("CREATE TEMP TABLE query_partitions (query_id VARCHAR, part VARCHAR)")
        for partition in stale:
            with silenced():  # checked only, and as quietly as compute_on_duckdb runs it
                open_log(session, job.log_of(partition), recipe)
            session.execute(
                f"INSERT INTO query_partitions SELECT DISTINCT query_id, {lit(partition.name)} "
                "FROM retrieval_log"
            )
        files = {  # part.parquet, or a folder of parts as Spark writes them: one read for all
            path: f"{key}={value}"
            for value in kept
            for path in glob.glob(
                glob.escape(str(out_dir / "queries" / f"{key}={value}")) + "/*.parquet"
            )
        }
        if files:
            listed = ", ".join(f"({lit(path)}, {lit(part)})" for path, part in files.items())
            session.execute(
                "INSERT INTO query_partitions SELECT DISTINCT q.query_id, f.part FROM "
                f"read_parquet([{', '.join(map(lit, files))}], filename = true) q "
                f"JOIN (VALUES {listed}) f(file, part) ON q.filename = f.file"
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
