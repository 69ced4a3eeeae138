"""Learned fusion (`fusion.method: ltr`, seed 003 §6.4): what a recipe's `ltr` block may say.

The block holds everything the SQL needs, so a learned recipe runs wherever fused.sql runs
(DuckDB, Spark, PostgreSQL, dbt, the live scorer) with no Python model:

- `features`: the model's inputs, in order, each `<kind>@<source>` (a per-source feature of a
  declared source) or `<kind>` (of the item or the query). FEATURES defines every kind; each is a
  column of the `ltr_features` stage of sql/fuse/fused.sql (macro `ltr_feature` of
  sql/fuse/_ltr.sql), which is also the table training reads, so training and run time use the
  same numbers. A per-source value feature is NULL where the source did not return the item;
  `present@<source>` says so explicitly.
- `model`: `linear` (a weight per feature and an intercept; a NULL counts 0) or `trees` (a
  LightGBM ensemble, each tree as LightGBM's own arrays: `split_feature`, `threshold`,
  `default_left`, `missing` (`none`, `zero`, `nan`: LightGBM's missing type), `left_child`,
  `right_child` (a negative child is leaf ~child) and `leaf_value`). The score is the sum of the
  trees, compiled to nested CASE expressions that follow LightGBM's split rule exactly.
- `training`: what fitted it: the digest of its report (the report is beside the recipe).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import PolicyError
from ..core.policy import Omissible, Spec
from .plugins import registry

# kind -> (scope, definition). scope: `source` (one value per source: kind@source), `item` or
# `query` (one value, the same for every source). The SQL of each is sql/fuse/_ltr.sql's.
FEATURES: dict[str, tuple[str, str]] = {
    "present": ("source", "1 when the source returned the item, else 0"),
    "rrf": ("source", "1 / (k + rank - 1 + rank_base): the source's RRF term at weight 1"),
    "norm": ("source", "the source's normalised score (its recipe normaliser)"),
    "raw": ("source", "the aligned score (the aligner's output, after the distance conversion)"),
    "minmax": ("source", "the aligned score min-max scaled over the query's list (1 if flat)"),
    "gap": ("source", "the source's best aligned score for the query minus the item's"),
    "hits": ("source", "the source's hits on the item (blocks aligned into it); 0 when none"),
    "top": ("source", "the source's best aligned score for the query (NULL: no list)"),
    "list_n": ("source", "the length of the source's list for the query (0: no list)"),
    "n_sources": ("item", "the number of source lists holding the item"),
    "candidates": ("query", "the number of fused candidates of the query"),
}
# per-source kinds whose value is NULL where the source did not return the item
MISSING_IS_NULL = ("rrf", "norm", "raw", "minmax", "gap")
DEFAULT_FEATURES = tuple(FEATURES)
MISSING_TYPES = ("none", "zero", "nan")  # LightGBM's missing types, lower case
MODEL_KINDS = ("linear", "trees")
MAX_TREES = 500  # DuckDB compiles 100 trees of 31 leaves in seconds, 300 in a minute
MAX_LEAVES = 127
_NAME = re.compile(r"([a-z_]+)(?:@([A-Za-z0-9_.\-]+))?")


@dataclass(frozen=True)
class Feature:
    kind: str
    source: str | None

    @property
    def name(self) -> str:
        return self.kind if self.source is None else f"{self.kind}@{self.source}"


def parse_feature(key: str, name: Any) -> Feature:
    match = _NAME.fullmatch(name) if isinstance(name, str) else None
    if match is None or match.group(1) not in FEATURES:
        raise PolicyError(
            f"{key}: {name!r} is not a feature (kinds: {', '.join(FEATURES)}; per source as "
            "kind@source)"
        )
    kind, source = match.groups()
    per_source = FEATURES[kind][0] == "source"
    if per_source and source is None:
        raise PolicyError(f"{key}: {name!r} is a feature of one source: write {kind}@<source>")
    if not per_source and source is not None:
        raise PolicyError(f"{key}: {name!r}: {kind} is one value for every source: write {kind}")
    return Feature(kind, source)


def feature_names(kinds: list[str], sources: list[str]) -> list[str]:
    """`kinds` expanded over `sources` (per-source kinds, source by source), in the given order."""
    names: list[str] = []
    for kind in kinds:
        if kind not in FEATURES:
            raise PolicyError(f"--features: unknown kind {kind!r} (kinds: {', '.join(FEATURES)})")
        if FEATURES[kind][0] == "source":
            names += [f"{kind}@{source}" for source in sources]
        else:
            names.append(kind)
    return names


@dataclass(frozen=True)
class FeatureList:
    """A list of distinct feature names."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or not value:
            raise PolicyError(f"{key}: expected a non-empty list of feature names")
        names = [parse_feature(f"{key}[{i}]", name).name for i, name in enumerate(value)]
        if len(set(names)) != len(names):
            twice = next(name for name in names if names.count(name) > 1)
            raise PolicyError(f"{key}: {twice!r} is listed twice")
        return names


