"""What an instinct policy (sql/instincts/policies/*.yaml, seed 004) may say: the update rules,
frequency bins, Wilson effectiveness, the human loop, the composite, tiers and decay; and, where
the seed is silent (instinct_v2), the lifecycle's evolve and archive rules and the outcome an
application's OutcomeSignals give."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from ..core.errors import PolicyError
from ..core.policy import Flag, ListOf, Number, Omissible, PolicyKind, Text

UNIT = Number(0.0, 1.0)
DIMENSIONS = ("frequency", "effectiveness", "human")
TRIGGERS = (
    "pattern_observed_again",
    "applied_successfully",
    "user_accepted",
    "reflect_approved",
    "causal_link_confirmed",
    "pattern_contradicted",
    "applied_failed",
    "user_corrected",
    "reflect_rejected",
    "weekly_decay",
)
# seed 004's OutcomeSignals: three booleans and timeSaved (ms saved against the average)
SIGNAL_FLAGS = ("userAccepted", "taskCompleted", "noErrorsIntroduced")
TIME_SAVED = "timeSaved"


@dataclass(frozen=True)
class Deltas:
    """An UPDATE_RULES entry: [frequency, effectiveness, human] deltas."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or len(value) != 3:
            raise PolicyError(f"{key}: expected [frequency, effectiveness, human] deltas")
        return [Number(-1.0, 1.0).check(f"{key}[{i}]", v) for i, v in enumerate(value)]


@dataclass(frozen=True)
class SignalNames:
    """A list of OutcomeSignals flags (userAccepted, taskCompleted, noErrorsIntroduced)."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or not value or any(v not in SIGNAL_FLAGS for v in value):
            raise PolicyError(f"{key}: expected a list of {', '.join(SIGNAL_FLAGS)}")
        return list(value)


def _ordered(p: dict[str, Any]) -> None:
    bins = [b["at_most"] for b in p["frequency"]["bins"]]
    if not bins or any(a >= b for a, b in itertools.pairwise(bins)):
        raise PolicyError("parameters.frequency.bins: at_most must strictly increase")
    tiers = [t["at_least"] for t in p["tiers"]]
    if any(a <= b for a, b in itertools.pairwise(tiers)) or tiers[-1] != 0:
        raise PolicyError("parameters.tiers: at_least must strictly decrease down to 0")
    if abs(sum(p["weights"].values()) - 1.0) > 1e-9:
        raise PolicyError("parameters.weights must sum to 1")
    missing = sorted(set(TRIGGERS) - set(p["update_rules"]))
    if missing:
        raise PolicyError(f"parameters.update_rules: missing {', '.join(missing)}")


INSTINCT_POLICY = PolicyKind(
    capability="instincts",
    version_key="instinct_policy_version",
    spec={
        "weights": dict.fromkeys(DIMENSIONS, UNIT),
        "frequency": {
            "bins": ListOf({"at_most": Number(0.0, integer=True), "base": UNIT}),
            "above": UNIT,
            "contradiction_penalty": UNIT,
        },
        "effectiveness": {"z": Number(0.0, 10.0, lo_open=True), "no_applications": UNIT},
        "human": {
            "prior": UNIT,
            "learning_rate": Number(0.0, 1.0, lo_open=True),
            "reflect_approved": UNIT,
        },
        "composite": {"low_dimension_below": UNIT, "low_dimension_factor": UNIT},
        "tiers": ListOf({"tier": Text(), "at_least": UNIT, "injection_method": Text()}),
        "initial": dict.fromkeys(DIMENSIONS, UNIT),
        "update_rules": {t: Deltas() for t in TRIGGERS},
        "decay": {
            "inactive_days": Number(0.0, integer=True),
            "deprecate_below": UNIT,
            "delete_after_days": Number(0.0, integer=True),
        },
        "lifecycle": Omissible(
            {
                "evolve": {
                    "min_composite": UNIT,
                    "min_successes": Number(0.0, integer=True),
                    "require_reflect_approved": Flag(),
                },
                "archive_evolved_after_days": Number(0.0, integer=True),
            }
        ),
        "outcome_signals": Omissible(
            {
                "negative_unless": SignalNames(),
                "positive_if": SignalNames(),
                "positive_min_time_saved_ms": Number(),
            }
        ),
    },
    cross_checks=(_ordered,),
)
