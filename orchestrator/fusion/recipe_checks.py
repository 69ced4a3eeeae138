"""A fusion recipe's cross-checks, run on its validated parameters after the schema's (the spec is
fusion/recipe.py's FUSE_RECIPE): every component registered, what a used built-in's header
requires, the first rank's denominator, the quantiles' order, a source key only where its
normaliser reads it, a learned model with its block, a re-ranker's weight with its mode."""

from __future__ import annotations

from typing import Any

from ..core.errors import PolicyError
from .components import recipe_value
from .ltr import check_ltr
from .plugins import builtins, recipe_components, used_components


def _required_keys_set(p: dict[str, Any]) -> None:
    """Each used built-in's required_keys given (bounds: normalizer_params.bounds)."""
    for kind, key, name in used_components(p):
        component = builtins().components.get((kind, name))
        for required in component.required_keys if component else ():
            if recipe_value(p, required) is None:
                raise PolicyError(f"{required} is required by {key}: {name}")


def _first_rank_positive(p: dict[str, Any]) -> None:
    if p["fusion"]["k"] - 1 + p["fusion"]["rank_base"] <= 0:
        raise PolicyError(
            "fusion.k - 1 + fusion.rank_base must be positive (the first rank's denominator)"
        )


def _quantiles_ordered(p: dict[str, Any]) -> None:
    q = p["normalizer_params"]
    if q["quantile_p_lo"] >= q["quantile_p_hi"]:
        raise PolicyError("normalizer_params.quantile_p_lo must be below quantile_p_hi")


def _rerank_weighted(p: dict[str, Any]) -> None:
    rerank = p.get("rerank")
    if rerank is None:
        return
    if rerank["mode"] == "weight" and "weight" not in rerank:
        raise PolicyError("rerank.weight (in [0, 1]) is needed with rerank.mode: weight")
    if rerank["mode"] == "replace" and "weight" in rerank:
        raise PolicyError("rerank.weight is read only with rerank.mode: weight, not replace")


def _source_keys_read(p: dict[str, Any]) -> None:
    """A source's key that built-in normalisers read (their recipe keys sources.<name>.<key>:
    minmax's lower_bound and upper_bound) is set only where such a normaliser reads it."""
    readers: dict[str, list[str]] = {}
    for (kind, name), component in builtins().components.items():
        for key in component.source_keys if kind == "normalizer" else ():
            readers.setdefault(key, []).append(name)
    entries = {"source_defaults": p["source_defaults"]}
    entries |= {f"sources.{name}": entry for name, entry in p["sources"].items()}
    for where, entry in entries.items():
        for key, names in readers.items():
            if key in entry and entry["normalize"] not in names:
                raise PolicyError(
                    f"{where}.{key} needs normalize: {' or '.join(names)}, not {entry['normalize']}"
                )


def _components_registered(p: dict[str, Any]) -> None:
    recipe_components(p)


RECIPE_CHECKS = (
    _components_registered,
    _required_keys_set,
    _first_rank_positive,
    _quantiles_ordered,
    _source_keys_read,
    check_ltr,
    _rerank_weighted,
)
