"""What a command says it did, on stderr: one rule for every command (docs/outputs.md, "What a
command prints"). stdout holds a command's data — a table, JSON, SQL, the lines a user pipes or
parses — and nothing else; a message — what was done, where the outputs are — is a line
`duckscore: …` on stderr, printed by `done` (and the helpers below, which phrase the lines of the
commands that write an output folder), silenced by -q and by --no-progress."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..runner.incremental import PartitionedResult
    from ..scoring.stages import DecisionCounts

MAX_NAMES = 7


def written(
    what: str, out_dir: Path, manifest: Mapping[str, Any], first: Sequence[str] = ()
) -> None:
    """`duckscore: <what> into <out>/ (<files>)` on stderr — what the command did and where its
    outputs are, the files of `first` named first — unless -q or --no-progress. On stderr, so
    stdout stays free for a command's data, as in `duckscore eval --json`."""
    if _quiet():
        return
    others = (*manifest["outputs"], "manifest.json", "sql/")
    names = [*first, *(name for name in others if name not in first)]
    if len(names) > MAX_NAMES:
        names = [*names[: MAX_NAMES - 1], f"and {len(names) - MAX_NAMES + 1} more"]
    done(f"{what} into {out_dir}/ ({', '.join(names)})")


def decided(counts: DecisionCounts) -> None:
    """`duckscore: <n> queries: high …, medium …, low … (thresholds); need_hitl … ` on stderr,
    unless -q or --no-progress: what the policy decided, beside the thresholds that decided it."""
    done(counts.summary())


def partitions_written(result: PartitionedResult) -> None:
    """`duckscore: computed N partitions … into <out>/ (by KEY; kept …, removed …)`."""
    if _quiet():
        return
    computed = len(result.computed)
    what = (
        f"computed {computed} partition{'s' * (computed != 1)} "
        f"({result.parents:,} parents of {result.queries:,} queries)"
        if computed
        else "nothing to compute"
    )
    others = [f"{len(result.kept)} kept"] + (
        [f"{len(result.removed)} removed"] if result.removed else []
    )
    done(
        f"{what} {'into' if computed else 'in'} {result.out_dir}/ "
        f"(by {result.partition_by}; {', '.join(others)})"
    )


def done(message: str) -> None:
    """`duckscore: <message>` on stderr — what a command did: `installed 18 macros into …`,
    `2 of 2 instincts changed` — unless -q or --no-progress. Never on stdout, which holds a
    command's data only (an empty stdout for a command that has none)."""
    if not _quiet():
        click.echo(f"duckscore: {message}", err=True)


def _quiet() -> bool:
    options = click.get_current_context().find_root().params
    return bool(options.get("quiet")) or options.get("progress") is False
