"""The fusion SQL on a Session: sql/fuse/fused.sql (seed 003: cut, normalise, fuse, rank) and
sql/fuse/parent_features.sql (the seed-000 inputs of every candidate parent)."""

from __future__ import annotations

from typing import Any

from ..core.render import RenderedSQL, render
from ..core.session import Destination, Session
from .recipe import FusePlan

# Stages every recipe has (candidates and grid exist only for borda and the full-grid missing policies).
STAGES = (
    "source_settings",
    "log_rows",
    "cut",
    "entries",
    "lists",
    "stats",
    "list_stats",
    "normalized",
    "per_source",
    "source_pivot",
    "fused",
    "ranked",
    "fused_items",
)


def render_fused(
    fuse_plan: FusePlan, final: str = "fused_items", explain: bool = True
) -> RenderedSQL:
    return render("fuse/fused.sql", final=final, explain=explain, **fuse_plan.context)


def render_parent_features(fuse_plan: FusePlan, ordered: bool = True) -> RenderedSQL:
    p = fuse_plan.recipe.parameters
    return render(
        "fuse/parent_features.sql",
        inputs={"hits": "fuse_hits"},
        rrf_k=p["fusion"]["k"],
        rank_base=p["fusion"]["rank_base"],
        max_score=p["parent_features"]["max_score"],
        sources=fuse_plan.sources,
        ordered=ordered,
    )


def create_fuse_hits(session: Session, fuse_plan: FusePlan) -> None:
    """The converted, top_k-cut hits of the log view, as `fuse_hits`."""
    # Outputs are written with ORDER BY; letting DuckDB drop scan order lets it stream and spill
    # (its advice for larger-than-memory work). Validation, which numbers rows in file order,
    # has run by now.
    session.execute("SET preserve_insertion_order = false")
    # Reading the log twice is cheaper than storing it, unless ranks must be derived (a window).
    session.create("fuse_hits", render_fused(fuse_plan, final="cut"), view=fuse_plan.has_rank)


def create_parent_features(session: Session, fuse_plan: FusePlan) -> None:
    """The seed-000 parent features of `fuse_hits`, as the `parent_features` view scoring reads."""
    session.create("parent_features_table", render_parent_features(fuse_plan, ordered=False))
    session.execute(
        "CREATE OR REPLACE TEMP VIEW parent_features AS SELECT * FROM parent_features_table"
    )


def write_fuse_outputs(
    session: Session,
    fuse_plan: FusePlan,
    out: Destination,
    explain: bool = True,
    features: bool = True,
) -> None:
    """fused.parquet and parent_features.parquet, leaving the view `parent_features` for scoring.
    `explain=False` leaves fused.parquet's contributions and best_provenance NULL;
    `features=False` writes fused.parquet only (fusion alone, as ranx computes it)."""
    create_fuse_hits(session, fuse_plan)
    session.progress.step("fusing into fused.parquet")
    # Straight from the query to the file: a table of the fused items (nested contributions)
    # would hold memory the parent features need, which ran out of it under --memory-limit.
    fused_sql = render_fused(fuse_plan, explain=explain)
    session.check(fused_sql)
    out.copy("fused.parquet", fused_sql.text, fused_sql)
    if not features:
        return
    session.progress.step("deriving parent features")
    create_parent_features(session, fuse_plan)
    out.copy(
        "parent_features.parquet",
        "SELECT * FROM parent_features_table ORDER BY query_id, parent_id",
    )


def manifest_fields(
    fuse_plan: FusePlan, explain: bool = True, features: bool = True
) -> dict[str, Any]:
    """§6.5: recipe_id, sources (top_k, weight, normaliser), fusion, target granularity; and
    whether fused.parquet holds the explanations and parent_features.parquet was written."""
    p = fuse_plan.recipe.parameters
    return {
        "recipe_id": fuse_plan.recipe.version,
        "sources": {name: p["sources"][name] for name in fuse_plan.sources},
        "ignored_sources": fuse_plan.ignored_sources,
        "fusion": {**p["fusion"], "missing_effective": fuse_plan.missing},
        "aligner": p["aligner"],
        "target_granularity": p["target_granularity"],
        "query_analyzer": p["query_analyzer"],
        "explanations": explain,
        "parent_features": features,
    }
