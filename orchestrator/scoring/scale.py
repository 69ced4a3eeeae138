"""A log on another score scale than a calibrated policy's: where its median best score sits
among the best scores the calibration recorded (metadata.score_distribution), and the warning
that names that cause and its remedy, `duckscore recalibrate`."""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..core.session import Session
from .policy_view import ScorePolicy

QUANTILES_KEY = "best_score_quantiles"  # metadata.score_distribution: the best score at …
QUANTILE_LEVELS = [k / 100 for k in range(101)]  # … 0, 0.01, …, 1
RATIO_QUANTILES_KEY = "top2_ratio_quantiles"  # the top-2 ratio (0 without two candidates) at …
OFF_SCALE = 0.05  # a median best score below (above) all but this share of the calibration's


def share_below(score: float, quantiles: list[float]) -> float:
    """The share of the calibration's queries whose best score lies below `score`, read off the
    best scores it recorded at QUANTILE_LEVELS (linear between them; 0 below the lowest, 1
    above the highest)."""
    recorded = np.asarray(quantiles, dtype=float)
    levels = np.linspace(0.0, 1.0, len(recorded))
    low = int(np.searchsorted(recorded, score, side="left"))  # recorded[low - 1] < score
    high = int(np.searchsorted(recorded, score, side="right"))  # recorded[high] > score
    if high > low:  # score is a recorded quantile (ties: the middle of their levels)
        return float(levels[low:high].mean())
    if low == 0:
        return 0.0
    if low == len(recorded):
        return 1.0
    x0, x1 = recorded[low - 1], recorded[low]
    return float(levels[low - 1] + (levels[low] - levels[low - 1]) * (score - x0) / (x1 - x0))


def off_scale(median: float, quantiles: list[float]) -> float | None:
    """Where a log's median best score sits among the calibration's (share_below) when that is
    outside the calibration's middle 1 − 2·OFF_SCALE: its scores are then on another scale."""
    share = share_below(median, quantiles)
    return share if not OFF_SCALE <= share <= 1.0 - OFF_SCALE else None


def scale_warning(
    session: Session, policy: ScorePolicy, table: str, levels: Mapping[str, int]
) -> str | None:
    """The warning when a calibrated policy scores a log whose best scores are on another scale
    than its calibration's — the log's median best score below (above) all but OFF_SCALE of the
    calibration's (metadata.score_distribution.best_score_quantiles) — naming that cause and the
    remedy, `duckscore recalibrate`, in one line. None for a policy that records no
    distribution, or a log on the calibration's scale. `table` holds the decisions
    (score_contract, or a run's queries.parquet read back), `levels` their count by level."""
    recorded = policy.policy.metadata.get("score_distribution")
    quantiles = recorded.get(QUANTILES_KEY) if isinstance(recorded, dict) else None
    if not isinstance(quantiles, list) or len(quantiles) < 2:
        return None
    with_p_good = policy.probability is not None  # queries.parquet has p_good
    found = session.first_row(
        "SELECT median(coalesce(best_overall_score, 0.0)), "
        + ("avg(p_good)" if with_p_good else "NULL")
        + f" FROM {table}"
    )
    assert found is not None  # an aggregate has one row
    median, p_good_mean = found
    queries = sum(levels.values())
    if median is None:
        return None
    share = off_scale(float(median), quantiles)
    if share is None:
        return None
    one = next((k for k, n in levels.items() if n == queries), None)
    mix = (
        f"all {queries:,} queries {one}"
        if one
        else ", ".join(f"{n:,} {k}" for k, n in levels.items()) + f" of {queries:,} queries"
    )
    rate = recorded.get("base_rate") if isinstance(recorded, dict) else None
    p_good = (
        f", mean p_good {p_good_mean:.3f} against its calibration's rate {float(rate):.3f}"
        if p_good_mean is not None and isinstance(rate, int | float)
        else ""
    )
    side = f"below {_share(1.0 - share)}" if share < 0.5 else f"above {_share(share)}"
    log = session.inputs.get("log")
    return (
        f"policy {policy.version} rates {mix}{p_good}: this log's best scores are on another "
        f"scale than its calibration's (median {float(median):.4g}, {side} of the "
        f"calibration's; its median {quantiles[len(quantiles) // 2]:.4g}) — "
        f"`{recalibrate_command(policy, None if log is None else log.given)}` moves p_good "
        "and the thresholds to this log"
    )


def recalibrate_command(policy: ScorePolicy, log: str | None, options: str = "") -> str:
    """The `duckscore recalibrate` command that carries `policy` to `log` (LOG when that is not
    a path from here), `options` before its --out."""
    given = shlex.quote(log) if log is not None and Path(log).exists() else "LOG"
    policy_arg = shlex.quote(policy.source) if Path(policy.source).is_file() else policy.version
    extra = f" {options}" if options else ""
    return (
        f"duckscore recalibrate --policy {policy_arg} --log {given}{extra} --out recalibrated.yaml"
    )


def _share(share: float) -> str:
    """0.991 -> '99 %', 1 -> 'all' (never rounded up to all)."""
    return "all" if share >= 1.0 else f"{math.floor(100 * share)} %"
