"""`duckscore status`."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .app import cli
from .declared import job_options
from .options import given_and_format, log_options

if TYPE_CHECKING:
    from ..runner.job import Job
    from ..runner.status import PartitionState

COLUMNS = ("partition", "queries", "parents", "recipe", "policy", "computed_at", "state")


@cli.command()
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="The output folder of `run --partition-by`.",
)
@log_options(required=False, purpose="Check the partitions against this log: ")
@job_options("allow_recipe_mismatch", "settings", "sorted_outputs")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per partition, on stdout.")
@click.option(
    "--check",
    is_flag=True,
    help="Exit with status 1 when a partition is stale, damaged or new (needs --log).",
)
def status(
    out_dir: Path,
    log: Any,
    job: Job,
    as_json: bool,
    check: bool,
) -> None:
    """List the partitions of a partitioned output with their versions, rows and time, and
    whether their outputs are damaged; with --log (and the run's --recipe, --policy …
    options), whether each is fresh, stale (files or settings changed, or damaged), new, or
    has no log."""
    from ..runner.incremental import PartitionJob
    from ..runner.status import partition_states

    if check and log is None:
        raise click.UsageError("--check needs --log")
    given, each = None, None
    if log is not None:  # the ledger's recipe is the run's: what differs is told, not refused
        given, log_format = given_and_format(log)
        each = PartitionJob.resolved(replace(job, allow_recipe_mismatch=True), log_format)
    states = partition_states(out_dir, given, each)
    if as_json:
        for state in states:
            entry = asdict(state.entry) if state.entry else None
            line = {"partition": state.partition, "state": state.state, "ledger": entry}
            click.echo(json.dumps(line | ({"damage": state.damage} if state.damage else {})))
    else:
        _print_table([_columns(state) for state in states])
    if check and any(state.state not in ("fresh", "no log", "damaged, no log") for state in states):
        sys.exit(1)


def _columns(state: PartitionState) -> tuple[str, ...]:
    entry = state.entry
    if entry is None:
        return (state.partition, "", "", "", "", "", state.state)
    return (
        state.partition,
        f"{entry.rows.get('queries', 0):,}",
        f"{entry.rows.get('parents', 0):,}",
        entry.recipe,
        entry.policy,
        entry.computed_at,
        state.state,
    )


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    numeric = {1, 2}
    for row in [COLUMNS, *rows]:
        cells = [
            cell.rjust(width) if i in numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        click.echo("  ".join(cells).rstrip())
