"""What a score policy (sql/score/policies/*.yaml) may say: seed 000's parameters and the evidence
overall_v2 adds, with the checks across them."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ..core.errors import PolicyError
from ..core.policy import Bounds, Choice, Flag, Number, Omissible, PolicyKind, Rule

UNIT = Number(0.0, 1.0)
EVIDENCE = (
    "rrf_sum",
    "parent_rrf",
)  # §5.1's multi-evidence term: the seed's, or document-level RRF
REFERENCE_FEATURES = ("rrf_sum", "parent_rrf", "max_score", "coverage", "log_chunks")
WEIGHTS = ("w1", "w2", "w3", "w_agreement", "w_separation")


def _weights_sum_to_one(p: dict[str, Any]) -> None:
    total = sum(p[w] for w in WEIGHTS)
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise PolicyError(
            f"parameters.w1 + w2 + w3 + w_agreement + w_separation must sum to 1, got {total:.12g}"
        )


def _thresholds_ordered(p: dict[str, Any]) -> None:
    if p["T_low"] > p["T_high"]:
        raise PolicyError(
            f"parameters.T_low ({p['T_low']:g}) must not exceed T_high ({p['T_high']:g})"
        )
    nz = p["normalization"]
    if nz["p_lo"] >= nz["p_hi"]:
        raise PolicyError("parameters.normalization.p_lo must be below normalization.p_hi")


def _normalisation_complete(p: dict[str, Any]) -> None:
    nz = p["normalization"]
    if nz["coverage"] == "divide_by_max" and nz["coverage_max"] is None:
        raise PolicyError(
            "parameters.normalization.coverage_max is required by coverage: divide_by_max"
        )
    if nz["mode"] == "reference":
        needed = [p["strength_evidence"], "max_score", "log_chunks"] + (
            ["coverage"] if nz["coverage"] == "quantile" else []
        )
        for feature in needed:
            if nz["reference"][feature] is None:
                raise PolicyError(
                    f"parameters.normalization.reference.{feature} is required by mode: reference"
                )


PROBABILITY_METHODS = ("platt", "beta", "isotonic")
LEVELS_BY = ("score", "probability")
PLATT_FEATURES = ("best_overall_score", "top2_ratio")
BETA_FEATURES = ("ln_score", "ln_one_minus_score")
# beta's s′: the best score clipped to [BETA_CLIP, 1 − BETA_CLIP], where both logarithms are
# finite; scoring/stages.py hands it to sql/score/queries.sql as `beta_clip`
BETA_CLIP = 1e-6


@dataclass(frozen=True)
class Points:
    """An isotonic map's breakpoints: at least two finite numbers, strictly increasing (`x`) or
    non-decreasing (`y`; within [0, 1], checked with x by _probability_consistent)."""

    strictly: bool

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or len(value) < 2:
            raise PolicyError(f"{key}: expected a list of at least two numbers")
        numbers = [Number().check(f"{key}[{i}]", v) for i, v in enumerate(value)]
        strict = self.strictly
        for i, (left, right) in enumerate(itertools.pairwise(numbers), start=1):
            if right < left or (strict and right == left):
                raise PolicyError(
                    f"{key}[{i}]: {right!r} after {left!r}; the list must be "
                    f"{'strictly increasing' if strict else 'non-decreasing'}"
                )
        return numbers


PROBABILITY: dict[str, Rule] = {
    "method": Choice(PROBABILITY_METHODS),
    # logit P(good) = intercept + best_overall_score·x + top2_ratio·t (Platt scaling)
    "platt": Omissible(
        {"intercept": Number(), **{feature: Number() for feature in PLATT_FEATURES}}
    ),
    # logit P(good) = intercept + ln_score·ln(s′) + ln_one_minus_score·ln(1 − s′), s′ the best
    # score clipped by BETA_CLIP (beta calibration, Kull et al. 2017); every key a coefficient
    "beta": Omissible({"intercept": Number(), **{key: Number() for key in BETA_FEATURES}}),
    # P(good) interpolated linearly between (x, y) breakpoints, constant beyond them
    "isotonic": Omissible({"x": Points(strictly=True), "y": Points(strictly=False)}),
    "levels_by": Choice(LEVELS_BY),
    "p_low": UNIT,
    "p_high": UNIT,
}


def _probability_consistent(p: dict[str, Any]) -> None:
    probability = p.get("probability")
    if probability is None:
        return
    method = probability["method"]
    if method not in probability:
        raise PolicyError(f"parameters.probability.{method} is required by method: {method}")
    unused = next((m for m in PROBABILITY_METHODS if m != method and m in probability), None)
    if unused is not None:
        raise PolicyError(
            f"parameters.probability.{unused} is not used by method: {method}; remove it"
        )
    if method == "isotonic":
        x, y = probability["isotonic"]["x"], probability["isotonic"]["y"]
        if len(x) != len(y):
            raise PolicyError(
                f"parameters.probability.isotonic: x has {len(x)} points and y {len(y)}"
            )
        if not (y[0] >= 0.0 and y[-1] <= 1.0):
            raise PolicyError("parameters.probability.isotonic.y must lie within [0, 1]")
    if probability["p_low"] > probability["p_high"]:
        raise PolicyError(
            f"parameters.probability.p_low ({probability['p_low']:g}) must not exceed "
            f"p_high ({probability['p_high']:g})"
        )


# §7.3's flags, each with its thresholds, in the order of risk_flags
RISK_FLAG_THRESHOLDS: dict[str, Rule] = {
    "low_coverage": {"strength_at_least": UNIT, "coverage_below": UNIT},
    "single_spike": {"max_score_norm_at_least": UNIT, "rrf_sum_norm_below": UNIT},
    "sparse_evidence": {"coverage_ratio_below": UNIT},
    "huge_doc_sparse": {"total_chunks_at_least": Number(0.0), "coverage_ratio_below": UNIT},
    "ambiguous_candidate": {"ratio_at_least": UNIT},
}
RISK_FLAGS = tuple(RISK_FLAG_THRESHOLDS)
# §13's actions (issue 50) a diagnostic may recommend
ACTIONS = ("clarify", "lock_parent", "raise_threshold", "re_retrieve")


@dataclass(frozen=True)
class ActionList:
    """A diagnostic's recommended actions: at least one of ACTIONS, none twice."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or not value:
            raise PolicyError(f"{key}: expected a list of actions ({', '.join(ACTIONS)})")
        for i, action in enumerate(value):
            Choice(ACTIONS).check(f"{key}[{i}]", action)
        if len(set(value)) != len(value):
            raise PolicyError(f"{key}: an action is listed twice in {value!r}")
        return list(value)


