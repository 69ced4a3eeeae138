"""What a recalibration says of itself (issue 47): its report (metadata.recalibration), the
log's median best score beside the calibration's, the decisions the new policy makes on the
log, and the warning when its `medium` band collapses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..core.records import Report
from ..core.session import Session
from ..scoring.policy_view import ScorePolicy
from ..scoring.scale import QUANTILES_KEY, share_below
from ..scoring.stages import decision_counts
from .shift import Diagnosis


@dataclass(frozen=True, kw_only=True)
class LabelRefit(Report):
    """The labels, and the map they chose (metadata.recalibration.labels; label_choice.py)."""

    n: int
    good: int
    rate_interval_95: list[float]  # Wilson's, of good / n
    rate_with_the_log: float | None  # semi-supervised EM's; None: the log gave no evidence
    folds: int
    cv_brier_by_candidate: dict[str, float]  # shipped, label_free (when it moved), refit, …
    chosen: str
    prior_strength: float  # the refit's
    cv_brier_by_prior_strength: dict[str, float]
    cross_validated: dict[str, Any]  # the chosen map's brier, ece, auroc, constant_brier, …
    map: dict[str, float]  # the refit's intercept, slope
    intercept_map: dict[str, float]  # the intercept-only refit's (slope 1)


@dataclass(frozen=True, kw_only=True)
class Recalibration:
    """What a recalibration did and found: metadata.recalibration, and what `duckscore
    recalibrate` prints."""

    parent: dict[str, str]  # `from`: the version and parameters_sha256 of the policy moved
    log: str
    queries: int
    adapt: str
    diagnosis: Diagnosis | None  # None: the policy records no best-score quantiles
    chosen: dict[str, str]  # what was done without labels (keep, prior, quantile) and why
    fitted_base_rate: float
    best_score_median: dict[str, float] | None
    em_base_rate: float
    em_iterations: int
    prior_shift: float | None  # the prior moved only
    labels: LabelRefit | None
    thresholds: dict[str, Any]  # each threshold's move, the shares, band_collapsed
    decisions: dict[str, Any]  # decision_mix
    p_good_mean: float
    base_rate: float  # the labels' rate, else the mean p_good
    ece_of_perfect_calibration: dict[str, Any]

    def as_record(self) -> dict[str, Any]:
        """The record, its base rate beside what it was measured on: the labels, or p_good."""
        labelled = self.labels is not None
        return {
            "from": self.parent,
            "log": self.log,
            "queries": self.queries,
            "adapt": self.adapt,
            "diagnosis": None if self.diagnosis is None else self.diagnosis.as_record(),
            "chosen": self.chosen,
            "fitted_base_rate": self.fitted_base_rate,
            "best_score_median": self.best_score_median,
            "em_base_rate": self.em_base_rate,
            "em_iterations": self.em_iterations,
            **({} if self.prior_shift is None else {"prior_shift": self.prior_shift}),
            "labels": None if self.labels is None else self.labels.as_record(),
            **({"base_rate": self.base_rate} if labelled else {}),
            "thresholds": self.thresholds,
            "decisions": self.decisions,
            "p_good_mean": self.p_good_mean,
            **({} if labelled else {"base_rate": self.base_rate}),
            "ece_of_perfect_calibration": self.ece_of_perfect_calibration,
        }


def medians(recorded: dict[str, Any], new_quantiles: list[float]) -> dict[str, float] | None:
    """The log's median best score beside the calibration's, and the calibration's share below
    it (None for a policy that records no quantiles)."""
    old_quantiles = recorded.get(QUANTILES_KEY)
    if not isinstance(old_quantiles, list) or len(old_quantiles) < 2:
        return None
    median = new_quantiles[len(new_quantiles) // 2]
    return {
        "log": median,
        "calibration": float(old_quantiles[len(old_quantiles) // 2]),
        "calibration_share_below": share_below(median, old_quantiles),
    }


def decision_mix(
    session: Session, policy: ScorePolicy, decisions: pd.DataFrame, labelled: pd.DataFrame | None
) -> dict[str, Any]:
    """The decisions the new policy makes on the log (score_contract holds them): each level,
    HITL and web fallback counted; with labels, the precision of `high` on them."""
    counts = decision_counts(session, policy)
    mix: dict[str, Any] = {
        **counts.levels,
        "need_hitl": counts.need_hitl,
        "web_fallback": counts.web_fallback,
        "levels_by": levels_by(policy),
        "precision_high": None,
    }
    if labelled is not None:
        rated = labelled[["query_id", "outcome"]].merge(
            decisions[["query_id", "confidence_level"]], on="query_id"
        )
        high = rated[rated["confidence_level"] == "high"]
        mix["precision_high"] = {
            "labelled": len(rated),
            "high": len(high),
            "good": int(high["outcome"].sum()),
            "precision": float(high["outcome"].mean()) if len(high) else None,
        }
    return mix


def levels_by(policy: ScorePolicy) -> str:
    """What sets a query's level: its best score (T_low, T_high) or its p_good (p_low, p_high)."""
    probability = policy.probability
    return "probability" if probability and probability.levels_by == "probability" else "score"


def band_collapses(policy: ScorePolicy, moves: dict[str, Any]) -> bool:
    """T_low = T_high and the best score sets the levels: no query can be rated medium
    (the report's thresholds.band_collapsed)."""
    return levels_by(policy) == "score" and moves["T_low"]["to"] >= moves["T_high"]["to"]


def collapsed_band(
    policy: ScorePolicy, decisions: pd.DataFrame, moves: dict[str, Any]
) -> str | None:
    """The warning when the band collapses (band_collapses), saying why, given the report's
    thresholds (`moves`)."""
    if not band_collapses(policy, moves):
        return None
    t_high = moves["T_high"]["to"]
    precision = moves["by_target_precision"]
    if precision is not None and precision["reached"] and t_high < moves["T_low"]["at_quantile"]:
        why = (
            f"the labels' target precision {precision['target']:.3g} set T_high below T_low "
            f"at the calibration's share of low ({moves['T_low']['at_quantile']:.4g})"
        )
    else:
        scores = decisions["best_overall_score"].fillna(0.0)
        tied = int(np.isclose(scores, t_high, rtol=1e-9, atol=0.0).sum())  # a quantile's ulp
        why = (
            f"{tied:,} of the log's {len(decisions):,} queries share that best score, so the "
            "quantiles of both thresholds land on it"
            if tied > 1
            else "the calibration's share of medium holds no query of this log"
        )
    return (
        f"T_low = T_high = {t_high:.4g} in {policy.version}: no query of this log can be rated "
        f"medium, each is high or low ({why}); lower T_low in the written policy if this log "
        "needs a medium band"
    )
