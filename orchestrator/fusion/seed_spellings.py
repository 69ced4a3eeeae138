"""Seed 003's spellings of a recipe read in duckscore's words: `fusion.type` is `fusion.method`,
the aligner `sum_decay` is `max_decay`, and a recipe that fuses by `weighted_sum` naming no
normaliser gets §6.3's `sigmoid` — in a file (`read_as`) and in --set-recipe overrides
(`read_overrides_as`) alike; the recipe records duckscore's names."""

from __future__ import annotations

from typing import Any

from ..core.errors import PolicyError

# seed 003's names of what duckscore names otherwise: §12.1's `sum_decay` aligner is `max_decay`
# (§6.2 calls it Max-Decay: s1 + 0.5 s2 + 0.25 s3 …, a decayed sum led by the maximum)
ALIGNER_ALIASES = {"sum_decay": "max_decay"}
# seed 003 §6.3 and §12.1: weighted_sum's normaliser when the recipe names none
WEIGHTED_SUM_NORMALIZER = "sigmoid"


def seed_spellings(parameters: dict[str, Any]) -> dict[str, Any]:
    """One recipe file in duckscore's words: seed 003 §8 names the fusion method `fusion.type`,
    §12.1 the aligner `sum_decay`; a file that fuses by `weighted_sum` and names no
    `source_defaults.normalize` gets §6.3's (§12.1's) `sigmoid` there."""
    fusion = parameters.get("fusion")
    if isinstance(fusion, dict) and "type" in fusion:
        if "method" in fusion:
            raise PolicyError("fusion: give `method` or seed 003's `type`, not both")
        renamed = {("method" if key == "type" else key): value for key, value in fusion.items()}
        parameters = {**parameters, "fusion": renamed}
    aligner = parameters.get("aligner")
    if isinstance(aligner, dict) and aligner.get("method") in ALIGNER_ALIASES:
        aligner = {**aligner, "method": ALIGNER_ALIASES[aligner["method"]]}
        parameters = {**parameters, "aligner": aligner}
    fusion = parameters.get("fusion")
    defaults = parameters.get("source_defaults") or {}
    method = fusion.get("method") if isinstance(fusion, dict) else None
    if method == "weighted_sum" and isinstance(defaults, dict) and "normalize" not in defaults:
        defaults = {**defaults, "normalize": WEIGHTED_SUM_NORMALIZER}
        parameters = {**parameters, "source_defaults": defaults}
    return parameters


def seed_override_spellings(overrides: dict[str, Any]) -> dict[str, Any]:
    """--set-recipe overrides read as seed_spellings reads a file: `fusion.type` is
    `fusion.method`, `aligner.method=sum_decay` is `max_decay`, and `fusion.method=weighted_sum`
    without `source_defaults.normalize` sets it to `sigmoid` (recorded among the overrides)."""
    if "fusion.type" in overrides:
        if "fusion.method" in overrides:
            raise PolicyError("fusion: give `method` or seed 003's `type`, not both")
        overrides = {
            ("fusion.method" if key == "fusion.type" else key): value
            for key, value in overrides.items()
        }
    aligner = overrides.get("aligner.method")
    if isinstance(aligner, str) and aligner in ALIGNER_ALIASES:
        overrides = {**overrides, "aligner.method": ALIGNER_ALIASES[aligner]}
    if (
        overrides.get("fusion.method") == "weighted_sum"
        and "source_defaults.normalize" not in overrides
        and "source_defaults" not in overrides
    ):
        overrides = {**overrides, "source_defaults.normalize": WEIGHTED_SUM_NORMALIZER}
    return overrides