# §13: what a query whose best parent carries a flag should do next (the sorted union of the
# rules of its flags), and whether that flag also asks a human (need_hitl, as §8.1's ratio does)
DIAGNOSTIC: dict[str, Rule] = {"actions": ActionList(), "need_hitl": Flag()}

# §4.4's optional smoothing of coverage_ratio: the ratio's chunks shrunk towards `prior` by
# `pseudo_chunks` imaginary chunks, (coverage_ratio·total_chunks + pseudo_chunks·prior) /
# (total_chunks + pseudo_chunks); absent, coverage_ratio is used as is
COVERAGE_SMOOTHING: dict[str, Rule] = {
    "pseudo_chunks": Number(0.0, lo_open=True),
    "prior": UNIT,
}


def _diagnostics_given(p: dict[str, Any]) -> None:
    if p.get("diagnostics") == {}:
        raise PolicyError(
            f"parameters.diagnostics: give the rule of at least one flag ({', '.join(RISK_FLAGS)})"
            ", or leave the block out"
        )


SCORE_POLICY = PolicyKind(
    capability="score",
    version_key="score_policy_version",
    spec={
        "alpha": UNIT,
        "beta": UNIT,
        "strength_evidence": Choice(EVIDENCE),
        "stability_base": UNIT,
        "stability_size_weight": UNIT,
        "separation_base": UNIT,
        "w1": Number(0.0, 1.0, lo_open=True),
        "w2": UNIT,
        "w3": UNIT,
        "w_agreement": UNIT,
        "w_separation": UNIT,
        "subscore_floor": Number(0.0, 1.0, lo_open=True),
        "T_low": UNIT,
        "T_high": UNIT,
        "R_hitl": UNIT,
        "normalization": {
            "mode": Choice(("per_query", "reference")),
            "p_lo": UNIT,
            "p_hi": UNIT,
            "eps": Number(0.0, 1.0, lo_open=True),
            "zero_spread_value": UNIT,
            "coverage": Choice(("quantile", "divide_by_max")),
            "coverage_max": Number(0.0, lo_open=True, nullable=True),
            "reference": {f: Bounds() for f in REFERENCE_FEATURES},
        },
        "risk_flags": RISK_FLAG_THRESHOLDS,
        # issue 24: P(good answer) mapped from the best OverallScore, fitted by `calibrate`
        "probability": Omissible(PROBABILITY),
        # issue 50: §13's diagnostics act, §4.4's smoothing; both absent in overall_v1..v3
        "diagnostics": Omissible({flag: Omissible(DIAGNOSTIC) for flag in RISK_FLAGS}),
        "coverage_smoothing": Omissible(COVERAGE_SMOOTHING),
    },
    cross_checks=(
        _weights_sum_to_one,
        _thresholds_ordered,
        _normalisation_complete,
        _probability_consistent,
        _diagnostics_given,
    ),
)
