"""`duckscore calibrate`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.reporting import module_logger
from .app import cli
from .options import F, OutputPath, engine_options, out_file_option, recipe_options

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


def _p_good_threshold(name: str, default: float, meaning: str) -> Callable[[F], F]:
    return click.option(
        name,
        default=default,
        show_default=True,
        type=click.FloatRange(0, 1),
        help=f"p_good {meaning} (with --levels probability).",
    )


@cli.command()
@click.option(
    "--features", metavar="PATH", help="parent_features table (as written by `duckscore fuse`)."
)
@click.option("--log", metavar="PATH", help="Or a retrieval log, fused with --recipe first.")
@recipe_options()
@click.option(
    "--labels",
    required=True,
    metavar="PATH",
    help="query_id, label (good / ambiguous / bad), e.g. from `duckscore labels`.",
)
@click.option(
    "--qrels",
    metavar="PATH",
    help="Optional relevance judgments (query_id, parent_id, relevance): adds the figures "
    "of 'best parent is relevant'.",
)
@click.option(
    "--base",
    default="overall_v2",
    show_default=True,
    metavar="NAME|PATH",
    help="The score policy to calibrate (its parameters are the starting point).",
)
@out_file_option("the calibrated policy YAML")
@click.option(
    "--version",
    "version",
    metavar="NAME",
    help="score_policy_version of the new policy (default: <base>_cal_<8 hex digits of the "
    "sha256 of its parameters>).",
)
@click.option(
    "--report",
    "report_dir",
    type=OutputPath(file_okay=False, path_type=Path),
    help="Also write report.html, report.json and the plots to this folder.",
)
@click.option(
    "--thresholds",
    type=click.Choice(["quantile", "precision"]),
    default="quantile",
    show_default=True,
    help="§9.2 quantiles (the seed), or T_high by --target-precision.",
)
@click.option(
    "--target-precision",
    default=0.85,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="precision method: the share of good queries wanted at and above T_high.",
)
@click.option(
    "--hitl-quantile",
    default=0.7,
    show_default=True,
    type=click.FloatRange(0.5, 0.7),
    help="R_hitl = this quantile of the ambiguous top-2 ratios (seed: P50–P70).",
)
@click.option(
    "--probability",
    type=click.Choice(["auto", "platt", "beta", "isotonic", "none"]),
    default="auto",
    show_default=True,
    help="Map the best score to p_good, P(label good): Platt scaling, beta calibration or "
    "isotonic regression (auto: below 1,000 labels the Platt or beta map of lowest held-out "
    "Brier score, from 1,000 isotonic); none writes no map.",
)
@click.option(
    "--levels",
    type=click.Choice(["score", "probability"]),
    default="score",
    show_default=True,
    help="Confidence levels by the score thresholds T_low/T_high, or by p_good "
    "(high: p_good >= --p-high; low: below --p-low).",
)
@_p_good_threshold("--p-high", 0.85, "at and above which a query is high")
@_p_good_threshold("--p-low", 0.5, "below which a query is low")
@click.option(
    "--folds",
    default=5,
    show_default=True,
    type=click.IntRange(min=2),
    help="Cross-validation folds (by query, stratified by label).",
)
@click.option(
    "--passes",
    default=2,
    show_default=True,
    type=click.IntRange(min=1),
    help="Rounds of the coordinate-wise ablation.",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=click.IntRange(0, 2**32 - 1),
    help="Seed of the fold assignment and the bootstrap.",
)
@engine_options
def calibrate(
    features: str | None,
    log: str | None,
    recipe: str,
    recipe_overrides: tuple[str, ...],
    labels: str,
    qrels: str | None,
    base: str,
    out_path: Path,
    version: str | None,
    report_dir: Path | None,
    thresholds: str,
    target_precision: float,
    hitl_quantile: float,
    probability: str,
    levels: str,
    p_high: float,
    p_low: float,
    folds: int,
    passes: int,
    seed: int,
    settings: EngineSettings,
) -> None:
    """Calibrate a score policy on labelled queries (seed 000 §9): reference quantiles,
    cross-validated ablation of alpha, beta and the weights, §9.2 thresholds, and a new
    versioned policy file carrying the label-set hash, counts and validation metrics.

    Refuses (exit 2, one line), before any work, when a class has too few labels to estimate
    its quantile (29 bad for P90; 29 good for P10 with --thresholds quantile; 9 ambiguous for
    P70), saying what would work; also when no labelled query occurs in the input, or when
    T_low >= T_high. Labelled queries absent from the input are left out, with a warning.
    Prints the cross-validated figures against the issue-4 targets on stdout.
    """
    from ..calibrate.pipeline import calibrate as run_calibrate
    from ..calibrate.settings import CalibrationSettings
    from ..core.outputs import check_output_file

    given = {"--features": features, "--log": log, "--labels": labels, "--qrels": qrels}
    policies = {"--base": base, "--recipe": recipe if log is not None else None}
    inputs = {option: path for option, path in given.items() if path is not None} | {
        option: path for option, path in policies.items() if path and _policy_file(path)
    }
    check_output_file(out_path, "--out", inputs, "yaml")  # before any work
    chosen = CalibrationSettings(
        folds=folds,
        seed=seed,
        passes=passes,
        thresholds=thresholds,
        target_precision=target_precision,
        hitl_quantile=hitl_quantile,
        probability=probability,
        levels=levels,
        p_high=p_high,
        p_low=p_low,
    )
    result = run_calibrate(
        labels,
        out_path,
        features=features,
        log=log,
        recipe=recipe,
        recipe_overrides=list(recipe_overrides),
        qrels=qrels,
        base=base,
        version=version,
        settings=chosen,
        report_dir=report_dir,
        engine=settings,
    )
    validation = result.document["metadata"]["validation"]
    for name, check in validation["targets"].items():
        value = "n/a" if check["value"] is None else f"{check['value']:.3f}"
        state = {True: "met", False: "NOT met", None: "n/a"}[check["met"]]
        pooled = (
            ""
            if check["pooled_held_out"] is None
            else f"; pooled held-out {check['pooled_held_out']:.3f}"
        )
        click.echo(f"{name:28s} {value:>7s}  (target {check['target']:g}: {state}{pooled})")
    if "probability" in validation:
        _echo_probability(validation["probability"])
    logger.info(f"done: policy {result.document['score_policy_version']} -> {out_path}")


def _policy_file(name_or_path: str) -> bool:
    """Whether --base or --recipe names a file rather than a packaged policy (the loader's rule)."""
    path = Path(name_or_path)
    return path.suffix in {".yaml", ".yml"} or len(path.parts) > 1


def _echo_probability(probability: dict[str, Any]) -> None:
    """p_good's cross-validated ECE and Brier score against their targets."""
    targets, floor = probability["targets"], probability["ece_of_perfect_calibration"]

    def state(name: str) -> str:
        return "met" if targets[name]["met"] else "NOT met"

    ece, brier = targets["ece_at_most"], targets["brier_below_base_rate"]
    click.echo(
        f"{'p_good_ece':28s} {ece['value']:>7.3f}  (target {ece['target']:g}: {state('ece_at_most')}; "
        f"a perfectly calibrated map shows {floor['ece_mean']:.3f}, P95 {floor['ece_p95']:.3f}: "
        f"{state('ece_within_perfect_calibration_p95')})"
    )
    click.echo(
        f"{'p_good_brier':28s} {brier['value']:>7.3f}  (target below the base rate's "
        f"{brier['target']:.3f}: {state('brier_below_base_rate')})"
    )
