"""`ScorePolicy`: a loaded score policy (sql/score/policies/*.yaml; the spec is policy.py's
SCORE_POLICY) as typed, frozen attributes: the keys Python reads. The templates render the plain
parameters (`parameters`, core/policy_view.py), so a key only SQL reads is not declared here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.frozen import FrozenMap
from ..core.policy import Policy, load_policy, policy_from_parameters
from ..core.policy_view import PolicyView
from .policy import SCORE_POLICY, WEIGHTS

THRESHOLDS = ("T_low", "T_high", "R_hitl")  # as the file names them: what (re)calibration moves


@dataclass(frozen=True)
class Normalization:
    mode: str  # per_query or reference
    p_lo: float
    p_hi: float
    eps: float
    zero_spread_value: float
    coverage: str  # quantile or divide_by_max

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Normalization:
        return cls(
            entry["mode"],
            entry["p_lo"],
            entry["p_hi"],
            entry["eps"],
            entry["zero_spread_value"],
            entry["coverage"],
        )


@dataclass(frozen=True)
class Probability:
    """The p_good map (issue 24): its method, what sets the levels, and the whole block as
    written (`block`: what calibrate's map functions apply, transport and compose)."""

    method: str  # platt, beta or isotonic
    levels_by: str  # score or probability
    p_low: float
    p_high: float
    block: FrozenMap

    @classmethod
    def of(cls, entry: FrozenMap | None) -> Probability | None:
        if entry is None:
            return None
        return cls(entry["method"], entry["levels_by"], entry["p_low"], entry["p_high"], entry)


@dataclass(frozen=True)
class Diagnostic:
    """A risk flag's rule (§13): the actions it recommends, and whether it raises need_hitl."""

    actions: tuple[str, ...]
    need_hitl: bool


@dataclass(frozen=True)
class ScorePolicy(PolicyView):
    """A score policy, read once from its validated parameters."""

    alpha: float
    beta: float
    weights: Mapping[str, float]  # w1, w2, w3, w_agreement, w_separation, in that order
    strength_evidence: str  # rrf_sum or parent_rrf
    subscore_floor: float
    t_low: float
    t_high: float
    r_hitl: float
    normalization: Normalization
    probability: Probability | None
    diagnostics: Mapping[str, Diagnostic]  # by risk flag: §13's rules (none: no actions)

    @classmethod
    def of(cls, policy: Policy) -> ScorePolicy:
        p = policy.parameters
        return cls(
            policy=policy,
            alpha=p["alpha"],
            beta=p["beta"],
            weights=FrozenMap({w: p[w] for w in WEIGHTS}),
            strength_evidence=p["strength_evidence"],
            subscore_floor=p["subscore_floor"],
            t_low=p["T_low"],
            t_high=p["T_high"],
            r_hitl=p["R_hitl"],
            normalization=Normalization.of(p["normalization"]),
            probability=Probability.of(p.get("probability")),
            diagnostics=FrozenMap(
                {
                    flag: Diagnostic(tuple(rule["actions"]), rule["need_hitl"])
                    for flag, rule in (p.get("diagnostics") or {}).items()
                }
            ),
        )

    @property
    def hitl_flags(self) -> list[str]:
        """The flags whose diagnostic rule raises need_hitl (§13's clarification)."""
        return [flag for flag, rule in self.diagnostics.items() if rule.need_hitl]

    @property
    def combination(self) -> dict[str, float]:
        """alpha, beta and the weights by the keys the file gives them (what calibrate tunes)."""
        return {"alpha": self.alpha, "beta": self.beta, **self.weights}

    @property
    def thresholds(self) -> dict[str, float]:
        """T_low, T_high and R_hitl by the keys the file gives them."""
        return dict(zip(THRESHOLDS, (self.t_low, self.t_high, self.r_hitl), strict=True))

    @property
    def evidence_columns(self) -> list[str]:
        """The optional parent_features columns the policy reads (overall_v2's evidence)."""
        needed = [self.strength_evidence] if self.strength_evidence != "rrf_sum" else []
        if self.weights["w_agreement"]:
            needed.append("source_agreement")
        if self.weights["w_separation"]:
            needed.append("score_lead")
        return needed


def load_score_policy(name_or_path: str, overrides: list[str] | None = None) -> ScorePolicy:
    return ScorePolicy.of(load_policy(SCORE_POLICY, name_or_path, overrides))


def score_policy_from_parameters(
    version: str, parameters: dict[str, Any], source: str, parent_version: str | None = None
) -> ScorePolicy:
    """A score policy built in code (calibrate's candidates), checked like a file."""
    return ScorePolicy.of(
        policy_from_parameters(SCORE_POLICY, version, parameters, source, parent_version)
    )
