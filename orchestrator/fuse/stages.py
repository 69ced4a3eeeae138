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
# and the stages of a learned recipe (fusion.method ltr), between source_pivot and fused
LTR_STAGES = ("ltr_features", "model_inputs", "ltr_scored")


# the (query, source, parent) aggregate fusion and parent features share (FusePlan.by_parent)
SOURCE_PARENTS = "fuse_source_parents"
# a block-type mask is one UBIGINT: more types than its bits take the portable third level
MASKED_BLOCK_TYPES = 64


def render_fused(
    fuse_plan: FusePlan,
    final: str = "fused_items",
    explain: bool = True,
    *,
    entries: str | None = None,
    with_features: bool = False,
    ordered: bool = True,
) -> RenderedSQL:
    context = fuse_plan.context
    context["inputs"] |= {"entries": entries}
    context["with_features"] = with_features
    return render("fuse/fused.sql", final=final, explain=explain, ordered=ordered, **context)


def render_parent_features(
    fuse_plan: FusePlan,
    ordered: bool = True,
    *,
    source_parents: str | None = None,
    block_types: list[str] | None = None,
) -> RenderedSQL:
    p = fuse_plan.recipe.parameters
    return render(
        "fuse/parent_features.sql",
        inputs={"hits": "fuse_hits", "source_parents": source_parents},
        block_types=block_types,
        rrf_k=p["fusion"]["k"],
        rank_base=p["fusion"]["rank_base"],
        max_score=p["parent_features"]["max_score"],
        rrf_scale_bits=fuse_plan.rrf_scale_bits,
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


def create_parent_features(
    session: Session, fuse_plan: FusePlan, source_parents: str | None = None
) -> None:
    """The seed-000 parent features of `fuse_hits`, as the `parent_features` view scoring reads;
    from the table `source_parents` (render_fused's `with_features` entries) when given. Under a
    memory limit the distinct items take the three grouping levels, not the block-type mask:
    100M rows at 2 GB ran out of memory with the mask and completed without it."""
    bounded = session.settings.memory_limit is not None
    rendered = render_parent_features(
        fuse_plan,
        ordered=False,
        source_parents=source_parents,
        block_types=None if bounded else hit_block_types(session),
    )
    session.create("parent_features_table", rendered)
    session.execute(
        "CREATE OR REPLACE TEMP VIEW parent_features AS SELECT * FROM parent_features_table"
    )


def hit_block_types(session: Session) -> list[str] | None:
    """The block types of `fuse_hits` (NULL as 'unknown'), sorted; None when there are more
    than a block-type mask holds."""
    rows = session.con.execute(
        "SELECT coalesce(block_type, 'unknown') AS block_type FROM fuse_hits "
        f"GROUP BY ALL ORDER BY block_type LIMIT {MASKED_BLOCK_TYPES + 1}"
    ).fetchall()
    return [row[0] for row in rows] if len(rows) <= MASKED_BLOCK_TYPES else None


def write_fuse_outputs(
    session: Session,
    fuse_plan: FusePlan,
    out: Destination,
    explain: bool = True,
    features: bool = True,
    ordered: bool = True,
) -> None:
    """fused.parquet and parent_features.parquet, leaving the view `parent_features` for scoring.
    `explain=False` leaves fused.parquet's contributions and best_provenance NULL;
    `features=False` writes fused.parquet only (fusion alone, as ranx computes it);
    `ordered=False` writes both in the engine's order, not sorted by query (`run --unsorted`)."""
    create_fuse_hits(session, fuse_plan)
    shared = SOURCE_PARENTS if features and keeps_source_parents(session, fuse_plan) else None
    if shared is not None:
        # one (query, source, parent) aggregate of the hits for fusion and parent features
        entries = render_fused(fuse_plan, "entries", explain, with_features=True)
        session.create(shared, entries)
    session.progress.step("fusing into fused.parquet")
    # Straight from the query to the file: a table of the fused items (nested contributions)
    # would hold memory the parent features need, which ran out of it under --memory-limit.
    fused_sql = render_fused(fuse_plan, explain=explain, entries=shared, ordered=ordered)
    session.check(fused_sql)
    out.copy("fused.parquet", fused_sql.text, fused_sql)
    if not features:
        return
    session.progress.step("deriving parent features")
    create_parent_features(session, fuse_plan, shared)
    if shared is not None:
        session.execute(f"DROP TABLE {shared}")
    order = " ORDER BY query_id, parent_id" if ordered else ""
    out.copy("parent_features.parquet", f"SELECT * FROM parent_features_table{order}")


def keeps_source_parents(session: Session, fuse_plan: FusePlan) -> bool:
    """Whether fusion and parent features share one kept (query, source, parent) aggregate: for
    a document target aligned before fusion, unless memory is bounded (--memory-limit). DuckDB
    does not evict a temp table, and the kept aggregate (a third of the log's rows) then starves
    the statements after it: 100M rows at 2 GB ran out of memory in the parent features. Under
    a limit each statement groups the hits itself and everything spills."""
    return fuse_plan.by_parent and session.settings.memory_limit is None


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
