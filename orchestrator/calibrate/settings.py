"""What one calibration is asked to do (CalibrationSettings), what it finds per fit (Fit), and
the one error it raises when the labels cannot support it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.errors import DuckscoreError

THRESHOLD_METHODS = ("quantile", "precision")
PROBABILITY_METHODS = ("auto", "platt", "beta", "isotonic", "none")
LEVELS_BY = ("score", "probability")
CLASSES = ("good", "ambiguous", "bad")


class CalibrationError(DuckscoreError):
    """The labels cannot support a calibration (too few, or thresholds that invert)."""


@dataclass(frozen=True)
class CalibrationSettings:
    folds: int = 5
    seed: int = 0
    passes: int = 2
    thresholds: str = "quantile"
    target_precision: float = 0.85
    bad_quantile: float = 0.9
    good_quantile: float = 0.1
    hitl_quantile: float = 0.7
    probability: str = "auto"  # issue 24: the map to P(good); auto = Platt below 1,000 labels
    levels: str = "score"  # confidence levels by the score thresholds or by p_good
    p_high: float = 0.85
    p_low: float = 0.5

    def check(self) -> None:
        if self.folds < 2:
            raise DuckscoreError(f"--folds must be at least 2, got {self.folds}")
        if self.passes < 1:
            raise DuckscoreError(f"--passes must be at least 1, got {self.passes}")
        if self.thresholds not in THRESHOLD_METHODS:
            raise DuckscoreError(f"--thresholds must be one of {', '.join(THRESHOLD_METHODS)}")
        if not 0.5 <= self.hitl_quantile <= 0.7:
            raise DuckscoreError(
                f"--hitl-quantile must be in the seed's P50–P70 band, got {self.hitl_quantile}"
            )
        if not 0 < self.target_precision < 1:
            raise DuckscoreError(
                f"--target-precision must be in (0, 1), got {self.target_precision}"
            )

        if self.probability not in PROBABILITY_METHODS:
            raise DuckscoreError(f"--probability must be one of {', '.join(PROBABILITY_METHODS)}")
        if self.levels not in LEVELS_BY:
            raise DuckscoreError(f"--levels must be one of {', '.join(LEVELS_BY)}")
        if self.levels == "probability" and self.probability == "none":
            raise DuckscoreError(
                "--levels probability needs a probability map, not --probability none"
            )
        if not 0 <= self.p_low <= self.p_high <= 1:
            raise DuckscoreError(
                f"--p-low ({self.p_low:g}) and --p-high ({self.p_high:g}) must satisfy "
                "0 <= p-low <= p-high <= 1"
            )

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
