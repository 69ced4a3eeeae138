"""What a score policy (sql/score/policies/*.yaml) may say: seed 000's parameters and the evidence
overall_v2 adds, with the checks across them."""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import PolicyError
from ..core.policy import Bounds, Choice, Number, PolicyKind

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
        "risk_flags": {
            "low_coverage": {"strength_at_least": UNIT, "coverage_below": UNIT},
            "single_spike": {"max_score_norm_at_least": UNIT, "rrf_sum_norm_below": UNIT},
            "sparse_evidence": {"coverage_ratio_below": UNIT},
            "huge_doc_sparse": {"total_chunks_at_least": Number(0.0), "coverage_ratio_below": UNIT},
            "ambiguous_candidate": {"ratio_at_least": UNIT},
        },
    },
    cross_checks=(_weights_sum_to_one, _thresholds_ordered, _normalisation_complete),
)


def evidence_columns(parameters: dict[str, Any]) -> list[str]:
    """The optional parent_features columns a policy reads (overall_v2's evidence)."""
    needed = (
        [parameters["strength_evidence"]] if parameters["strength_evidence"] != "rrf_sum" else []
    )
    if parameters["w_agreement"]:
        needed.append("source_agreement")
    if parameters["w_separation"]:
        needed.append("score_lead")
    return needed
