"""`duckscore run`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..run.job import Engine
from .app import cli
from .declared import dataclass_options, job_options
from .options import (
    log_option,
    out_dir_option,
    queries_option,
    rerank_scores_option,
)
from .summary import decided, partitions_written, written

if TYPE_CHECKING:
    from ..core.progress import Progress
    from ..run.dispatch import Outcome
    from ..run.job import Job


@cli.command()
@log_option
@out_dir_option()
@queries_option
@rerank_scores_option
@job_options()
@dataclass_options(Engine, "how")
@click.pass_obj
def run(
    progress: Progress,
    log: Any,
    out_dir: Path,
    queries: str | None,
    rerank_scores: str | None,
    job: Job,
    how: Engine,
) -> None:
    """Fuse a retrieval log, then score its parents: every output of `fuse` and `score`."""
    from ..run.dispatch import Unsupported, run_log

    try:
        outcome = run_log(
            log, out_dir, job, how, queries=queries, rerank_scores=rerank_scores, progress=progress
        )
    except Unsupported as exc:
        raise click.UsageError(str(exc)) from None
    _said(outcome, out_dir, progress)


def _said(outcome: Outcome, out_dir: Path, progress: Progress) -> None:
    """What the run did, on stderr: the partitions, Spark's rows, or the outputs and decisions."""
    from ..run.incremental import PartitionedResult
    from ..run.pipeline import RunResult

    if isinstance(outcome, PartitionedResult):
        partitions_written(outcome)
        if outcome.decisions is not None:
            decided(outcome.decisions)
    elif isinstance(outcome, RunResult):
        progress.step(
            f"done: {outcome.queries:,} queries, {outcome.parents:,} parents -> {out_dir}"
        )
        written(
            f"fused and scored {outcome.parents:,} parents of {outcome.queries:,} queries",
            out_dir,
            outcome.manifest,
        )
        decided(outcome.decisions)
    else:
        progress.step(
            f"done on Spark: {outcome.rows['queries']:,} queries, "
            f"{outcome.rows['parents']:,} parents -> {out_dir}"
        )
