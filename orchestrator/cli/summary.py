"""The one line a command that writes an output folder prints when it succeeds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..run.incremental import PartitionedResult
    from ..score.stages import DecisionCounts

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
    click.echo(f"duckscore: {what} into {out_dir}/ ({', '.join(names)})", err=True)


def decided(counts: DecisionCounts) -> None:
    """`duckscore: <n> queries: high …, medium …, low … (thresholds); need_hitl … ` on stderr,
    unless -q or --no-progress: what the policy decided, beside the thresholds that decided it."""
    if not _quiet():
        click.echo(f"duckscore: {counts.summary()}", err=True)


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
    click.echo(
        f"duckscore: {what} {'into' if computed else 'in'} {result.out_dir}/ (by {result.partition_by}; {', '.join(others)})",
        err=True,
    )


def _quiet() -> bool:
    options = click.get_current_context().find_root().params
    return bool(options.get("quiet")) or options.get("progress") is False
