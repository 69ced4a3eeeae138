"""`duckscore run`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.reporting import module_logger
from ..runner.job import Engine
from .app import cli
from .declared import dataclass_options, job_options
from .options import (
    code_options,
    log_option,
    out_dir_option,
    queries_option,
    rerank_scores_option,
)
from .summary import decided, partitions_written, written

if TYPE_CHECKING:
    from ..fusion.code_plan import CodeTarget
    from ..runner.dispatch import Outcome
    from ..runner.job import Job

logger = module_logger(__name__)


@cli.command()
@log_option
@out_dir_option()
@queries_option
@rerank_scores_option
@code_options
@job_options()
@dataclass_options(Engine, "how")
def run(
    log: Any,
    out_dir: Path,
    queries: str | None,
    rerank_scores: str | None,
    code: CodeTarget | None,
    job: Job,
    how: Engine,
) -> None:
    """Fuse a retrieval log, then score its parents: every output of `fuse` and `score`."""
    from ..runner.dispatch import Unsupported, run_log

    try:
        outcome = run_log(
            log, out_dir, job, how, queries=queries, rerank_scores=rerank_scores, code=code
        )
    except Unsupported as exc:
        raise click.UsageError(str(exc)) from None
    _said(outcome, out_dir)


def _said(outcome: Outcome, out_dir: Path) -> None:
    """What the run did, on stderr: the partitions, Spark's rows, or the outputs and decisions."""
    from ..runner.incremental import PartitionedResult
    from ..runner.pipeline import RunResult

    if isinstance(outcome, PartitionedResult):
        partitions_written(outcome)
        if outcome.decisions is not None:
            decided(outcome.decisions)
    elif isinstance(outcome, RunResult):
        logger.info(f"done: {outcome.queries:,} queries, {outcome.parents:,} parents -> {out_dir}")
        written(
            f"fused and scored {outcome.parents:,} parents of {outcome.queries:,} queries",
            out_dir,
            outcome.manifest,
        )
        decided(outcome.decisions)
    else:
        logger.info(
            f"done on Spark: {outcome.rows['queries']:,} queries, "
            f"{outcome.rows['parents']:,} parents -> {out_dir}"
        )
