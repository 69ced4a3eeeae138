"""`duckscore recalibrate`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..calibrate.settings import CalibrationSettings
from ..core.reporting import module_logger
from .app import cli
from .declared import allow_recipe_mismatch_option, declared_option
from .options import (
    engine_options,
    log_option,
    out_file_option,
    recipe_options,
)

if TYPE_CHECKING:
    from ..calibrate.recalibration_summary import LabelRefit, Recalibration
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


@cli.command()
@click.option(
    "--policy",
    required=True,
    metavar="NAME|PATH",
    help="A calibrated score policy (with a p_good map), packaged or a YAML file.",
)
@log_option
@recipe_options(None)
@allow_recipe_mismatch_option
@click.option(
    "--labels",
    metavar="PATH",
    help="Optional labels of some of the log's queries (query_id, label: good / ambiguous / "
    "bad, as `duckscore labels` writes them); 30-50 are enough to refit p_good.",
)
@click.option(
    "--adapt",
    type=click.Choice(["auto", "quantile", "prior"]),
    default="auto",
    show_default=True,
    help="How p_good is carried over before any label: auto (diagnose the shift of the log's "
    "best scores first, and adapt only what it supports and the shipped map contradicts: keep "
    "the map, move its prior, or move it by quantile), quantile (a query gets the p_good the "
    "calibration gave a query at the same quantile of best scores: the score scale moved; the "
    "thresholds move too) or prior (the base rate moved: EM on the log's p_good, Saerens et al. "
    "2002; the thresholds are kept).",
)
@out_file_option("the recalibrated policy YAML")
@click.option(
    "--version",
    "version",
    metavar="NAME",
    help="score_policy_version of the new policy (default: <policy>_recal_<parameters hash>).",
)
@declared_option(
    CalibrationSettings,
    "folds",
    "With --labels: cross-validation folds (at most the count of the rarer outcome).",
)
@declared_option(CalibrationSettings, "seed", "Fold seed.")
@engine_options
def recalibrate(
    policy: str,
    log: Any,
    recipe: str | None,
    recipe_overrides: tuple[str, ...],
    allow_recipe_mismatch: bool,
    labels: str | None,
    adapt: str,
    out_path: Path,
    version: str | None,
    folds: int,
    seed: int,
    settings: EngineSettings,
) -> None:
    """Adapt a calibrated policy to a new domain's log, with a few labels or none.

    Without labels p_good is carried over by --adapt, after a diagnosis of the shift; with
    --labels the shipped map, that one and two refits on them compete by cross-validated Brier
    score. T_low, T_high and R_hitl move to the quantiles of the new domain's scores at which
    the calibration held them when the scale moved, and are kept otherwise (T_high by the
    calibration's target precision on the labels, where they reach it). Prints what it found;
    writes a new versioned policy.
    """
    from ..calibrate.recalibrate import recalibrate as run_recalibrate

    result = run_recalibrate(
        policy,
        log,
        out_path,
        recipe=recipe,
        recipe_overrides=list(recipe_overrides),
        labels=labels,
        adapt=adapt,
        folds=folds,
        seed=seed,
        version=version,
        allow_recipe_mismatch=allow_recipe_mismatch,
        engine=settings,
    )
    for line in summary_lines(result.report, result.document["score_policy_version"]):
        click.echo(line)
    logger.info(f"done: policy {result.document['score_policy_version']} -> {out_path}")


LABELS_TO_CHECK = 30  # the labels that check a label-free recalibration (30-50 are enough)
RULES = {  # what puts a query at each level, by what the policy's levels are set by
    "score": {
        "high": "best score >= T_high",
        "medium": "T_low <= best score < T_high",
        "low": "best score < T_low",
    },
    "probability": {
        "high": "p_good >= p_high",
        "medium": "p_low <= p_good < p_high",
        "low": "p_good < p_low",
    },
}


def summary_lines(report: Recalibration, version: str) -> list[str]:
    """What recalibrate found, a figure a line: base rate, p_good, thresholds, the decisions
    the new policy makes on the log, and what the recalibration assumed."""
    from ..calibrate.adaptation import percentile

    labels = report.labels
    floor = report.ece_of_perfect_calibration
    lines = [
        f"{'recalibrated':28s} {report.parent['version']} -> {version} "
        f"({report.queries} queries of the log)",
        *diagnosis_lines(report),
        f"{'base_rate':28s} {report.base_rate:7.3f}  ("
        + (_labels_rate(labels) if labels else f"mean p_good, {CARRIED[report.chosen['adapt']]}")
        + f"; EM on the log's p_good: {report.em_base_rate:.3f}; the calibration's: "
        f"{report.fitted_base_rate:.3f})",
        f"{'p_good_mean':28s} {report.p_good_mean:7.3f}  (a perfectly calibrated p_good "
        f"shows an ECE of {floor['ece_mean']:.3f}, P95 {floor['ece_p95']:.3f}, on "
        f"{report.queries} queries)",
    ]
    if labels:
        cv = labels.cross_validated
        candidates = ", ".join(f"{k} {v:.3f}" for k, v in labels.cv_brier_by_candidate.items())
        lines += [
            f"{'p_good_by_labels':28s} {labels.chosen:>7s}  (cross-validated Brier on the "
            f"{labels.n} labels: {candidates}; {_rule(labels)})",
            f"{'p_good_cv_brier':28s} {cv['brier']:7.3f}  (the {labels.chosen} map's; a constant "
            f"at the labels' base rate: {cv['constant_brier']:.3f}; {labels.folds} folds)",
            f"{'p_good_cv_ece':28s} {cv['ece']:7.3f}  (a perfectly calibrated map shows "
            f"{cv['ece_of_perfect_calibration']['ece_mean']:.3f}, P95 "
            f"{cv['ece_of_perfect_calibration']['ece_p95']:.3f}, on {labels.n} labels)",
        ]
    median = report.best_score_median
    if median is not None:
        lines.append(
            f"{'best_score_median':28s} {median['log']:7.4f}  (the calibration's: "
            f"{median['calibration']:.4f}; this log's at its "
            f"{percentile(median['calibration_share_below'])})"
        )
    moves = report.thresholds
    for name in ("T_low", "T_high", "R_hitl"):
        lines.append(f"{name:28s} {moves[name]['to']:7.4f}  (was {moves[name]['from']:.4f})")
    precision = moves["by_target_precision"]
    if precision is not None:
        state = (
            "reached: T_high set by it"
            if precision["reached"]
            else "not reached on these labels: T_high kept"
            + (" at the quantile" if moves.get("moved_by_quantile", True) else "")
        )
        lines.append(f"{'target_precision':28s} {precision['target']:7.3f}  ({state})")
    return lines + mix_lines(report) + [f"{'assumes':28s} {assumption(report)}"]


CARRIED = {  # the mean p_good of the label-free map, by what was done
    "keep": "the shipped map's, kept",
    "prior": "its prior moved",
    "quantile": "carried over by quantile",
}


def diagnosis_lines(report: Recalibration) -> list[str]:
    """The shift the log shows against the calibration, and what was done about it."""
    diagnosis, chosen = report.diagnosis, report.chosen
    found = (
        "none: the policy records no best-score quantiles to compare with"
        if diagnosis is None
        else diagnosis.sentence()
    )
    return [
        f"{'diagnosis':28s} {found}",
        f"{'chosen':28s} {chosen['adapt']:>7s}  ({chosen['reason']})",
    ]


def _labels_rate(labels: LabelRefit) -> str:
    """The labels' rate with its interval, and the rate of the labels and the log together."""
    low, high = labels.rate_interval_95
    together = labels.rate_with_the_log
    return f"{labels.good} good of {labels.n} labels, 95 % interval {low:.2f}–{high:.2f}" + (
        "" if together is None else f"; with the log's unlabelled queries {together:.3f}"
    )


def _rule(labels: LabelRefit) -> str:
    """How the map was chosen among the candidates."""
    if labels.rate_with_the_log is None:
        return (
            "the lowest chosen, a tie keeps the shipped map; their rate unless the lowest beats "
            "it by 1.96 standard errors"
        )
    return (
        "of those within one standard error of the lowest, the one whose mean p_good on the "
        f"log is nearest {labels.rate_with_the_log:.3f}"
    )


def _percent(count: float, total: float = 1.0) -> str:
    return f"{100 * count / total:.0f} %" if total else "-"


def mix_lines(report: Recalibration) -> list[str]:
    """The decisions the new policy makes on the log: a line per level, HITL, web fallback;
    with labels the precision of `high` on them."""
    mix, queries = report.decisions, report.queries
    rules = RULES[mix["levels_by"]]
    lines = [
        f"{level:28s} {mix[level]:7,d}  ({_percent(mix[level], queries)} of the log's queries: "
        f"{rules[level]})"
        for level in ("high", "medium", "low")
    ] + [
        f"{'need_hitl':28s} {mix['need_hitl']:7,d}  ({_percent(mix['need_hitl'], queries)}: "
        "top-2 ratio >= R_hitl)",
        f"{'web_fallback':28s} {mix['web_fallback']:7,d}  "
        f"({_percent(mix['web_fallback'], queries)}: low without HITL, or no candidate)",
    ]
    precision = mix["precision_high"]
    if precision is not None:
        lines.append(
            f"{'precision_high':28s} {precision['precision']:7.3f}  ({precision['good']} good "
            f"of the {precision['high']} labelled queries rated high; the labels also fitted "
            "this policy)"
            if precision["high"]
            else f"{'precision_high':28s} {'-':>7s}  (none of the {precision['labelled']} "
            "labelled queries rated high)"
        )
    return lines


def assumption(report: Recalibration) -> str:
    """What the recalibration took for granted about the log, in the words of what it did, and
    how to check it."""
    labels, rate, adapt = report.labels, report.fitted_base_rate, report.chosen["adapt"]
    levels = _levels(report)
    if labels:
        return (
            f"the {labels.n} labels are a fair sample of this log's queries (p_good "
            f"{BY_LABELS[labels.chosen].format(free=LABEL_FREE[adapt], strength=labels.prior_strength)}; "
            f"their rate {_percent(labels.good, labels.n)}){levels}"
        )
    check = f"; label {LABELS_TO_CHECK} queries to check it (--labels)"
    if adapt == "keep":
        return (
            f"the shipped map and thresholds still hold on this log: "
            f"{_percent(report.p_good_mean)} of its queries answered well (its mean p_good)"
            f"{check}"
        )
    if adapt == "quantile":
        return (
            f"{_percent(rate)} of this log's queries are answered well, the calibration's rate "
            f"({_mode(report, 'quantile')}: its best scores moved, not the rate){levels}{check}"
        )
    diagnosis = report.diagnosis
    moved_to, source = (
        (report.em_base_rate, "EM's estimate")
        if report.adapt == "prior" or diagnosis is None or diagnosis.rate_estimate is None
        else (diagnosis.rate_estimate, "the diagnosis' estimate")
    )
    return (
        f"its best scores mean what the calibration's did and only the rate of good answers "
        f"moved, to {_percent(moved_to)} ({_mode(report, 'prior')}: {source}; the "
        f"calibration's {_percent(rate)}){levels}{check}"
    )


BY_LABELS = {  # the map the labels chose, in the assumption's words
    "shipped": "the shipped map's: chosen by cross-validated Brier on them",
    "label_free": "{free}'s: chosen by cross-validated Brier on them",
    "prior": "the map with its prior moved to EM's rate: chosen by cross-validated Brier on them",
    "quantile": "the map moved by quantile: chosen by cross-validated Brier on them",
    "prior_labels": "the shipped map with its prior moved to the rate of them and the log's "
    "other queries together: chosen by cross-validated Brier on them and the log's rate",
    "refit": "refitted on them, {free} its prior, worth {strength:g} labels",
    "intercept": "{free}'s with its intercept refitted on them",
    "rate": "their rate for every query: neither they nor the log show the score to be "
    "evidence of a good answer here",
}
LABEL_FREE = {  # the map without labels, by what was done
    "keep": "the shipped map",
    "prior": "the map with its prior moved",
    "quantile": "the map moved by quantile",
}


def _mode(report: Recalibration, adapt: str) -> str:
    return f"--adapt {adapt}" if report.adapt == adapt else f"--adapt auto, by {adapt}"


def _levels(report: Recalibration) -> str:
    """Where the best score sets the levels: how T_low and T_high cut this log."""
    moves = report.thresholds
    calibration = moves.get("shares_of_the_calibration")
    if report.decisions["levels_by"] != "score" or calibration is None:
        return ""
    low = calibration["below_T_low"]
    precision = moves["by_target_precision"]
    by_quantile = moves.get("moved_by_quantile", True)
    if precision is not None and precision["reached"]:
        t_low = f"at the calibration's share of low ({_percent(low)})" if by_quantile else "kept"
        return (
            f", T_low {t_low} and T_high where the labels reach precision {precision['target']:g}"
        )
    if not by_quantile:
        return ", and T_low and T_high as calibrated (the score scale held)"
    high, medium = 1.0 - calibration["below_T_high"], calibration["below_T_high"] - low
    return (
        f", and {_percent(high)} high, {_percent(medium)} medium, {_percent(low)} low, "
        "the calibration's shares (T_low and T_high at its quantiles)"
    )