def _numbers(key: str, value: Any, integer: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise PolicyError(f"{key}: expected a list of numbers")
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int | float) or not math.isfinite(item):
            raise PolicyError(f"{key}[{i}]: expected a finite number, got {item!r}")
        if integer and item != int(item):
            raise PolicyError(f"{key}[{i}]: expected a whole number, got {item!r}")
    return [int(item) if integer else float(item) for item in value]


TREE_ARRAYS = ("split_feature", "threshold", "default_left", "missing", "left_child", "right_child")


def _tree(key: str, tree: Any) -> dict[str, Any]:
    if not isinstance(tree, dict):
        raise PolicyError(f"{key}: a tree is a mapping of LightGBM's arrays")
    unknown = set(tree) - {*TREE_ARRAYS, "leaf_value"}
    if unknown:
        raise PolicyError(f"{key}: unknown key {sorted(unknown)[0]!r}")
    missing_keys = [name for name in (*TREE_ARRAYS, "leaf_value") if name not in tree]
    if missing_keys:
        raise PolicyError(f"{key}: missing key {missing_keys[0]!r}")
    checked: dict[str, Any] = {
        "split_feature": _numbers(f"{key}.split_feature", tree["split_feature"], integer=True),
        "threshold": _numbers(f"{key}.threshold", tree["threshold"]),
        "default_left": tree["default_left"],
        "missing": tree["missing"],
        "left_child": _numbers(f"{key}.left_child", tree["left_child"], integer=True),
        "right_child": _numbers(f"{key}.right_child", tree["right_child"], integer=True),
        "leaf_value": _numbers(f"{key}.leaf_value", tree["leaf_value"]),
    }
    splits = len(checked["split_feature"])
    for name in TREE_ARRAYS:
        if not isinstance(checked[name], list) or len(checked[name]) != splits:
            raise PolicyError(f"{key}.{name}: expected {splits} entries, one per split")
    if not all(isinstance(flag, bool) for flag in checked["default_left"]):
        raise PolicyError(f"{key}.default_left: expected true or false per split")
    if not all(kind in MISSING_TYPES for kind in checked["missing"]):
        raise PolicyError(f"{key}.missing: each is one of {', '.join(MISSING_TYPES)}")
    if len(checked["leaf_value"]) != splits + 1:
        raise PolicyError(f"{key}.leaf_value: expected {splits + 1} leaves for {splits} splits")
    # a binary tree: every split but the root and every leaf is the child of exactly one split
    children = checked["left_child"] + checked["right_child"]
    expected = sorted([*range(1, splits), *(~leaf for leaf in range(splits + 1))])
    if splits and sorted(children) != expected:
        raise PolicyError(f"{key}: left_child and right_child do not make one binary tree")
    if any(child <= node for node in range(splits) for child in _split_children(checked, node)):
        raise PolicyError(f"{key}: a split's children must come after it (no cycle)")
    return checked


