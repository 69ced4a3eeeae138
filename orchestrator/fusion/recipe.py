"""What a fusion recipe (sql/fuse/recipes/*.yaml, seed 003 §8) may say, and `plan`: a recipe
resolved against the sources of one log.

Seed 003 §8's own example loads as written: a recipe that leaves out keys (or its `recipe_id`)
reads over hybrid_v1 (§12.1's v1.0 configuration), `fusion: {type: …}` is `method`,
`target_granularity: file` is `doc`, and a source's `type` and `index_dir` (the retriever and
index that produced its hits, which duckscore does not run) are recorded, not used."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..common.patterns import re2_problem
from ..core.errors import InputError, PolicyError
from ..core.policy import (
    Bounds,
    Choice,
    Flag,
    FrozenMap,
    ListOf,
    MapOf,
    Number,
    Omissible,
    PolicyKind,
    Spec,
    Text,
    canonical_json,
    load_policy,
)
from ..core.reporting import module_logger
from .code_plan import MAPPED_TARGETS, CodePlan, fell_back
from .contract import GRANULARITIES as LOG_GRANULARITIES
from .ltr import LTR_SPEC
from .plugins import (
    Components,
    ParameterValues,
    PluginFiles,
    builtins,
    locate_plugins,
    recipe_components,
)
from .recipe_checks import RECIPE_CHECKS
from .recipe_view import Recipe, RecipeSource
from .seed_spellings import seed_override_spellings, seed_spellings

logger = module_logger(__name__)

# the built-in names (sql/fuse/components/; a recipe's plugins add names of their own)
NORMALIZERS = tuple(builtins().names("normalizer"))
FUSIONS = tuple(builtins().names("fusion"))
MAX_WEIGHT = (
    1e9  # a hit's weight, boosts included: parent features sum RRF terms as DECIMAL(38, 24)
)
UNIT = Number(0.0, 1.0)
GRANULARITIES = ("doc", "block", *MAPPED_TARGETS)
DEFAULT_BASE = "hybrid_v1"  # what a recipe file that leaves keys out reads over
# a fixed end of minmax's range (OpenSearch min_max lower_bounds / upper_bounds, per sub-query)
BOUND: Spec = {"mode": Choice(("apply", "clip", "ignore")), "score": Number()}
SOURCE: Spec = {
    "top_k": Number(1.0, integer=True, nullable=True),
    "normalize": Text(),  # a registered normaliser (_components_registered)
    "weight": Number(0.0, MAX_WEIGHT),
    "distance": Flag(),
    "type": Omissible(Text()),
    "index_dir": Omissible(Text()),
    # the level of every hit of the source (seed 003 §5.2), checked against the log's rows
    "granularity": Omissible(Choice(LOG_GRANULARITIES)),
    "lower_bound": Omissible(BOUND),
    "upper_bound": Omissible(BOUND),
}


RERANK_MODES = ("weight", "replace")
# issue 48 §5: the top_n fused items of a query re-scored by an external re-ranker
RERANK: Spec = {
    "top_n": Number(1.0, integer=True),
    "mode": Choice(RERANK_MODES),
    "weight": Omissible(UNIT),
}


@dataclass(frozen=True)
class Granularity:
    """`doc`, `block`, or a code level: `module`, `entity` (blocks mapped through an entities
    table, `--entities`: fusion/code_plan.py). Seed 003's `file` (the parent of blocks) is
    `doc`."""

    def check(self, key: str, value: Any) -> Any:
        if value == "file":
            return "doc"
        return Choice(GRANULARITIES).check(key, value)


def _merge_source_defaults(parameters: dict[str, Any]) -> dict[str, Any]:
    defaults = parameters.get("source_defaults") or {}
    sources = parameters.get("sources") or {}
    if not isinstance(sources, dict):
        raise PolicyError("sources must be a mapping of names (or a list of entries with `name`)")
    merged = {name: {**defaults, **(entry or {})} for name, entry in sources.items()}
    return {**parameters, "sources": merged}


FUSE_RECIPE = PolicyKind(
    capability="fuse",
    version_key="recipe_id",
    folder="recipes",
    override_option="--set-recipe",
    flat=True,
    prepare=_merge_source_defaults,
    read_as=seed_spellings,
    read_overrides_as=seed_override_spellings,
    default_base=DEFAULT_BASE,
    spec={
        "target_granularity": Granularity(),
        "discover_sources": Flag(),
        "source_defaults": SOURCE,
        "sources": MapOf(SOURCE),
        "normalizer_params": {
            "eps": Number(0.0, 1.0, lo_open=True),
            "degenerate_value": Number(),
            "dbsf_degenerate_value": Number(),
            "zscore_ddof": Number(0.0, 1.0, integer=True),
            "dbsf_ddof": Number(0.0, 1.0, integer=True),
            "softmax_temperature": Number(0.0, lo_open=True),
            "sigmoid_center": Number(),
            "sigmoid_scale": Number(0.0, lo_open=True),
            "quantile_p_lo": UNIT,
            "quantile_p_hi": UNIT,
            "bounds": Bounds(spread=True),
            "bounds_clip": Flag(),
            # left out: each normaliser as documented; set, an engine's own rule (docs/fuse.md)
            "nonpositive_value": Omissible(Number()),
            "minmax_degenerate_below": Omissible(Number(0.0, lo_open=True)),
            "zscore_at_mean": Omissible(Choice(("formula", "raw_max"))),
            "l2_degenerate_raw": Omissible(Flag()),
            "borda_points": Omissible(Flag()),
        },
        "aligner": {
            "method": Text(),  # a registered aligner
            "top_n": Number(1.0, integer=True, nullable=True),
            "decay": Number(0.0, 1.0),
            "order": Choice(("before_fusion", "after_fusion")),
        },
        "fusion": {
            "method": Text(),  # a registered fusion method
            "k": Number(0.0, lo_open=True),
            "rank_base": Number(0.0, 1.0, integer=True),
            "missing": Choice(("default", "zero", "skip", "list_min")),
            "rrf_weight": Omissible(Choice(("scales_term", "divides_rank"))),
            "count_empty_sources": Omissible(Flag()),
            # a cut of the fused list (engines' min_score, size / rank_window_size): left out, none
            "min_score": Omissible(Number(nullable=True)),
            "top_n": Omissible(Number(1.0, integer=True, nullable=True)),
        },
        "parent_features": {
            "max_score": Choice(("minmax", "raw")),
            # left out: decimal (sql/fuse/_rrf_part.sql); fixed64 is a faster recipe version
            "rrf_sum": Omissible(Choice(("decimal", "fixed64"))),
        },
        "query_analyzer": {
            "enabled": Flag(),
            # a rule matches an RE2 pattern (`match`), or is a registered query rule with params
            "rules": ListOf(
                {
                    "match": Omissible(Text()),
                    "rule": Omissible(Text()),
                    "params": Omissible(ParameterValues()),
                    "boost": MapOf(Number(0.0)),
                }
            ),
        },
        "ltr": Omissible(LTR_SPEC),  # fusion.method ltr's model (duckscore learn)
        # left out: no re-ranker (issue 48 §5); the stage reranked_items runs only with it
        "rerank": Omissible(RERANK),
        # issue 48 §3: component files beyond the built-ins (components.py), and their values
        "plugins": Omissible(PluginFiles()),
        "component_params": Omissible(MapOf(ParameterValues(), name_pattern=r"[A-Za-z_]\w*")),
    },
    cross_checks=RECIPE_CHECKS,
    locate_files=locate_plugins,
)


@dataclass(frozen=True)
class FusePlan:
    """A recipe resolved against one log: the sources used and the derived switches."""

    recipe: Recipe
    sources: list[str]
    ignored_sources: list[str]
    has_rank: bool
    missing: str
    needs_grid: bool
    components: Components
    log_view: str = "retrieval_log"
    has_snippet: bool = True  # False: the log has no snippet column (best_snippet is NULL)
    payload: tuple[str, ...] = ()  # the log's payload columns, carried into best_provenance
    code: CodePlan | None = None  # a code run's (--entities): the blocks mapped, loc outputs

    @property
    def rrf_scale_bits(self) -> int | None:
        """For `parent_features.rrf_sum: fixed64`, the exponent of the fixed point RRF terms
        are summed in: the largest that keeps a term (at most the largest boosted weight over
        k + rank_base, a rank being at least 1) within 2^62. None for the decimal sum."""
        recipe = self.recipe
        if recipe.parent_features.rrf_sum == "decimal":
            return None
        declared = recipe.sources
        heaviest = max(
            (_boosted_weight(recipe, declared[name], name) for name in self.sources), default=0.0
        )
        largest_term = heaviest / (recipe.fusion.k + recipe.fusion.rank_base)
        return 62 - (math.ceil(math.log2(largest_term)) if largest_term > 0 else 0)

    @property
    def context(self) -> dict[str, Any]:
        p = self.recipe.policy.parameters.thawed()
        # a code target is fused as a document target over the hits mapped to it
        p["target_granularity"] = self.fused_granularity
        return {
            "recipe": p,
            "rrf_scale_bits": self.rrf_scale_bits,
            "sources": self.sources,
            "has_rank": self.has_rank,
            "has_snippet": self.has_snippet,
            "payload": list(self.payload),
            "missing": self.missing,
            "needs_grid": self.needs_grid,
            "with_features": False,
            "inputs": {"retrieval_log": self.log_view, "entries": None},
            "components": self.components.calls(p),
            "query_rules": self.components.query_rules,
        }

    @property
    def fused_granularity(self) -> str:
        """The level fused.sql fuses: `block`, or `doc` (a parent: a code run's mapped file,
        module or entity)."""
        return "block" if self.recipe.target_granularity == "block" else "doc"

    @property
    def by_parent(self) -> bool:
        """Fusion aggregates hits per (query, source, parent) first, as parent features do: a
        document target aligned before fusion (block targets and delayed alignment do not)."""
        recipe = self.recipe
        return self.fused_granularity == "doc" and recipe.aligner.order != "after_fusion"


def load_recipe(name_or_path: str, overrides: list[str] | None = None) -> Recipe:
    """A packaged recipe by name (`hybrid_v1`) or a recipe file, with --set-recipe overrides."""
    return Recipe.of(load_policy(FUSE_RECIPE, name_or_path, overrides))


def plan(
    recipe: Recipe,
    log_sources: list[str],
    has_rank: bool,
    log_view: str = "retrieval_log",
    has_snippet: bool = True,
    payload: tuple[str, ...] = (),
    code: CodePlan | None = None,
) -> FusePlan:
    """`recipe` resolved against a log's sources. A module or entity target needs `code` (the
    blocks mapped through an entities table); with its `fallback`, the recipe is fused at file
    level, aligned before fusion (seed 003 §9.4)."""
    if code is None and recipe.target_granularity in MAPPED_TARGETS:
        raise PolicyError(
            f"{recipe.source}: target_granularity {recipe.target_granularity!r} maps blocks "
            "to their modules and entities through an entities table: give it with --entities "
            "(duckscore fuse and run; docs/code.md)"
        )
    declared = dict(recipe.sources)
    missing_from_log = sorted(set(declared) - set(log_sources))
    if missing_from_log:
        raise PolicyError(
            f"{recipe.source}: sources.{missing_from_log[0]} is not in the log "
            f"(log sources: {', '.join(log_sources) or 'none'})"
        )
    undeclared = [s for s in log_sources if s not in declared]
    discovered = undeclared if recipe.discover_sources else []
    ignored = [] if recipe.discover_sources else undeclared
    declared |= dict.fromkeys(discovered, recipe.source_defaults)
    sources = sorted(declared)
    if not sources:
        raise PolicyError(
            f"{recipe.source}: no source to fuse (declare sources or set discover_sources)"
        )
    for index, rule in enumerate(recipe.query_analyzer.rules):
        for name in rule.boost:
            if name not in declared:
                raise PolicyError(f"{recipe.source}: query_analyzer boosts unknown source {name!r}")
        problem = re2_problem(rule.match) if rule.match is not None else None
        if problem is not None:
            # DuckDB would fail on it mid-run, naming only the template
            raise PolicyError(
                f"{recipe.source}: query_analyzer.rules[{index}].match {rule.match!r} is not "
                f"a valid RE2 pattern ({problem})"
            )
    for name in sources:
        boosted = _boosted_weight(recipe, declared[name], name)
        if boosted > MAX_WEIGHT:
            raise PolicyError(
                f"{recipe.source}: sources.{name}.weight times its query_analyzer boosts "
                f"can reach {boosted:g}, above {MAX_WEIGHT:g}"
            )
    p = recipe.policy.parameters
    components = recipe_components(p.thawed())
    method = recipe.fusion.method
    fusion = components.registry.get("fusion", method, "fusion.method")
    if fusion.weighted and all(declared[name].weight == 0 for name in sources):
        raise PolicyError(
            f"{recipe.source}: every source's weight is 0, so {method} gives no item a score "
            "that ranks it: give at least one source a positive weight"
        )
    if not fusion.ranks:
        _warn_minmax(recipe, [name for name in sources if declared[name].normalize == "minmax"])
    missing = (
        recipe.fusion.missing if recipe.fusion.missing != "default" else fusion.default_missing
    )
    needs_grid = (
        _fills_candidates(components, declared, sources)
        or missing == "list_min"
        or (missing == "zero" and not fusion.additive)
    )
    resolved = {**p, "sources": {**p["sources"], **dict.fromkeys(discovered, p["source_defaults"])}}
    if code is not None and code.fallback is not None:
        resolved = fell_back(resolved)
    return FusePlan(
        Recipe.of(replace(recipe.policy, parameters=FrozenMap(resolved))),
        sources,
        ignored,
        has_rank,
        missing,
        needs_grid,
        components,
        log_view,
        has_snippet,
        payload,
        code,
    )


def _warn_minmax(recipe: Recipe, minmax_sources: list[str]) -> None:
    """Seed 003 §6.3's caution, where minmax enters the fused score (a method over scores, not
    ranks): it follows one query's score distribution and magnifies small differences."""
    if minmax_sources:
        logger.warning(
            f"recipe {recipe.version}: sources {', '.join(minmax_sources)} normalize by minmax, "
            "which follows each query's score distribution and magnifies small differences "
            "(seed 003 §6.3, which prefers sigmoid or zscore where scores are fused)"
        )


