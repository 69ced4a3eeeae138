"""`Recipe`: a loaded fusion recipe as typed, frozen attributes (the keys Python reads; the spec
is fusion/recipe.py's FUSE_RECIPE). The templates read the plain parameters
(`recipe.policy.parameters`, thawed by render); the Policy under it is the recipe's version,
source and record (core/policy_view.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..core.frozen import FrozenMap
from ..core.policy import Policy
from ..core.policy_view import PolicyView


@dataclass(frozen=True)
class Bound:
    """A fixed end of minmax's range (sources.<name>.lower_bound / upper_bound)."""

    mode: str  # apply, clip or ignore
    score: float


@dataclass(frozen=True)
class RecipeSource:
    """One source's entry: sources.<name>, or source_defaults (what a discovered source gets)."""

    top_k: int | None
    normalize: str
    weight: float
    distance: bool
    lower_bound: Bound | None
    upper_bound: Bound | None
    granularity: str | None = None  # the level its hits must be of, when declared

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> RecipeSource:
        return cls(
            top_k=entry["top_k"],
            normalize=entry["normalize"],
            weight=entry["weight"],
            distance=entry["distance"],
            lower_bound=_bound(entry.get("lower_bound")),
            upper_bound=_bound(entry.get("upper_bound")),
            granularity=entry.get("granularity"),
        )


def _bound(given: Mapping[str, Any] | None) -> Bound | None:
    return None if given is None else Bound(given["mode"], given["score"])


@dataclass(frozen=True)
class Fusion:
    method: str
    k: float
    rank_base: int
    missing: str  # as written: `default` is the method's own (FusePlan.missing the one used)

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Fusion:
        return cls(entry["method"], entry["k"], entry["rank_base"], entry["missing"])


@dataclass(frozen=True)
class Aligner:
    method: str
    top_n: int | None
    decay: float
    order: str  # before_fusion or after_fusion

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Aligner:
        return cls(entry["method"], entry["top_n"], entry["decay"], entry["order"])


@dataclass(frozen=True)
class ParentFeatures:
    max_score: str  # minmax or raw
    rrf_sum: str  # decimal (left out) or fixed64

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> ParentFeatures:
        return cls(entry["max_score"], entry.get("rrf_sum", "decimal"))


@dataclass(frozen=True)
class QueryRule:
    """A query-analyzer rule: an RE2 `match` or a registered query `rule` with its `params`,
    and the weight factor of each source it boosts."""

    match: str | None
    rule: str | None
    params: Mapping[str, Any] | None
    boost: Mapping[str, float]


@dataclass(frozen=True)
class QueryAnalyzer:
    enabled: bool
    rules: tuple[QueryRule, ...]

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> QueryAnalyzer:
        rules = (
            QueryRule(rule.get("match"), rule.get("rule"), rule.get("params"), rule["boost"])
            for rule in entry["rules"]
        )
        return cls(entry["enabled"], tuple(rules))


@dataclass(frozen=True)
class Rerank:
    """issue 48 §5: the top_n fused items re-scored by an external re-ranker."""

    top_n: int
    mode: str  # weight or replace
    weight: float | None  # with mode weight

    @classmethod
    def of(cls, entry: Mapping[str, Any] | None) -> Rerank | None:
        return None if entry is None else cls(entry["top_n"], entry["mode"], entry.get("weight"))


@dataclass(frozen=True)
class Ltr:
    """fusion.method ltr's model (duckscore learn): the features it reads, in order."""

    features: tuple[str, ...]
    model: Mapping[str, Any]

    @classmethod
    def of(cls, entry: Mapping[str, Any] | None) -> Ltr | None:
        return None if entry is None else cls(tuple(entry["features"]), entry["model"])


@dataclass(frozen=True)
class Recipe(PolicyView):
    """A fusion recipe, read once from its validated parameters."""

    target_granularity: str  # doc, block, or a code level: module, entity
    discover_sources: bool
    source_defaults: RecipeSource
    sources: Mapping[str, RecipeSource]  # as declared (a plan's: every source it fuses)
    aligner: Aligner
    fusion: Fusion
    parent_features: ParentFeatures
    query_analyzer: QueryAnalyzer
    rerank: Rerank | None
    ltr: Ltr | None
    plugins: tuple[Mapping[str, str], ...]  # each {path, sha256}, as locate_plugins records it
    component_params: Mapping[str, Mapping[str, Any]]

    @classmethod
    def of(cls, policy: Policy) -> Recipe:
        p = policy.parameters
        sources = {name: RecipeSource.of(entry) for name, entry in p["sources"].items()}
        return cls(
            policy=policy,
            target_granularity=p["target_granularity"],
            discover_sources=p["discover_sources"],
            source_defaults=RecipeSource.of(p["source_defaults"]),
            sources=MappingProxyType(sources),
            aligner=Aligner.of(p["aligner"]),
            fusion=Fusion.of(p["fusion"]),
            parent_features=ParentFeatures.of(p["parent_features"]),
            query_analyzer=QueryAnalyzer.of(p["query_analyzer"]),
            rerank=Rerank.of(p.get("rerank")),
            ltr=Ltr.of(p.get("ltr")),
            plugins=tuple(p.get("plugins", ())),
            component_params=p.get("component_params", FrozenMap()),
        )
