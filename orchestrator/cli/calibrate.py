"""`duckscore calibrate`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..calibrate.settings import CalibrationSettings
from ..core.reporting import module_logger
from .app import cli
from .declared import dataclass_options
from .options import OutputPath, engine_options, out_file_option, recipe_options

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


# the order --help lists them in: what is found, then how it is cross-validated
OPTION_ORDER = (
    "thresholds",
    "target_precision",
    "hitl_quantile",
    "probability",
    "levels",
    "p_high",
    "p_low",
    "folds",
    "passes",
    "seed",
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
@dataclass_options(CalibrationSettings, "calibration", order=OPTION_ORDER)
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
    calibration: CalibrationSettings,
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
    from ..core.outputs import check_output_file

    given = {"--features": features, "--log": log, "--labels": labels, "--qrels": qrels}
    policies = {"--base": base, "--recipe": recipe if log is not None else None}
    inputs = {option: path for option, path in given.items() if path is not None} | {
        option: path for option, path in policies.items() if path and _policy_file(path)
    }
    check_output_file(out_path, "--out", inputs, "yaml")  # before any work
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
        settings=calibration,
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
