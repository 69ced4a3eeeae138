"""The fusion stages of the graph (core/graph.py): sql/fuse/fused.sql (seed 003: cut, normalise,
fuse, rank), sql/fuse/parent_features.sql (the seed-000 inputs of every candidate parent) and
what feeds them, each declared once for every consumer (`run`, `fuse`, calibrate, the live
scorer, the macro pack, dbt)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..core.graph import Graph, Publication, Render, Stage
from ..core.render import RenderedSQL, ident, render
from ..core.session import Session
from .code_stages import CODE_HITS, ENTITIES_INPUT, code_stages, target_hits
from .contract import RERANK_SCORES, RETRIEVAL_LOG
from .recipe import FusePlan
from .traces import TRACE_SPANS

# The CTEs of fused.sql every recipe has (`duckscore sql fuse --stage`; candidates and grid
# exist only for a normaliser that fills or counts the candidates, as borda does, and the missing
# policies a grid meets).
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

# the relations the fusion stages make: their names as tables, views and CTEs
LOG = RETRIEVAL_LOG.name  # the typed view of the log (Session.open)
RANKED_LOG = "retrieval_log_ranked"  # a rank-only log, scored -rank (sql/fuse/ranked_log.sql)
FUSE_HITS = "fuse_hits"  # the converted, top_k-cut hits
SOURCE_PARENTS = "fuse_source_parents"  # the (query, source, parent) aggregate both share
FUSED_ITEMS = "fused_items"
RERANKED_ITEMS = "reranked_items"  # fused_items re-ranked (recipe key rerank; reranked.sql)
RERANK_INPUT = RERANK_SCORES.name  # the typed view of --rerank-scores
PARENT_FEATURES = "parent_features"  # what score reads (scoring/tables.py: PARENT_FEATURES)
SPANS = "spans"  # a trace export's retrieval spans, one row each
FUSED_FILE, FEATURES_FILE, SPANS_FILE = "fused.parquet", "parent_features.parquet", "spans.parquet"

# a block-type mask is one UBIGINT: more types than its bits take the portable third level
MASKED_BLOCK_TYPES = 64


def fuse_graph(
    fuse_plan: FusePlan,
    *,
    explain: bool = True,
    features: bool = True,
    sorted_outputs: bool = True,
    shared: bool = False,
    spans: bool = False,
    portable: bool = False,
) -> Graph:
    """The fusion stages of a plan. `explain=False` leaves fused_items' contributions and
    best_provenance NULL; `features=False`: fused items alone; `sorted_outputs=False` publishes
    fused.parquet and parent_features.parquet in the engine's order; `shared`: fusion and parent
    features read one kept (query, source, parent) aggregate, when the plan aligns a document
    target before fusion (keeps_source_parents); `spans`: the log is a trace export, whose
    spans are published too; `portable`: the same SQL for any rows (a Session does not read
    the block types of the hits first: a CTE chain reused across requests)."""
    log = RANKED_LOG if fuse_plan.log_view == RANKED_LOG else LOG
    stages = [] if log == LOG else [_ranked_log(fuse_plan)]
    # a code run fuses the hits mapped to their files (the parents) and to its target
    hits = target = log
    if fuse_plan.code is not None:
        stages += code_stages(fuse_plan, log, _fused)
        hits, target = CODE_HITS, target_hits(fuse_plan.code)
    shared = shared and features and fuse_plan.by_parent and target == hits
    stages.append(
        Stage(
            FUSE_HITS,
            "fuse/fused.sql",
            (("retrieval_log", hits),),
            _fused(fuse_plan, "cut"),
            # reading the log twice is cheaper than storing it, unless ranks must be derived
            keep="view" if fuse_plan.has_rank else "table",
        )
    )
    if shared:
        stages.append(
            Stage(
                SOURCE_PARENTS,
                "fuse/fused.sql",
                (("retrieval_log", hits),),
                _fused(fuse_plan, "entries", explain, with_features=True),
                transient=True,
            )
        )
    fused_order = ("query_id", "rank") if sorted_outputs else ()
    published = (Publication(FUSED_FILE, order=fused_order),)
    reranks = fuse_plan.recipe.rerank is not None
    stages.append(
        # Straight from the query to the file: a table of the fused items (nested
        # contributions) would hold memory the parent features need, which ran out of it
        # under --memory-limit. Re-ranked, fused.parquet is the re-ranked items, which read
        # the fused items as a view.
        Stage(
            FUSED_ITEMS,
            "fuse/fused.sql",
            (("retrieval_log", target), *((("entries", SOURCE_PARENTS),) if shared else ())),
            _fused(fuse_plan, "fused_items", explain),
            keep="view" if reranks else "stream",
            publications=() if reranks else published,
            step=None if reranks else f"fusing into {FUSED_FILE}",
        )
    )
    if reranks:
        stages.append(
            Stage(
                RERANKED_ITEMS,
                "fuse/reranked.sql",
                (("fused_items", FUSED_ITEMS), ("rerank_scores", RERANK_INPUT)),
                _reranked(fuse_plan),
                keep="stream",
                publications=published,
                step=f"fusing and re-ranking into {FUSED_FILE}",
            )
        )
    if features:
        stages.append(_parent_features(fuse_plan, shared, sorted_outputs, portable))
    if spans:
        stages.append(
            Stage(
                SPANS,
                "fuse/spans.sql",
                (("spans", TRACE_SPANS),),
                _spans,
                keep="stream",
                publications=(Publication(SPANS_FILE),),
            )
        )
    inputs = (
        LOG,
        *((ENTITIES_INPUT,) if fuse_plan.code is not None else ()),
        *((TRACE_SPANS,) if spans else ()),
        *((RERANK_INPUT,) if reranks else ()),
    )
    return Graph(tuple(stages), inputs)


def keeps_source_parents(session: Session, fuse_plan: FusePlan) -> bool:
    """Whether fusion and parent features share one kept (query, source, parent) aggregate: for
    a document target aligned before fusion, unless memory is bounded (--memory-limit). DuckDB
    does not evict a temp table, and the kept aggregate (a third of the log's rows) then starves
    the statements after it: 100M rows at 2 GB ran out of memory in the parent features. Under
    a limit each statement groups the hits itself and everything spills."""
    return fuse_plan.by_parent and session.settings.memory_limit is None


def _ranked_log(fuse_plan: FusePlan) -> Stage:
    recipe = fuse_plan.recipe.policy.parameters

    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render("fuse/ranked_log.sql", recipe=recipe, inputs=inputs)

    return Stage(RANKED_LOG, "fuse/ranked_log.sql", (("retrieval_log", LOG),), rendered, "view")


def _fused(fuse_plan: FusePlan, selected: str, explain: bool = True, **options: Any) -> Render:
    """fused.sql selecting `selected` (unless told another CTE)."""

    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render_fused(
            fuse_plan,
            final or selected,
            explain,
            log=inputs["retrieval_log"],
            entries=inputs.get("entries"),
            ordered=ordered,
            **options,
        )

    return rendered


def _reranked(fuse_plan: FusePlan) -> Render:
    rerank = fuse_plan.recipe.policy.parameters["rerank"]

    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render(
            "fuse/reranked.sql",
            rerank=rerank,
            inputs=inputs,
            final=final or RERANKED_ITEMS,
            ordered=ordered,
        )

    return rendered


def render_fused(
    fuse_plan: FusePlan,
    final: str = "fused_items",
    explain: bool = True,
    *,
    log: str | None = None,
    entries: str | None = None,
    with_features: bool = False,
    ordered: bool = True,
) -> RenderedSQL:
    """fused.sql alone (the graph's stages render it; tests read its CTEs)."""
    context = fuse_plan.context
    context["inputs"] |= {"entries": entries} | ({"retrieval_log": log} if log else {})
    context["with_features"] = with_features
    return render("fuse/fused.sql", final=final, explain=explain, ordered=ordered, **context)


def _parent_features(
    fuse_plan: FusePlan, shared: bool, sorted_outputs: bool, portable: bool
) -> Stage:
    """The seed-000 parent features of the hits, from the kept aggregate when `shared`. Before
    a Session runs it, it reads the hits' block types, unless `portable` or memory is bounded:
    under a memory limit the distinct items take the three grouping levels, not the block-type
    mask (100M rows at 2 GB ran out of memory with the mask and completed without it)."""

    def measured(session: Session, inputs: Mapping[str, str]) -> Stage:
        if session.settings.memory_limit is not None:
            return stage
        found = hit_block_types(session, inputs["hits"])
        return replace(stage, render=_features(fuse_plan, found))

    stage = Stage(
        PARENT_FEATURES,
        "fuse/parent_features.sql",
        (("hits", FUSE_HITS), *((("source_parents", SOURCE_PARENTS),) if shared else ())),
        _features(fuse_plan),
        publications=(
            Publication(FEATURES_FILE, order=("query_id", "parent_id") if sorted_outputs else ()),
        ),
        step="deriving parent features",
        before=None if portable else measured,
    )
    return stage


def _features(fuse_plan: FusePlan, block_types: list[str] | None = None) -> Render:
    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render_parent_features(
            fuse_plan,
            ordered,
            hits=inputs["hits"],
            source_parents=inputs.get("source_parents"),
            block_types=block_types,
        )

    return rendered


def render_parent_features(
    fuse_plan: FusePlan,
    ordered: bool = True,
    *,
    hits: str = FUSE_HITS,
    source_parents: str | None = None,
    block_types: list[str] | None = None,
) -> RenderedSQL:
    """parent_features.sql alone (the graph's stage renders it; tests read it)."""
    recipe = fuse_plan.recipe
    return render(
        "fuse/parent_features.sql",
        inputs={"hits": hits, "source_parents": source_parents},
        block_types=block_types,
        rrf_k=recipe.fusion.k,
        rank_base=recipe.fusion.rank_base,
        max_score=recipe.parent_features.max_score,
        rrf_scale_bits=fuse_plan.rrf_scale_bits,
        sources=fuse_plan.sources,
        ordered=ordered,
    )


def hit_block_types(session: Session, hits: str = FUSE_HITS) -> list[str] | None:
    """The block types of the hits (NULL as 'unknown'), sorted; None when there are more than
    a block-type mask holds."""
    rows = session.con.execute(
        f"SELECT coalesce(block_type, 'unknown') AS block_type FROM {ident(hits)} "
        f"GROUP BY ALL ORDER BY block_type LIMIT {MASKED_BLOCK_TYPES + 1}"
    ).fetchall()
    return [row[0] for row in rows] if len(rows) <= MASKED_BLOCK_TYPES else None


def _spans(
    inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
) -> RenderedSQL:
    return render("fuse/spans.sql", inputs=inputs)


def manifest_fields(
    fuse_plan: FusePlan, explain: bool = True, features: bool = True
) -> dict[str, Any]:
    """§6.5: recipe_id, sources (top_k, weight, normaliser), fusion, target granularity, the
    plugins used; and
    whether fused.parquet holds the explanations and parent_features.parquet was written."""
    p = fuse_plan.recipe.policy.parameters.thawed()
    plugins = fuse_plan.components.records()
    return {
        "recipe_id": fuse_plan.recipe.version,
        "sources": {name: p["sources"][name] for name in fuse_plan.sources},
        "ignored_sources": fuse_plan.ignored_sources,
        "fusion": {**p["fusion"], "missing_effective": fuse_plan.missing},
        "aligner": p["aligner"],
        "target_granularity": p["target_granularity"],
        "query_analyzer": p["query_analyzer"],
        **({"rerank": p["rerank"]} if "rerank" in p else {}),
        # the plugins it used (issue 48 §3): kind, name, origin and the sha256 of their text
        **({"components": plugins} if plugins else {}),
        # a code run's (issue 49): the level fused, the loc outputs' lengths, §9.4's fallback
        **({"code": fuse_plan.code.record()} if fuse_plan.code is not None else {}),
        "explanations": explain,
        "parent_features": features,
    }