def _fills_candidates(
    components: Components, declared: dict[str, RecipeSource], sources: list[str]
) -> bool:
    """Whether a source's normaliser makes every candidate present in its list (its header's
    fills_candidates: borda), which the grid of every candidate × list does."""
    return any(
        components.registry.get(
            "normalizer", declared[name].normalize, f"sources.{name}.normalize"
        ).fills_candidates
        for name in sources
    )


def refuse_rerank(recipe: Recipe, where: str) -> None:
    """A recipe with a rerank block refused by `where`, which has no re-ranker's scores to give
    it (fuse and run take --rerank-scores; the live scorer a reranker)."""
    if recipe.rerank is not None:
        raise PolicyError(
            f"recipe {recipe.version}: rerank is not supported by {where} (it has no "
            "re-ranker's scores to read): leave rerank out, or use fuse/run --rerank-scores"
        )


def recipe_record(recipe: Recipe) -> dict[str, str]:
    """What a calibrated policy records of the recipe its features were fused with
    (`metadata.recipe`): the recipe's version, the sha256 of its parameters and its source.

    The sha256 is Policy.parameters_sha256, except that with `discover_sources` a source set to
    exactly the `source_defaults` (what discovery adds) is left out first: so a recipe as loaded
    and as resolved against a log by `plan` (what fuse and run write to their manifest) record
    the same. The packaged recipes declare no source: theirs is Policy.parameters_sha256."""
    return _record(recipe.version, recipe.policy.parameters.thawed(), recipe.source)


