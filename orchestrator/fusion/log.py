"""The input of `duckscore fuse` and `duckscore run`: the retrieval log, one row per hit of one
source for one query. `open_log` checks it and plans the recipe against its sources; the plan
reads a rank-only log through the ranked-log stage of its graph (fusion/stages.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache

import duckdb

from ..core import cache
from ..core.errors import InputError
from ..core.inputs import Table, files_key
from ..core.render import ident, lit
from ..core.session import Session
from ..core.tables import OpenedInput
from ..core.validate import (
    FILE_COLUMN,
    ROW_COLUMN,
    check_rows,
    fault_probe,
    raw_view,
    typed_column,
)
from .code import open_code
from .code_plan import CodeTarget
from .contract import PAYLOAD, RERANK_SCORES, RETRIEVAL_LOG
from .recipe import FusePlan, plan
from .recipe_view import Recipe
from .stages import LOG, RANKED_LOG
from .traces import as_log


def open_log(
    session: Session,
    log: Table,
    recipe: Recipe,
    label: str = "--log",
    allow_empty: bool = False,
    code: CodeTarget | None = None,
) -> tuple[OpenedInput, FusePlan]:
    """The typed view retrieval_log (input `log`), checked, and `recipe` planned against it;
    errors name the input `label`. `allow_empty`: trace spans none of whose retrievals returned
    a document are a log of no hits, whose sources are the retrievers that ran. `code`: a code
    run's entities table, which the log's blocks are mapped through (fusion/code.py)."""
    hits = as_log(session, log, label, allow_empty)
    contract = replace(RETRIEVAL_LOG, allow_empty=allow_empty and hits is not log)
    opened = session.open("log", contract, hits, label)
    raw = {c.lower() for c in session.schema(raw_view(RETRIEVAL_LOG))}
    present = {c.name for c in RETRIEVAL_LOG.columns if c.name.lower() in raw}
    if "score" not in present and "rank" not in present:
        raise InputError(f"{label} ({opened.given}): needs a score or a rank column")
    # a rank-only log is scored -rank by the ranked-log stage (fusion/stages.py: RANKED_LOG)
    view = LOG if "score" in present else RANKED_LOG
    files = files_key(opened.format, opened.files)
    key = None if files is None else cache.digest(_log_checker(), files)
    if "rank" in present:
        _checked_once(session, opened, key, "ranks_checked", _check_ranks_one_based)
    _checked_once(session, opened, key, "payload_checked", _check_payload)
    listed = "retrieval_log" if opened.rows else "trace_spans WHERE is_retrieval"
    sources = [
        row[0]
        for row in session.con.execute(
            f"SELECT source FROM {listed} GROUP BY source ORDER BY source"
        ).fetchall()
    ]
    if recipe.query_analyzer.enabled and "query_text" not in present:
        raise InputError(f"{label} ({opened.given}): query_analyzer needs a query_text column")
    code_plan = None if code is None else open_code(session, code, opened, recipe)
    # a code run's hits carry their lines, from the log's columns or its ids
    lines = LINES if code_plan is not None else ()
    # a trace export's hits carry their trace and span ids, which spans.parquet joins on
    others = opened.others if hits is log else ()
    payload = tuple(c for c in PAYLOAD if c in present or c in lines) + others
    fuse_plan = plan(
        recipe,
        sources,
        has_rank="rank" in present,
        log_view=view,
        has_snippet="snippet" in present,
        payload=payload,
        code=code_plan,
    )
    _check_declared_granularities(session, opened, fuse_plan)
    return opened, fuse_plan


LINES = ("file_path", "start_line", "end_line")


def _check_payload(session: Session, opened: OpenedInput) -> None:
    """A hit's lines run forward (start_line at most end_line), and in a code log (one with
    lines) a source's hits are all of one granularity, each refusal naming a row (issue 49 §1).
    A log without lines keeps mixing doc and block hits in one source, as it always could."""
    if {"start_line", "end_line"} <= opened.columns.keys():
        start, end = typed_column(opened, "start_line"), typed_column(opened, "end_line")
        check_rows(
            session.con,
            opened,
            f"{start} > {end}",
            "lines {value} run backwards: start_line is after end_line",
            shown=f"CAST({start} AS VARCHAR) || '-' || CAST({end} AS VARCHAR)",
        )
    if not _one_granularity_per_source(opened):
        return
    source_of, granularity = typed_column(opened, "source"), typed_column(opened, "granularity")
    in_file_order = f"struct_pack(file := {FILE_COLUMN}, row := {ROW_COLUMN})"
    mixed = session.first_row(
        f"SELECT {source_of}, arg_min({granularity}, {in_file_order}) "
        f"FROM {ident(raw_view(RETRIEVAL_LOG))} AS child WHERE {granularity} IS NOT NULL "
        f"GROUP BY ALL HAVING min({granularity}) <> max({granularity}) ORDER BY ALL LIMIT 1"
    )
    if mixed is None:
        return
    source, first = mixed
    check_rows(
        session.con,
        opened,
        f"{source_of} = {lit(source)} AND {granularity} <> {lit(first)}",
        f"source {source!r} mixes granularities: {{value}} here, {first!r} in its first row (a "
        "source's hits are all of one level)",
        shown=granularity,
    )


# seed 003's `file` is a document: a source declared either holds hits of either
DOCUMENT_LEVELS = ("doc", "file")


def declared_granularities(fuse_plan: FusePlan) -> dict[str, str]:
    """The fused sources whose recipe entry declares a granularity, by name."""
    declared = fuse_plan.recipe.sources
    return {
        name: level
        for name in fuse_plan.sources
        if (level := declared[name].granularity) is not None
    }


def off_declaration(source: str, declared: str, column: Callable[[str], str]) -> str:
    """SQL: a hit of `source` whose granularity is not `declared` (doc and file are one
    level); a NULL granularity is the level the log reads it as: doc when item_id = parent_id,
    else block. `column` gives a log column's SQL."""
    accepted = DOCUMENT_LEVELS if declared in DOCUMENT_LEVELS else (declared,)
    return (
        f"{column('source')} = {lit(source)} AND {read_level(column)} "
        f"NOT IN ({', '.join(lit(level) for level in accepted)})"
    )


