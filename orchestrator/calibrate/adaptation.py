"""A calibrated p_good map carried to a new log without labels (issues 32 and 51): the shift
diagnosed first (calibrate/shift.py), then

- `--adapt auto` (the default): adapt only what the diagnosis supports and the shipped map's
  rate on the log contradicts (shift.choose): keep the map, move its prior to the rate the
  diagnosis estimates (the scale held), or move it by quantile (the scale moved);
- `--adapt quantile` / `prior`: as asked — by quantile, or the prior moved to EM's estimate.

A moved prior is never degenerate: a rate within shift.DEGENERATE of 0 or 1 is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..core.policy import at_written_precision
from ..scoring.scale import RATIO_QUANTILES_KEY
from .probability import apply_map
from .recalibration import (
    QUANTILES_KEY,
    Fitter,
    LogitMap,
    compose,
    prior_shift,
    prior_with_labels,
    semi_supervised_rate,
)
from .recalibration_summary import medians
from .settings import CalibrationError
from .shift import DEGENERATE, Adaptation, Choice, Diagnosis, Reference, choose, diagnose

ADAPT_METHODS = ("auto", "quantile", "prior")
RATE_FITS = ("none", "rate", "inseparable")  # diagnoses where some rate fits the log


@dataclass(frozen=True)
class LabelFree:
    """The map carried over without labels, and why."""

    block: dict[str, Any]
    adapt: Adaptation  # what was done: keep, prior or quantile
    diagnosis: Diagnosis | None  # None: the policy records no best-score quantiles
    chosen: Choice
    prior_shift: float | None  # the logit offset of a moved prior

    @property
    def moves_thresholds(self) -> bool:
        """Only a moved scale moves T_low, T_high and R_hitl (to the calibration's quantiles);
        kept or with the prior moved, the scale held and so do they."""
        return self.adapt == "quantile"


def reads_ratio(block: dict[str, Any]) -> bool:
    """The map reads the top-2 ratio beside the best score."""
    return bool(block["method"] == "platt" and block["platt"].get("top2_ratio", 0.0) != 0.0)


def diagnosis_of(
    block: dict[str, Any], recorded: dict[str, Any], decisions: pd.DataFrame
) -> Diagnosis | None:
    """The shift of the log's best scores (a query without candidates: 0) against the
    calibration's recorded ones, and of its top-2 ratios when the calibration recorded theirs."""
    quantiles = recorded.get(QUANTILES_KEY)
    if not isinstance(quantiles, list):
        return None

    def p_good_of(scores: np.ndarray) -> np.ndarray:
        return apply_map(block, pd.DataFrame({"best_overall_score": scores, "top2_ratio": 0.0}))

    reference = Reference.recorded(
        quantiles, int(recorded["queries"]), None if reads_ratio(block) else p_good_of
    )
    ratios = recorded.get(RATIO_QUANTILES_KEY)
    log_ratios = decisions["top2_ratio"].fillna(0.0).to_numpy()
    return diagnose(
        reference,
        decisions["best_overall_score"].to_numpy(dtype=float),
        (np.asarray(ratios, dtype=float), log_ratios) if isinstance(ratios, list) else None,
    )


def carry_over(
    adapt: str,
    block: dict[str, Any],
    recorded: dict[str, Any],
    decisions: pd.DataFrame,
    new_quantiles: list[float],
    em_base_rate: float,
) -> LabelFree:
    """The map `adapt` carries to the log whose decisions under the old policy are
    `decisions`."""
    diagnosis = diagnosis_of(block, recorded, decisions)
    shipped_mean = float(decisions["p_good"].mean())
    if adapt == "auto":
        if diagnosis is None:  # _calibration_of asks for the quantiles first
            raise CalibrationError("--adapt auto needs the calibration's best-score quantiles")
        chosen = choose(diagnosis, shipped_mean)
        rate, fitted_rate = diagnosis.rate_estimate, diagnosis.reference_rate
    else:
        chosen = Choice(
            "prior" if adapt == "prior" else "quantile", as_asked(adapt, diagnosis, shipped_mean)
        )
        rate, fitted_rate = em_base_rate, float(recorded["base_rate"])
    if chosen.adapt == "keep":
        return LabelFree(block, "keep", diagnosis, chosen, None)
    if chosen.adapt == "quantile":
        moved = transported(block, recorded[QUANTILES_KEY], new_quantiles)
        return LabelFree(moved, "quantile", diagnosis, chosen, None)
    if rate is None or fitted_rate is None or not DEGENERATE <= rate <= 1.0 - DEGENERATE:
        raise CalibrationError(_degenerate_rate(block, recorded, new_quantiles, rate))
    shift = prior_shift(fitted_rate, rate)
    return LabelFree(compose(block, LogitMap(shift, 1.0)), "prior", diagnosis, chosen, shift)


def alternatives(
    label_free: LabelFree,
    block: dict[str, Any],
    recorded: dict[str, Any],
    new_quantiles: list[float],
    em_base_rate: float,
) -> dict[str, dict[str, Any]]:
    """The label-free maps labels may choose besides the one carried over (issue 51: the
    explanations a diagnosis cannot tell apart, labels can): the prior moved to EM's rate (not
    at a degenerate rate) and the map moved by quantile (not for a map reading the ratio)."""
    maps: dict[str, dict[str, Any]] = {}
    if label_free.adapt != "prior" and DEGENERATE <= em_base_rate <= 1.0 - DEGENERATE:
        shift = prior_shift(float(recorded["base_rate"]), em_base_rate)
        maps["prior"] = compose(block, LogitMap(shift, 1.0))
    movable = isinstance(recorded.get(QUANTILES_KEY), list) and not reads_ratio(block)
    if label_free.adapt != "quantile" and movable:
        maps["quantile"] = transported(block, recorded[QUANTILES_KEY], new_quantiles)
    return maps


@dataclass(frozen=True)
class LogEvidence:
    """What the unlabelled log adds to the labels (issue 51): the semi-supervised rate of the
    labels and the log together, the shipped map's prior moved to it (`prior_labels`), and
    the log's decisions, on which a candidate's mean p_good is set against that rate."""

    decisions: pd.DataFrame
    rate: float
    fitted: dict[str, Fitter]


def log_evidence(
    label_free: LabelFree,
    decisions: pd.DataFrame,
    labelled: pd.DataFrame,
    recorded: dict[str, Any],
    em_rate: float,
) -> LogEvidence | None:
    """The labelled queries' posteriors fixed at their outcomes, the others' re-weighted
    (recalibration.prior_with_labels) — only where the shipped map's posteriors describe the
    log at some rate: the diagnosis found a rate that fits (none, rate or inseparable) and EM's
    rate on the log alone is not degenerate. A moved scale (CISI) leaves them no evidence."""
    diagnosis = label_free.diagnosis
    if diagnosis is None or diagnosis.shift not in RATE_FITS:
        return None
    if not DEGENERATE <= em_rate <= 1.0 - DEGENERATE:
        return None
    unlabelled = decisions[~decisions["query_id"].isin(labelled["query_id"])]
    p_good = unlabelled["p_good"].to_numpy(dtype=float)
    fitted_rate = float(recorded["base_rate"])
    y = labelled["outcome"].to_numpy(dtype=float)
    rate = semi_supervised_rate(p_good, y, fitted_rate)
    fit = prior_with_labels(p_good, fitted_rate, DEGENERATE)
    return LogEvidence(decisions, rate, {"prior_labels": fit})


def as_asked(adapt: str, diagnosis: Diagnosis | None, shipped_mean: float) -> str:
    """Why an explicit --adapt was followed, beside what auto would have done."""
    if diagnosis is None:
        return f"--adapt {adapt}, as asked (the policy records no best-score quantiles to diagnose)"
    would = choose(diagnosis, shipped_mean)
    return f"--adapt {adapt}, as asked; --adapt auto would {would.adapt}: {would.reason}"


def _degenerate_rate(
    block: dict[str, Any], recorded: dict[str, Any], new_quantiles: list[float], prior: float | None
) -> str:
    """Why --adapt prior cannot carry this map over, and what can: one line."""
    found = medians(recorded, new_quantiles)
    where = (
        ""
        if found is None
        else f" (median {found['log']:.4g}, at the calibration's "
        f"{percentile(found['calibration_share_below'])}; its median {found['calibration']:.4g})"
    )
    remedy = (
        "label 30 or more of its queries and fit a policy on them (`duckscore calibrate`)"
        if reads_ratio(block)
        else "use --adapt auto (the default: it diagnoses the shift first) or quantile (the "
        "scale moved, the rate held), with --labels to check it"
    )
    rate = 0.0 if prior is None else prior
    return (
        f"--adapt prior: EM's base rate on this log's p_good ran to {rate:.3f} (the "
        f"calibration's: {float(recorded['base_rate']):.3f}; a rate within {DEGENERATE:g} of 0 "
        f"or 1 is degenerate), so every query would get p_good {round(rate):.0f}: its best "
        f"scores are on another scale than the calibration's{where}, not at another base rate; "
        f"nothing written — {remedy}"
    )


def percentile(share: float) -> str:
    """0.187 -> '19th percentile'; the ends said as what they are."""
    if share <= 0.0:
        return "lowest score or below"
    if share >= 1.0:
        return "highest score or above"
    n = min(max(round(100 * share), 1), 99)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix} percentile"