def recipe_record_from_manifest(path: str | Path) -> dict[str, str] | None:
    """recipe_record of the recipe in the manifest.json of `duckscore fuse` or `duckscore run`;
    `path` is the manifest or what lies beside it (a features file, glob or folder). None when
    there is no manifest or it records no fusion recipe."""
    path = Path(path)
    manifest = path if path.name == "manifest.json" else _folder(path) / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        document = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{manifest}: not a readable manifest ({exc})") from None
    recipe = document.get("policy") if isinstance(document, dict) else None
    if not isinstance(recipe, dict) or recipe.get("capability") != FUSE_RECIPE.capability:
        return None
    try:
        return _record(recipe["recipe_id"], recipe["parameters"], recipe["source"])
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{manifest}: policy is not a whole fusion recipe ({exc!r})") from None


def _folder(path: Path) -> Path:
    return path if path.is_dir() else path.parent


def _record(version: str, parameters: dict[str, Any], source: str) -> dict[str, str]:
    parameters = {key: value for key, value in parameters.items() if key != "rerank"}
    if parameters["discover_sources"]:
        defaults = parameters["source_defaults"]
        declared = {n: s for n, s in parameters["sources"].items() if s != defaults}
        parameters = parameters | {"sources": declared}
    digest = hashlib.sha256(canonical_json(parameters).encode()).hexdigest()
    return {"recipe_id": version, "parameters_sha256": digest, "source": source}


def _boosted_weight(recipe: Recipe, source: RecipeSource, name: str) -> float:
    """A source's weight times every query-analyzer boost above 1 it may get: the most one of
    its hits can weigh."""
    return float(
        source.weight
        * math.prod(max(1.0, rule.boost.get(name, 1.0)) for rule in recipe.query_analyzer.rules)
    )
