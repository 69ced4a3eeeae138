"""What an instinct policy (sql/instincts/policies/*.yaml, seed 004) may say: the update rules,
frequency bins, Wilson effectiveness, the human loop, the composite, tiers and decay; where the
seed is silent (instinct_v2), the lifecycle's evolve and archive rules and the outcome an
application's OutcomeSignals give; and InstinctPolicy, its typed view."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import PolicyError
from ..core.policy import Flag, ListOf, Number, Omissible, Policy, PolicyKind, Text, load_policy
from ..core.policy_view import PolicyView

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


@dataclass(frozen=True)
class Tier:
    """An active instinct whose composite is at least `at_least` (and below the tier above) is
    injected by `injection_method`."""

    tier: str
    at_least: float
    injection_method: str


@dataclass(frozen=True)
class Composite:
    """The seed's penalty: a composite with a dimension below `low_dimension_below` is multiplied
    by `low_dimension_factor`."""

    low_dimension_below: float
    low_dimension_factor: float


@dataclass(frozen=True)
class Decay:
    """The weekly job: decay an instinct unseen for `inactive_days`, deprecate one whose composite
    falls below `deprecate_below`, delete one deprecated for `delete_after_days`."""

    inactive_days: int
    deprecate_below: float
    delete_after_days: int


@dataclass(frozen=True)
class Evolution:
    """lifecycle.evolve: an active instinct evolves at a composite of at least `min_composite`
    after `min_successes` successful applications (and its last review an approval, if asked)."""

    min_composite: float
    min_successes: int
    require_reflect_approved: bool


@dataclass(frozen=True)
class Lifecycle:
    """instinct_v2's lifecycle rules: evolve, and archive an instinct evolved for
    `archive_evolved_after_days`."""

    evolve: Evolution
    archive_evolved_after_days: int

    @classmethod
    def of(cls, given: Mapping[str, Any] | None) -> Lifecycle | None:
        if given is None:
            return None
        rule = given["evolve"]
        evolve = Evolution(
            rule["min_composite"], int(rule["min_successes"]), rule["require_reflect_approved"]
        )
        return cls(evolve, int(given["archive_evolved_after_days"]))


@dataclass(frozen=True)
class OutcomeRule:
    """outcome_signals: negative unless every `negative_unless` flag holds; positive when every
    `positive_if` flag holds and timeSaved is at least `positive_min_time_saved_ms`; else neutral."""

    negative_unless: tuple[str, ...]
    positive_if: tuple[str, ...]
    positive_min_time_saved_ms: float

    @classmethod
    def of(cls, given: Mapping[str, Any] | None) -> OutcomeRule | None:
        if given is None:
            return None
        return cls(
            tuple(given["negative_unless"]),
            tuple(given["positive_if"]),
            given["positive_min_time_saved_ms"],
        )


@dataclass(frozen=True)
class InstinctPolicy(PolicyView):
    """An instinct policy, read once from its validated parameters: the keys Python reads (the
    templates render the plain `parameters`, core/policy_view.py)."""

    weights: Mapping[str, float]  # by dimension: frequency, effectiveness, human
    composite: Composite
    tiers: tuple[Tier, ...]  # highest first, the last at 0
    decay: Decay
    weekly_decay: tuple[float, float, float]  # update_rules.weekly_decay's deltas
    wilson_z: float  # effectiveness.z
    lifecycle: Lifecycle | None  # None: the policy has no lifecycle rules (instinct_v1)
    outcome_signals: OutcomeRule | None  # None: signals are stored, not read (instinct_v1)

    @classmethod
    def of(cls, policy: Policy) -> InstinctPolicy:
        p = policy.parameters
        composite, decay = p["composite"], p["decay"]
        frequency, effectiveness, human = p["update_rules"]["weekly_decay"]
        return cls(
            policy=policy,
            weights=p["weights"],
            composite=Composite(
                composite["low_dimension_below"], composite["low_dimension_factor"]
            ),
            tiers=tuple(Tier(t["tier"], t["at_least"], t["injection_method"]) for t in p["tiers"]),
            decay=Decay(
                decay["inactive_days"], decay["deprecate_below"], decay["delete_after_days"]
            ),
            weekly_decay=(frequency, effectiveness, human),
            wilson_z=p["effectiveness"]["z"],
            lifecycle=Lifecycle.of(p.get("lifecycle")),
            outcome_signals=OutcomeRule.of(p.get("outcome_signals")),
        )


def load_instinct_policy(name_or_path: str) -> InstinctPolicy:
    return InstinctPolicy.of(load_policy(INSTINCT_POLICY, name_or_path))
