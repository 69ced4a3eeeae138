"""`duckscore status`: the partitions of a `run --partition-by` output, from its ledger, and,
given the log and the run's settings, which of them an `--incremental` run would compute."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import OutputError
from .incremental import PartitionJob
from .partitions import LEDGER, Entry, Ledger, file_records, find_partitions, read_ledger, state_of

NOT_CHECKED = "-"
NO_LOG = "no log"


@dataclass(frozen=True)
class PartitionState:
    partition: str
    entry: Entry | None
    state: str  # fresh, new, files changed, settings changed, no log; "-" when not checked


def partition_states(
    out_dir: Path, log: str | None = None, job: PartitionJob | None = None
) -> list[PartitionState]:
    """Every partition of the output's ledger, by name; given the log and the run's settings
    (`job`), the log's partitions too, each with its state."""
    shown = f"--out {out_dir}"
    if not out_dir.is_dir():
        raise OutputError(f"{shown}: no such folder")
    ledger = read_ledger(out_dir, shown)
    if ledger is None:
        raise OutputError(f"{shown}: has no {LEDGER}: not the output of run --partition-by")
    if log is None or job is None:
        return [
            PartitionState(f"{ledger.partition_by}={value}", entry, NOT_CHECKED)
            for value, entry in sorted(ledger.entries.items())
        ]
    return _checked(ledger, log, job)


def _checked(ledger: Ledger, log: str, job: PartitionJob) -> list[PartitionState]:
    digest = job.loaded()[2]
    key = ledger.partition_by
    states = {
        value: PartitionState(f"{key}={value}", entry, NO_LOG)
        for value, entry in ledger.entries.items()
    }
    for partition in find_partitions(log, key):
        entry = ledger.entries.get(partition.value)
        state = state_of(entry, file_records(partition, entry), digest)
        states[partition.value] = PartitionState(partition.name, entry, state)
    return [states[value] for value in sorted(states)]
