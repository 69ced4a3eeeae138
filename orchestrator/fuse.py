"""`duckscore fuse` / `duckscore run`: seed 003 multi-source fusion, then seed-000 parent features."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .contracts import RETRIEVAL_LOG
from .engine import EngineSettings, connect
from .errors import InputError, PolicyError
from .inputs import OpenedInput, open_input, schema_of
from .manifest import build_manifest
from .outputs import atomic_output_dir, write_json
from .policy import Bounds, Choice, Flag, ListOf, MapOf, Number, Policy, PolicyKind, Text, load_policy
from .progress import SILENT, Progress
from .render import RenderedSQL, render
from .runner import copy_to, execute, first_row, settings_record, write_sql
from .sqlcheck import check_sql

NORMALIZERS = ("none", "rank", "minmax", "max", "sum", "zscore", "l2", "softmax", "sigmoid",
               "quantile", "dbsf", "bounds", "borda")
FUSIONS = ("rrf", "isr", "weighted_sum", "combsum", "combmnz", "combanz", "combmax", "combmin",
           "combmed", "arithmetic_mean", "geometric_mean", "harmonic_mean")
DEFAULT_MISSING = {"rrf": "zero", "isr": "zero", "weighted_sum": "zero", "combsum": "zero",
                   "arithmetic_mean": "zero", "combmnz": "skip", "combanz": "skip",
                   "combmax": "skip", "combmin": "skip", "combmed": "skip",
                   "geometric_mean": "skip", "harmonic_mean": "skip"}
SUM_TYPE = ("rrf", "isr", "weighted_sum", "combsum")
MAX_WEIGHT = 1e9  # a hit's weight, boosts included: parent features sum RRF terms as DECIMAL(38, 24)
UNIT = Number(0.0, 1.0)
SOURCE = {
    "top_k": Number(1.0, integer=True, nullable=True),
    "normalize": Choice(NORMALIZERS),
    "weight": Number(0.0, MAX_WEIGHT),
    "distance": Flag(),
}


def _merge_source_defaults(parameters: dict[str, Any]) -> dict[str, Any]:
    defaults = parameters.get("source_defaults") or {}
    sources = parameters.get("sources") or {}
    if not isinstance(sources, dict):
        raise PolicyError("sources must be a mapping of names (or a list of entries with `name`)")
    merged = {name: {**defaults, **(entry or {})} for name, entry in sources.items()}
    return {**parameters, "sources": merged}


def _bounds_declared(p: dict[str, Any]) -> None:
    uses_bounds = any(s["normalize"] == "bounds" for s in [p["source_defaults"], *p["sources"].values()])
    bounds = p["normalizer_params"]["bounds"]
    if uses_bounds and (bounds is None or bounds[0] >= bounds[1]):
        raise PolicyError("normalizer_params.bounds must be [lo, hi] with lo < hi for normalize: bounds")
    if p["fusion"]["k"] - 1 + p["fusion"]["rank_base"] <= 0:
        raise PolicyError("fusion.k - 1 + fusion.rank_base must be positive (the first rank's denominator)")
    q = p["normalizer_params"]
    if q["quantile_p_lo"] >= q["quantile_p_hi"]:
        raise PolicyError("normalizer_params.quantile_p_lo must be below quantile_p_hi")


FUSE_RECIPE = PolicyKind(
    capability="fuse",
    version_key="recipe_id",
    folder="recipes",
    flat=True,
    prepare=_merge_source_defaults,
    spec={
        "target_granularity": Choice(("doc", "block")),
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
            "bounds": Bounds(),
            "bounds_clip": Flag(),
        },
        "aligner": {
            "method": Choice(("max", "sum", "mean", "sum_top_n", "max_decay")),
            "top_n": Number(1.0, integer=True, nullable=True),
            "decay": Number(0.0, 1.0),
            "order": Choice(("before_fusion", "after_fusion")),
        },
        "fusion": {
            "method": Choice(FUSIONS),
            "k": Number(0.0, lo_open=True),
            "rank_base": Number(0.0, 1.0, integer=True),
            "missing": Choice(("default", "zero", "skip", "list_min")),
        },
        "parent_features": {"max_score": Choice(("minmax", "raw"))},
        "query_analyzer": {
            "enabled": Flag(),
            "rules": ListOf({"match": Text(), "boost": MapOf(Number(0.0))}),
        },
    },
    cross_checks=(_bounds_declared,),
)


@dataclass(frozen=True)
class FusePlan:
    """A recipe resolved against one log: the sources used and the derived switches."""

    recipe: Policy
    sources: list[str]
    ignored_sources: list[str]
    has_rank: bool
    missing: str
    needs_grid: bool
    log_view: str = "retrieval_log"

    @property
    def context(self) -> dict[str, Any]:
        p = self.recipe.parameters
        return {"recipe": p, "sources": self.sources, "has_rank": self.has_rank,
                "missing": self.missing, "needs_grid": self.needs_grid,
                "inputs": {"retrieval_log": self.log_view}}


@dataclass(frozen=True)
class FuseResult:
    out_dir: Path
    recipe: Policy
    fused_rows: int
    parents: int
    manifest: dict[str, Any]


def plan(recipe: Policy, log_sources: list[str], has_rank: bool,
         log_view: str = "retrieval_log") -> FusePlan:
    p = recipe.parameters
    declared = dict(p["sources"])
    missing_from_log = sorted(set(declared) - set(log_sources))
    if missing_from_log:
        raise PolicyError(f"{recipe.source}: sources.{missing_from_log[0]} is not in the log "
                          f"(log sources: {', '.join(log_sources) or 'none'})")
    undeclared = [s for s in log_sources if s not in declared]
    if p["discover_sources"]:
        for name in undeclared:
            declared[name] = dict(p["source_defaults"])
        ignored: list[str] = []
    else:
        ignored = undeclared
    sources = sorted(declared)
    if not sources:
        raise PolicyError(f"{recipe.source}: no source to fuse (declare sources or set discover_sources)")
    for rule in p["query_analyzer"]["rules"]:
        for name in rule["boost"]:
            if name not in declared:
                raise PolicyError(f"{recipe.source}: query_analyzer boosts unknown source {name!r}")
    for name in sources:
        boosted = declared[name]["weight"] * math.prod(
            max(1.0, rule["boost"].get(name, 1.0)) for rule in p["query_analyzer"]["rules"])
        if boosted > MAX_WEIGHT:
            raise PolicyError(f"{recipe.source}: sources.{name}.weight times its query_analyzer boosts "
                              f"can reach {boosted:g}, above {MAX_WEIGHT:g}")
    resolved = recipe.parameters | {"sources": declared}
    method = p["fusion"]["method"]
    missing = p["fusion"]["missing"] if p["fusion"]["missing"] != "default" else DEFAULT_MISSING[method]
    uses_borda = any(declared[s]["normalize"] == "borda" for s in sources)
    needs_grid = uses_borda or missing == "list_min" or (missing == "zero" and method not in SUM_TYPE)
    return FusePlan(replace(recipe, parameters=resolved), sources, ignored, has_rank, missing, needs_grid, log_view)


def render_fused(fuse_plan: FusePlan, final: str = "fused_items") -> RenderedSQL:
    return render("fuse/fused.sql", final=final, **fuse_plan.context)


def render_parent_features(fuse_plan: FusePlan, ordered: bool = True) -> RenderedSQL:
    p = fuse_plan.recipe.parameters
    return render("features/parent_features_from_log.sql", inputs={"hits": "fuse_hits"},
                  rrf_k=p["fusion"]["k"], rank_base=p["fusion"]["rank_base"],
                  max_score=p["parent_features"]["max_score"], sources=fuse_plan.sources,
                  ordered=ordered)


def open_log(con: duckdb.DuckDBPyConnection, log: str | Path | pd.DataFrame,
             recipe: Policy) -> tuple[OpenedInput, FusePlan]:
    opened = open_input(con, RETRIEVAL_LOG, log, "--log")
    raw = {c.lower() for c in schema_of(con, "__raw_retrieval_log")}
    present = {c.name for c in RETRIEVAL_LOG.columns if c.name.lower() in raw}
    if "score" not in present and "rank" not in present:
        raise InputError(f"--log ({opened.given}): needs a score or a rank column")
    view = "retrieval_log"
    if "score" not in present:  # rank only: larger is better, so the score is -rank
        view = "retrieval_log_ranked"
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS "
                    "SELECT * REPLACE (-CAST(rank AS DOUBLE) AS score) FROM retrieval_log")
    if "rank" in present:
        _check_ranks_one_based(con, opened)
    sources = [row[0] for row in con.execute(
        "SELECT source FROM retrieval_log GROUP BY source ORDER BY source").fetchall()]
    if recipe.parameters["query_analyzer"]["enabled"] and "query_text" not in present:
        raise InputError(f"--log ({opened.given}): query_analyzer needs a query_text column")
    return opened, plan(recipe, sources, has_rank="rank" in present, log_view=view)


def _check_ranks_one_based(con: duckdb.DuckDBPyConnection, opened: OpenedInput) -> None:
    # Fast exact test first: ranks up to 64 are distinct when their bitmap has one bit per row;
    # larger ranks (rare) are grouped themselves. count(DISTINCT rank) is diagnosed only on failure.
    suspect = first_row(
        con,
        "SELECT 1 FROM retrieval_log GROUP BY query_id, source HAVING min(rank) <> 1 "
        "OR bit_count(bit_or(CASE WHEN rank <= 64 THEN 1::UBIGINT << (rank - 1)::UBIGINT END)) "
        "<> count(*) FILTER (WHERE rank <= 64) "
        "UNION ALL "
        "SELECT 1 FROM retrieval_log WHERE rank > 64 GROUP BY query_id, source, rank HAVING count(*) > 1 "
        "LIMIT 1"
    )
    if suspect is None:
        return
    bad = first_row(
        con,
        "SELECT query_id, source, min(rank), count(*) - count(DISTINCT rank) "
        "FROM retrieval_log GROUP BY query_id, source "
        "HAVING min(rank) <> 1 OR count(DISTINCT rank) <> count(*) ORDER BY query_id, source LIMIT 1"
    )
    assert bad is not None
    query_id, source, lowest, repeated = bad
    problem = f"smallest rank is {lowest}, not 1" if lowest != 1 else f"{repeated} rank values repeat"
    raise InputError(f"--log ({opened.given}, query_id={query_id!r}, source={source!r}): "
                     f"column 'rank' is not 1-based and unique within (query_id, source): {problem}")


def create_fuse_hits(con: duckdb.DuckDBPyConnection, fuse_plan: FusePlan) -> None:
    """The converted, top_k-cut hits of the retrieval_log view, as `fuse_hits`."""
    # Outputs are written with ORDER BY; letting DuckDB drop scan order lets it stream and spill
    # (its advice for larger-than-memory work). Validation, which numbers rows in file order,
    # has run by now.
    con.execute("SET preserve_insertion_order = false")
    hits_sql = render_fused(fuse_plan, final="cut")
    check_sql(hits_sql, {fuse_plan.log_view: schema_of(con, fuse_plan.log_view)})
    # Reading the log twice is cheaper than storing it, unless ranks must be derived (a window).
    kind = "VIEW" if fuse_plan.has_rank else "TABLE"
    execute(con, f"CREATE OR REPLACE TEMP {kind} fuse_hits AS {hits_sql.text}", hits_sql)


def create_parent_features(con: duckdb.DuckDBPyConnection, fuse_plan: FusePlan) -> RenderedSQL:
    """The seed-000 parent features of `fuse_hits`, as the `parent_features` view scoring reads."""
    features_sql = render_parent_features(fuse_plan, ordered=False)
    check_sql(features_sql, {"fuse_hits": schema_of(con, "fuse_hits")})
    execute(con, f"CREATE OR REPLACE TEMP TABLE parent_features_table AS {features_sql.text}", features_sql)
    con.execute("CREATE OR REPLACE TEMP VIEW parent_features AS SELECT * FROM parent_features_table")
    return features_sql


def write_fuse_outputs(con: duckdb.DuckDBPyConnection, fuse_plan: FusePlan, stage: Path,
                       progress: Progress = SILENT) -> tuple[list[RenderedSQL], dict[str, int]]:
    """fused.parquet and parent_features.parquet into `stage`, leaving `parent_features` for scoring."""
    create_fuse_hits(con, fuse_plan)
    progress.step("fusing into fused.parquet")
    # Straight from the query to the file: a table of the fused items (nested contributions)
    # would hold memory the parent features need, which ran out of it under --memory-limit.
    fused_sql = render_fused(fuse_plan)
    check_sql(fused_sql, {fuse_plan.log_view: schema_of(con, fuse_plan.log_view)})
    counts = {"fused.parquet": copy_to(con, fused_sql.text, stage / "fused.parquet", "parquet", fused_sql)}
    progress.step("deriving parent features")
    features_sql = create_parent_features(con, fuse_plan)
    counts["parent_features.parquet"] = copy_to(
        con, "SELECT * FROM parent_features_table ORDER BY query_id, parent_id",
        stage / "parent_features.parquet", "parquet")
    return [fused_sql, features_sql], counts


def fuse(log: str | Path | pd.DataFrame, out_dir: str | Path, recipe: str = "hybrid_v1",
         overrides: list[str] | None = None, settings: EngineSettings | None = None,
         progress: Progress = SILENT) -> FuseResult:
    """Fuse a retrieval log into out_dir: fused.parquet, parent_features.parquet, manifest.json."""
    loaded = load_policy(FUSE_RECIPE, recipe, overrides)
    con = connect(settings)
    progress.step(f"checking the log (recipe {loaded.version})")
    opened, fuse_plan = open_log(con, log, loaded)
    progress.step(f"{opened.rows:,} hits from {len(fuse_plan.sources)} sources")
    with atomic_output_dir(Path(out_dir)) as stage:
        rendered, counts = write_fuse_outputs(con, fuse_plan, stage, progress)
        manifest = fuse_manifest(fuse_plan, rendered, {"log": opened}, counts, settings)
        write_sql(stage, rendered)
        write_json(stage / "manifest.json", manifest)
    return FuseResult(Path(out_dir), fuse_plan.recipe, counts["fused.parquet"],
                      counts["parent_features.parquet"], manifest)


def fuse_manifest(fuse_plan: FusePlan, rendered: list[RenderedSQL], inputs: dict[str, OpenedInput],
                  counts: dict[str, int], settings: EngineSettings | None) -> dict[str, Any]:
    """§6.5: recipe_id, sources (top_k, weight, normaliser), fusion, target granularity, created_at."""
    p = fuse_plan.recipe.parameters
    manifest = build_manifest("fuse", fuse_plan.recipe.as_record(), rendered, inputs, counts,
                              {"settings": settings_record(settings)})
    manifest.update({
        "recipe_id": fuse_plan.recipe.version,
        "sources": {name: p["sources"][name] for name in fuse_plan.sources},
        "ignored_sources": fuse_plan.ignored_sources,
        "fusion": {**p["fusion"], "missing_effective": fuse_plan.missing},
        "aligner": p["aligner"],
        "target_granularity": p["target_granularity"],
        "query_analyzer": p["query_analyzer"],
    })
    return manifest


