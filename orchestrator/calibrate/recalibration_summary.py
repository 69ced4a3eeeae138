"""What a recalibration says of itself (issue 47): the log's median best score beside the
calibration's, the decisions the new policy makes on the log, and the warning when its
`medium` band collapses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..core.policy import Policy
from ..core.session import Session
from ..scoring.scale import QUANTILES_KEY, share_below
from ..scoring.stages import decision_counts


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
    session: Session, policy: Policy, decisions: pd.DataFrame, labelled: pd.DataFrame | None
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


def levels_by(policy: Policy) -> str:
    """What sets a query's level: its best score (T_low, T_high) or its p_good (p_low, p_high)."""
    probability = policy.parameters.get("probability") or {}
    return "probability" if probability.get("levels_by") == "probability" else "score"


def collapsed_band(policy: Policy, decisions: pd.DataFrame, report: dict[str, Any]) -> str | None:
    """The warning when T_low = T_high and the best score sets the levels: no query can be
    rated medium. Recorded in the report's thresholds (band_collapsed)."""
    moves = report["thresholds"]
    t_low, t_high = moves["T_low"]["to"], moves["T_high"]["to"]
    collapsed = levels_by(policy) == "score" and t_low >= t_high
    moves["band_collapsed"] = collapsed
    if not collapsed:
        return None
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
