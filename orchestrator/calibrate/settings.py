"""What one calibration is asked to do (CalibrationSettings), what it finds per fit (Fit), and
the one error it raises when the labels cannot support it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from ..core.errors import DuckscoreError
from ..core.setting import CrossCheck, check_settings, setting

THRESHOLD_METHODS = ("quantile", "precision")
PROBABILITY_METHODS = ("auto", "platt", "beta", "isotonic", "none")
LEVELS_BY = ("score", "probability")
CLASSES = ("good", "ambiguous", "bad")


class CalibrationError(DuckscoreError):
    """The labels cannot support a calibration (too few, or thresholds that invert)."""


def _levels_need_a_map(chosen: CalibrationSettings) -> str | None:
    if chosen.levels == "probability" and chosen.probability == "none":
        return "--levels probability needs a probability map, not --probability none"
    return None


def _p_low_not_above_p_high(chosen: CalibrationSettings) -> str | None:
    if chosen.p_low > chosen.p_high:
        return f"--p-low ({chosen.p_low:g}) must be at most --p-high ({chosen.p_high:g})"
    return None


@dataclass(frozen=True)
class CalibrationSettings:
    """Each field but the seed's §9.2 quantiles is declared with its flag (core/setting.py):
    `duckscore calibrate` builds them (`cli/declared.py: dataclass_options`), and they are
    checked however they are built. The policy file and the report record them in the fields'
    order (`record`)."""

    folds: int = setting(
        5, "--folds", "Cross-validation folds (by query, stratified by label).", minimum=2
    )
    seed: int = setting(
        0,
        "--seed",
        "Seed of the fold assignment and the bootstrap.",
        minimum=0,
        maximum=2**32 - 1,
    )
    passes: int = setting(2, "--passes", "Rounds of the coordinate-wise ablation.", minimum=1)
    thresholds: str = setting(
        "quantile",
        "--thresholds",
        "§9.2 quantiles (the seed), or T_high by --target-precision.",
        choices=THRESHOLD_METHODS,
    )
    target_precision: float = setting(
        0.85,
        "--target-precision",
        "precision method: the share of good queries wanted at and above T_high.",
        minimum=0,
        maximum=1,
        min_open=True,
        max_open=True,
    )
    bad_quantile: float = 0.9
    good_quantile: float = 0.1
    hitl_quantile: float = setting(
        0.7,
        "--hitl-quantile",
        "R_hitl = this quantile of the ambiguous top-2 ratios (seed: P50–P70).",
        minimum=0.5,
        maximum=0.7,
    )
    probability: str = setting(  # issue 24: the map to P(good)
        "auto",
        "--probability",
        "Map the best score to p_good, P(label good): Platt scaling, beta calibration or "
        "isotonic regression (auto: below 1,000 labels the Platt or beta map of lowest held-out "
        "Brier score, from 1,000 isotonic); none writes no map.",
        choices=PROBABILITY_METHODS,
    )
    levels: str = setting(
        "score",
        "--levels",
        "Confidence levels by the score thresholds T_low/T_high, or by p_good "
        "(high: p_good >= --p-high; low: below --p-low).",
        choices=LEVELS_BY,
    )
    p_high: float = setting(
        0.85,
        "--p-high",
        "p_good at and above which a query is high (with --levels probability).",
        minimum=0,
        maximum=1,
    )
    p_low: float = setting(
        0.5,
        "--p-low",
        "p_good below which a query is low (with --levels probability).",
        minimum=0,
        maximum=1,
    )

    cross_checks: ClassVar[tuple[CrossCheck, ...]] = (_levels_need_a_map, _p_low_not_above_p_high)

    def __post_init__(self) -> None:
        check_settings(self)

    def record(self) -> dict[str, Any]:
        """The settings as the report and the policy file record them, in the fields' order."""
        return asdict(self)


DEFAULT_SETTINGS = CalibrationSettings()


@dataclass
class Fit:
    """One calibration: on every labelled query (`all`) or on the training queries of a fold."""

    name: str
    parameters: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    thresholds: dict[str, Any] = field(default_factory=dict)