def read_level(column: Callable[[str], str]) -> str:
    """SQL: a hit's granularity as the log reads it (a NULL by its ids)."""
    granularity, item, parent = (column(c) for c in ("granularity", "item_id", "parent_id"))
    return f"coalesce({granularity}, CASE WHEN {item} = {parent} THEN 'doc' ELSE 'block' END)"


def _check_declared_granularities(
    session: Session, opened: OpenedInput, fuse_plan: FusePlan
) -> None:
    """Every hit of a source whose recipe entry declares a granularity is of it (issue 49 §1),
    a refusal naming the row; checked per recipe, not cached with the log's own checks."""

    def typed(name: str) -> str:
        return typed_column(opened, name)

    granularity = typed_column(opened, "granularity")
    read_as = f"'NULL, read as ' || {read_level(typed)}"
    for source, declared in declared_granularities(fuse_plan).items():
        check_rows(
            session.con,
            opened,
            off_declaration(source, declared, typed),
            f"granularity {{value}} is not the {declared!r} {fuse_plan.recipe.source} declares "
            f"for source {source!r} (sources.{source}.granularity)",
            shown=f"coalesce({granularity}, {read_as})",
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


def log_probe(opened: OpenedInput, fuse_plan: FusePlan) -> str:
    """One query over the log opened as `opened` (same columns, new rows) and planned as
    `fuse_plan`: (broken, sources) — broken when open_log would refuse the rows (it says why),
    sources as open_log plans them."""
    broken = f"({fault_probe(opened.contract, opened.columns, raw_view(opened.contract))})"
    if fuse_plan.has_rank:
        broken += f" OR EXISTS ({RANKS_SUSPECT})"
    if {"start_line", "end_line"} <= opened.columns.keys():
        broken += " OR EXISTS (SELECT 1 FROM retrieval_log WHERE start_line > end_line)"
    if _one_granularity_per_source(opened):
        broken += (
            " OR EXISTS (SELECT 1 FROM retrieval_log WHERE granularity IS NOT NULL "
            "GROUP BY source HAVING min(granularity) <> max(granularity))"
        )
    declared = declared_granularities(fuse_plan).items()
    broken += "".join(
        f" OR EXISTS (SELECT 1 FROM retrieval_log WHERE {off_declaration(s, d, str)})"
        for s, d in declared
    )
    return (
        f"SELECT {broken} AS broken, "
        "(SELECT list(DISTINCT source ORDER BY source) FROM retrieval_log) AS sources"
    )


def _one_granularity_per_source(opened: OpenedInput) -> bool:
    """Whether a source's hits must all be of one granularity: in a code log (one with lines)
    that has a granularity column; a log without lines may mix doc and block hits."""
    return "granularity" in opened.columns and bool(set(LINES) & opened.columns.keys())


def _checked_once(
    session: Session,
    opened: OpenedInput,
    key: str | None,
    name: str,
    check: Callable[[Session, OpenedInput], None],
) -> None:
    """`check` of the log's rows, once per content of its files (the cache's `name`, `key`)."""
    if key is not None and cache.read(name, key) is True:
        return
    check(session, opened)
    if key is not None:
        cache.write(name, key, True)


@lru_cache(maxsize=1)
def _log_checker() -> str:
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