def _split_children(tree: dict[str, Any], node: int) -> list[int]:
    return [c for c in (tree["left_child"][node], tree["right_child"][node]) if c >= 0]


@dataclass(frozen=True)
class Model:
    """The `ltr.model` block (its number of features is checked against `ltr.features`)."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, dict) or value.get("kind") not in MODEL_KINDS:
            raise PolicyError(f"{key}.kind: one of {', '.join(MODEL_KINDS)}")
        if value["kind"] == "linear":
            if set(value) != {"kind", "intercept", "weights"}:
                raise PolicyError(f"{key}: a linear model has kind, intercept and weights")
            (intercept,) = _numbers(f"{key}.intercept", [value["intercept"]])
            return {
                "kind": "linear",
                "intercept": intercept,
                "weights": _numbers(f"{key}.weights", value["weights"]),
            }
        if set(value) != {"kind", "trees"}:
            raise PolicyError(f"{key}: a tree ensemble has kind and trees")
        trees = value["trees"]
        if not isinstance(trees, list) or not 1 <= len(trees) <= MAX_TREES:
            raise PolicyError(f"{key}.trees: a list of 1 to {MAX_TREES} trees")
        checked = [_tree(f"{key}.trees[{i}]", tree) for i, tree in enumerate(trees)]
        for i, tree in enumerate(checked):
            if len(tree["leaf_value"]) > MAX_LEAVES:
                raise PolicyError(f"{key}.trees[{i}]: more than {MAX_LEAVES} leaves")
        return {"kind": "trees", "trees": checked}


@dataclass(frozen=True)
class Record:
    """A free mapping recorded as it is (the training's provenance)."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, dict):
            raise PolicyError(f"{key}: expected a mapping")
        return value


LTR_SPEC: Spec = {"features": FeatureList(), "model": Model(), "training": Omissible(Record())}


def check_ltr(p: Mapping[str, Any]) -> None:
    """A recipe's cross-check: `fusion.method: ltr` and the `ltr` block go together, the model
    reads the features it lists, and every feature names a declared source."""
    method, block = p["fusion"]["method"], p.get("ltr")
    if method != "ltr":
        if block is not None:
            raise PolicyError(f"ltr: a learned model is read by fusion.method ltr, not {method}")
        return
    if block is None:
        raise PolicyError("fusion.method ltr needs an ltr block (duckscore learn writes one)")
    if p["fusion"]["missing"] not in ("default", "zero"):
        raise PolicyError(
            "fusion.missing: ltr reads a missing source from its features (present@<source>, "
            "NULL values): leave missing at default"
        )
    features = [parse_feature("ltr.features", name) for name in block["features"]]
    for feature in features:
        if feature.source is not None and feature.source not in p["sources"]:
            raise PolicyError(
                f"ltr.features: {feature.name} reads source {feature.source!r}, which "
                "sources does not declare"
            )
    normalizers = registry(p.get("plugins") or ())
    for name, source in p["sources"].items():
        key = f"sources.{name}.normalize"
        if normalizers.get("normalizer", source["normalize"], key).fills_candidates:
            raise PolicyError(
                f"{key}: {source['normalize']} makes every candidate present in the list, "
                "which ltr's present@ features read as returned: use another normaliser"
            )
    model, n = block["model"], len(features)
    if model["kind"] == "linear" and len(model["weights"]) != n:
        raise PolicyError(f"ltr.model.weights: {len(model['weights'])} weights for {n} features")
    for i, tree in enumerate(model.get("trees", [])):
        if any(not 0 <= f < n for f in tree["split_feature"]):
            raise PolicyError(
                f"ltr.model.trees[{i}].split_feature: a feature index is not 0..{n - 1}"
            )
