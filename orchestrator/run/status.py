"""`duckscore status`: the partitions of a `run --partition-by` output, from its ledger, and,
given the log and the run's settings, which of them an `--incremental` run would compute."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.errors import OutputError
from ..core.policy import load_policy
from ..fuse.recipe import FUSE_RECIPE
from ..score.policy import SCORE_POLICY
from .partitions import (
    LEDGER,
    Entry,
    Ledger,
    file_records,
    find_partitions,
    read_ledger,
    settings_digest,
    state_of,
)

NOT_CHECKED = "-"
NO_LOG = "no log"


@dataclass(frozen=True)
class LogSettings:
    """The log and the settings a run would use, to tell stale partitions from fresh."""

    log: str
    log_format: str = "retrieval_log"
    recipe: str = "hybrid_v1"
    policy: str = "overall_v1"
    recipe_overrides: tuple[str, ...] = ()
    policy_overrides: tuple[str, ...] = ()
    top_n: int = 5
    explain: bool = True


@dataclass(frozen=True)
class PartitionState:
    partition: str
    entry: Entry | None
    state: str  # fresh, new, files changed, settings changed, no log; "-" when not checked


def partition_states(out_dir: Path, against: LogSettings | None = None) -> list[PartitionState]:
    """Every partition of the output's ledger (and, given a log, of the log), by name."""
    shown = f"--out {out_dir}"
    if not out_dir.is_dir():
        raise OutputError(f"{shown}: no such folder")
    ledger = read_ledger(out_dir, shown)
    if ledger is None:
        raise OutputError(f"{shown}: has no {LEDGER}: not the output of run --partition-by")
    if against is None:
        return [
            PartitionState(f"{ledger.partition_by}={value}", entry, NOT_CHECKED)
            for value, entry in sorted(ledger.entries.items())
        ]
    return _checked(ledger, against)


def _checked(ledger: Ledger, against: LogSettings) -> list[PartitionState]:
    recipe = load_policy(FUSE_RECIPE, against.recipe, list(against.recipe_overrides))
    policy = load_policy(SCORE_POLICY, against.policy, list(against.policy_overrides))
    digest = settings_digest(recipe, policy, against.top_n, against.explain, against.log_format)
    key = ledger.partition_by
    states = {
        value: PartitionState(f"{key}={value}", entry, NO_LOG)
        for value, entry in ledger.entries.items()
    }
    for partition in find_partitions(against.log, key):
        entry = ledger.entries.get(partition.value)
        state = state_of(entry, file_records(partition, entry), digest)
        states[partition.value] = PartitionState(partition.name, entry, state)
    return [states[value] for value in sorted(states)]
