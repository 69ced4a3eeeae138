"""`duckscore calibrate-answers`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.reporting import module_logger
from .answers import answer_input_options
from .app import cli
from .options import engine_options, out_dir_option

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)

PRECISION = click.FloatRange(0.0, 1.0, min_open=True)


@cli.command("calibrate-answers")
@answer_input_options
@click.option(
    "--labels",
    required=True,
    metavar="PATH",
    help="answer_id, correct (true / false, or 1 / 0): one row per labelled answer, each "
    "answer_id in --answers.",
)
@click.option(
    "--policy",
    "base",
    default="answer_v1",
    show_default=True,
    metavar="NAME|PATH",
    help="The answer policy whose weights and level cuts are fitted (the rest is kept).",
)
@click.option(
    "--folds",
    default=5,
    show_default=True,
    type=click.IntRange(2),
    help="Cross-validation folds, by query_id.",
)
@click.option("--seed", default=42, show_default=True, type=int, help="Seed of the folds.")
@click.option(
    "--high-precision",
    default=0.9,
    show_default=True,
    type=PRECISION,
    help="high_at_least: the lowest percentage with this share of correct answers at or above it.",
)
@click.option(
    "--medium-precision",
    default=0.6,
    show_default=True,
    type=PRECISION,
    help="medium_at_least: likewise, with this share.",
)
@out_dir_option()
@engine_options
def calibrate_answers(
    answers: str,
    citations: str,
    chunks: str,
    events: str | None,
    labels: str,
    base: str,
    folds: int,
    seed: int,
    high_precision: float,
    medium_precision: float,
    out_dir: Path,
    settings: EngineSettings,
) -> None:
    """Fit an answer policy's four factor weights and its level cuts to labels of correct
    answers (seed 001's future improvement 3): non-negative logistic weights rescaled to the
    base weight sum, cuts by precision targets, cross-validated by query. The fitted weights
    are adopted only when their mean held-out log-loss is not worse than the base weights'.

    \b
    Writes to --out:
      policy.yaml       answer_policy_version <base>_cal_<8 hex>; `duckscore answers --policy` reads it
      report.json       the decision, weights, cuts, and per fold AUC, Brier, log-loss and
                        level accuracy of the base policy and of the fold's fit
      report.md         the same as tables
      predictions.csv   every labelled answer's fold, label, percentages and levels
    """
    from ..calibrate.answer_calibrate import AnswerCalibrationSettings, calibrate_answers

    result = calibrate_answers(
        answers, citations, chunks, labels, out_dir,
        events=events, base=base,
        settings=AnswerCalibrationSettings(folds, seed, high_precision, medium_precision),
        engine=settings,
    )  # fmt: skip
    report = result.report
    click.echo(f"{report.version}: {report.reason}")
    for name in ("base", "fitted"):
        figures = report.mean[name]
        shown = ", ".join(f"{k} {'n/a' if v is None else f'{v:.4f}'}" for k, v in figures.items())
        click.echo(f"held-out mean, {name:6s}: {shown}")
    logger.info(f"done: {out_dir / 'policy.yaml'}")