def transported(
    block: dict[str, Any], old_quantiles: list[float], new_quantiles: list[float]
) -> dict[str, Any]:
    """The isotonic map giving a new-domain score at quantile q the old map's p_good at the
    calibration's score at q: breakpoints at the new domain's quantiles (ties at the written
    precision merged, their p_good averaged), kept non-decreasing."""
    if reads_ratio(block):
        raise CalibrationError(
            "--adapt quantile: this policy's p_good reads the top-2 ratio beside the score; "
            "carry it over with --adapt prior, or with --labels"
        )
    frame = pd.DataFrame({"best_overall_score": old_quantiles, "top2_ratio": 0.0})
    # quantiles equal at the written precision are one breakpoint of the written map
    written = at_written_precision([float(q) for q in new_quantiles])
    p_good = pd.Series(apply_map(block, frame)).groupby(np.asarray(written)).mean()
    x, y = [float(v) for v in p_good.index], np.maximum.accumulate(p_good.to_numpy())
    if len(x) == 1:  # one distinct score in the new domain: a constant
        x, y = [x[0], x[0] + 1.0], np.repeat(y, 2)
    levels = {k: block[k] for k in ("levels_by", "p_low", "p_high")}
    return {
        "method": "isotonic",
        "isotonic": {"x": x, "y": [float(v) for v in np.clip(y, 0, 1)]},
    } | levels
