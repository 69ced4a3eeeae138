"""`duckscore status`: the partitions of a `run --partition-by` output, from its ledger, whether
each one's outputs are still those the ledger recorded, and, given the log and the run's
settings, which of them an `--incremental` run would compute."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import OutputError
from .incremental import PartitionJob
from .partitions import (
    LEDGER,
    Entry,
    Ledger,
    damage_of,
    digest_of,
    file_records,
    find_partitions,
    held_partitions,
    read_ledger,
    state_of,
)

NOT_CHECKED = "-"
NO_LOG = "no log"
DAMAGED = "damaged"
DAMAGED_NO_LOG = "damaged, no log"


@dataclass(frozen=True)
class PartitionState:
    partition: str
    entry: Entry | None
    # fresh, new, files changed, settings changed, damaged, no log, damaged, no log;
    # without the log "-" (not checked) or damaged
    state: str
    damage: str | None = (
        None  # what is wrong with its outputs (`fused/dt=…/part.parquet is missing`)
    )


def partition_states(
    out_dir: Path, log: str | None = None, job: PartitionJob | None = None
) -> list[PartitionState]:
    """Every partition of the output's ledger, by name, each checked against its outputs;
    given the log and the run's settings (`job`), the log's partitions too, each with its
    state."""
    shown = f"--out {out_dir}"
    if not out_dir.is_dir():
        raise OutputError(f"{shown}: no such folder")
    ledger = read_ledger(out_dir, shown)
    if ledger is None and held_partitions(out_dir):
        raise OutputError(
            f"{shown}: {LEDGER} is missing; the next run --partition-by computes every "
            "partition again"
        )
    if ledger is None:
        raise OutputError(f"{shown}: has no {LEDGER}: not the output of run --partition-by")
    key = ledger.partition_by
    damages = {value: damage_of(out_dir, key, entry) for value, entry in ledger.entries.items()}
    if log is None or job is None:
        return [
            PartitionState(
                entry.name(key), entry, DAMAGED if damages[value] else NOT_CHECKED, damages[value]
            )
            for value, entry in sorted(ledger.entries.items())
        ]
    return _checked(ledger, damages, log, job)


def _checked(
    ledger: Ledger, damages: dict[str, str | None], log: str, job: PartitionJob
) -> list[PartitionState]:
    digest = digest_of(job.loaded()[2])
    key = ledger.partition_by
    states = {
        value: PartitionState(
            entry.name(key), entry, DAMAGED_NO_LOG if damages[value] else NO_LOG, damages[value]
        )
        for value, entry in ledger.entries.items()
    }
    for partition in find_partitions(log, key):
        entry = ledger.entries.get(partition.value)
        damage = damages.get(partition.value)
        state = state_of(entry, file_records(partition, entry), digest, damage)
        states[partition.value] = PartitionState(partition.name, entry, state, damage)
    return [states[value] for value in sorted(states)]
