"""The input of `duckscore fuse` and `duckscore run`: the retrieval log, one row per hit of one
source for one query. `open_log` checks it and plans the recipe against its sources; the plan
reads a rank-only log through the ranked-log stage of its graph (fusion/stages.py)."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import duckdb

from ..core import cache
from ..core.errors import InputError
from ..core.inputs import Table, files_key
from ..core.session import Session
from ..core.tables import OpenedInput
from ..core.validate import fault_probe, raw_view
from .contract import RERANK_SCORES, RETRIEVAL_LOG
from .recipe import FusePlan, plan
from .recipe_view import Recipe
from .stages import LOG, RANKED_LOG
from .traces import as_log


def open_log(
    session: Session, log: Table, recipe: Recipe, label: str = "--log", allow_empty: bool = False
) -> tuple[OpenedInput, FusePlan]:
    """The typed view retrieval_log (input `log`), checked, and `recipe` planned against it;
    errors name the input `label`. `allow_empty`: trace spans none of whose retrievals returned
    a document are a log of no hits, whose sources are the retrievers that ran."""
    hits = as_log(session, log, label, allow_empty)
    contract = replace(RETRIEVAL_LOG, allow_empty=allow_empty and hits is not log)
    opened = session.open("log", contract, hits, label)
    raw = {c.lower() for c in session.schema(raw_view(RETRIEVAL_LOG))}
    present = {c.name for c in RETRIEVAL_LOG.columns if c.name.lower() in raw}
    if "score" not in present and "rank" not in present:
        raise InputError(f"{label} ({opened.given}): needs a score or a rank column")
    # a rank-only log is scored -rank by the ranked-log stage (fusion/stages.py: RANKED_LOG)
    view = LOG if "score" in present else RANKED_LOG
    if "rank" in present:
        files = files_key(opened.format, opened.files)
        key = None if files is None else cache.digest(_ranks_checker(), files)
        if key is None or cache.read("ranks_checked", key) is not True:
            _check_ranks_one_based(session, opened)
            if key is not None:
                cache.write("ranks_checked", key, True)
    listed = "retrieval_log" if opened.rows else "trace_spans WHERE is_retrieval"
    sources = [
        row[0]
        for row in session.con.execute(
            f"SELECT source FROM {listed} GROUP BY source ORDER BY source"
        ).fetchall()
    ]
    if recipe.query_analyzer.enabled and "query_text" not in present:
        raise InputError(f"{label} ({opened.given}): query_analyzer needs a query_text column")
    return opened, plan(
        recipe,
        sources,
        has_rank="rank" in present,
        log_view=view,
        has_snippet="snippet" in present,
    )


# A row when some (query, source) list's ranks may not be 1, 2, …: its smallest is not 1, or a
# rank repeats (ranks up to 64 by a bitmap of one bit per row, larger ones grouped themselves).
RANKS_SUSPECT = (
    "SELECT 1 FROM retrieval_log GROUP BY query_id, source HAVING min(rank) <> 1 "
    "OR bit_count(bit_or(CASE WHEN rank <= 64 THEN 1::UBIGINT << (rank - 1)::UBIGINT END)) "
    "<> count(*) FILTER (WHERE rank <= 64) "
    "UNION ALL "
    "SELECT 1 FROM retrieval_log WHERE rank > 64 GROUP BY query_id, source, rank HAVING count(*) > 1 "
    "LIMIT 1"
)


def log_probe(opened: OpenedInput, has_rank: bool) -> str:
    """One query over the log opened as `opened` (same columns, new rows): (broken, sources) —
    broken when open_log would refuse the rows (it says why), sources as open_log plans them."""
    broken = f"({fault_probe(opened.contract, opened.columns, raw_view(opened.contract))})"
    if has_rank:
        broken += f" OR EXISTS ({RANKS_SUSPECT})"
    return (
        f"SELECT {broken} AS broken, "
        "(SELECT list(DISTINCT source ORDER BY source) FROM retrieval_log) AS sources"
    )


@lru_cache(maxsize=1)
def _ranks_checker() -> str:
    return cache.code_id(__file__, f"duckdb {duckdb.__version__}")


def _check_ranks_one_based(session: Session, opened: OpenedInput) -> None:
    # count(DISTINCT rank) is diagnosed only when the fast test fails
    if session.first_row(RANKS_SUSPECT) is None:
        return
    bad = session.first_row(
        "SELECT query_id, source, min(rank), count(*) - count(DISTINCT rank) "
        "FROM retrieval_log GROUP BY query_id, source "
        "HAVING min(rank) <> 1 OR count(DISTINCT rank) <> count(*) ORDER BY query_id, source LIMIT 1"
    )
    assert bad is not None
    query_id, source, lowest, repeated = bad
    problem = (
        f"smallest rank is {lowest}, not 1" if lowest != 1 else f"{repeated} rank values repeat"
    )
    raise InputError(
        f"{opened.label} ({opened.given}, query_id={query_id!r}, source={source!r}): "
        f"column 'rank' is not 1-based and unique within (query_id, source): {problem}"
    )


def open_rerank_scores(
    session: Session, given: Table | None, fuse_plan: FusePlan, label: str = "--rerank-scores"
) -> OpenedInput | None:
    """The typed view rerank_scores (issue 48 §5) over `given`, checked against RERANK_SCORES
    (a repeated (query_id, item_id), a NaN or an infinite score refused, naming the row); the
    recipe's rerank block needs it, and it needs the block."""
    rerank = fuse_plan.recipe.rerank
    if rerank is None and given is None:
        return None
    if rerank is None:
        raise InputError(
            f"{label}: recipe {fuse_plan.recipe.version} has no rerank block to use the scores "
            "(set rerank.top_n and rerank.mode)"
        )
    if given is None:
        raise InputError(
            f"recipe {fuse_plan.recipe.version} re-ranks (rerank.top_n {rerank.top_n}): "
            f"give the re-ranker's scores with {label}"
        )
    return session.open("rerank_scores", RERANK_SCORES, given, label)
