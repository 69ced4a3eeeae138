"""A code run's inputs (docs/code.md, "Fusing code"): the entities table (`--entities`), the
log's lines checked for the mapper — every refusal one line naming the row, or the query, item
and file — and seed 003 §9.4's fallback decided, before the graph is built."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.errors import InputError
from ..core.render import ident, lit
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import OpenedInput
from ..core.validate import check_rows, raw_view, typed_column
from .code_plan import CODE_LEVELS, ITEM_LINES, CodePlan, CodeTarget, fuses_blocks
from .code_stages import ENTITIES_INPUT, mapper_check
from .contract import ENTITIES
from .recipe_view import Recipe

logger = module_logger(__name__)


def open_code(session: Session, code: CodeTarget, opened: OpenedInput, recipe: Recipe) -> CodePlan:
    """The entities table opened, the log `opened` checked for the mapper, and the code plan:
    the level fused — file level when the recipe fuses blocks and the block sources do not
    share their chunking (seed 003 §9.4, with a warning)."""
    entities = session.open("entities", ENTITIES, code.entities, code.label)
    parse_ids = "start_line" not in opened.columns
    _check_lines(session, opened, parse_ids)
    module_paths = "module_path" in opened.columns
    plan = CodePlan(
        CODE_LEVELS[recipe.target_granularity], code.top_k, parse_ids, module_paths=module_paths
    )
    fault = mapper_check(session, plan, opened.contract.name, ENTITIES_INPUT, "first_fault")
    if fault is not None:
        raise InputError(_fault(fault, opened, entities))
    _warn_of_no_entity(session, plan, opened, entities)
    if not fuses_blocks(recipe):
        return plan
    unshared = mapper_check(session, plan, opened.contract.name, ENTITIES_INPUT, "chunking")
    if unshared is None:
        return plan
    reason = _unshared(unshared)
    logger.warning(
        f"the block sources do not share their chunking ({reason}): fusing at file level, "
        "aligned before fusion (seed 003 §9.4)"
    )
    return replace(plan, level="file" if plan.level == "block" else plan.level, fallback=reason)


def _warn_of_no_entity(
    session: Session, plan: CodePlan, opened: OpenedInput, entities: OpenedInput
) -> None:
    """A warning when the hits have lines but no entity overlaps any of them: every hit maps to
    its file, and the module and entity lists are empty (entities of another revision, or a
    table of files alone) — but for the modules that summaries name in `module_path`."""
    coverage = mapper_check(session, plan, opened.contract.name, ENTITIES_INPUT, "entity_coverage")
    if coverage is not None and coverage["line_ranges"] and not coverage["in_entities"]:
        consequence = (
            "every hit with lines maps to its file, and the module and entity lists hold only "
            "the modules named in module_path"
            if plan.module_paths
            else "every hit maps to its file, and the module and entity lists are empty"
        )
        logger.warning(
            f"no entity of {entities.label} ({entities.given}) overlaps any of the "
            f"{coverage['line_ranges']:,} line ranges of {opened.label} ({opened.given}): "
            f"{consequence}"
        )


def _check_lines(session: Session, opened: OpenedInput, parse_ids: bool) -> None:
    """Every hit the mapper maps by its lines (a block, a module or an entity) has them: in
    start_line and end_line, or (`parse_ids`, the log has no such columns) in its id."""
    item = typed_column(opened, "item_id")
    parent = typed_column(opened, "parent_id")
    level = f"coalesce({typed_column(opened, 'granularity')}, CASE WHEN {item} = {parent} THEN 'doc' ELSE 'block' END)"
    lined = f"{level} IN ('block', 'module', 'entity')"
    if not parse_ids:
        start, end = typed_column(opened, "start_line"), typed_column(opened, "end_line")
        check_rows(
            session.con,
            opened,
            f"{lined} AND ({start} IS NULL OR {end} IS NULL)",
            "a {value} hit of a code log needs its lines: start_line or end_line is NULL",
            shown=level,
        )
        return
    matches = f"regexp_matches({item}, {lit(ITEM_LINES)})"
    any_lines = session.first_row(
        f"SELECT 1 FROM {ident(raw_view(opened.contract))} AS child WHERE {lined} AND {matches} LIMIT 1"
    )
    if any_lines is None:
        check_rows(
            session.con,
            opened,
            lined,
            "a {value} hit of a code log needs its lines: give start_line and end_line, or ids "
            "of the form path:start:end (docs/code.md)",
            shown=level,
        )
    check_rows(
        session.con,
        opened,
        f"{lined} AND NOT {matches}",
        "item_id {value} is not of the form path:start:end, as the log's other block ids are",
        shown=item,
    )
    start, end = (f"CAST(regexp_extract({item}, {lit(ITEM_LINES)}, {i}) AS BIGINT)" for i in (2, 3))
    check_rows(
        session.con,
        opened,
        f"{lined} AND {start} > {end}",
        "item_id {value}: its start line is after its end line",
        shown=item,
    )


def _fault(fault: dict[str, Any], opened: OpenedInput, entities: OpenedInput) -> str:
    """The mapper's first fault (sql/fuse/code_map.sql: faults) as one line."""
    hit = (
        f"query_id={fault['query_id']!r}, source={fault['source']!r}, item_id={fault['item_id']!r}"
    )
    at = f"at revision {fault['revision']!r}" if fault["revision"] is not None else "(no revision)"
    file, log = fault["code_file"], f"{opened.label} ({opened.given}, {hit})"
    if fault["fault"] == "unknown file":
        unknown, files = fault["unknown"], fault["known_or_not"]
        hint = (
            f": {unknown} of the log's {files} files are not, are they of another repository "
            "or revision?"
            if 2 * unknown > files
            else ""
        )
        return f"{log}: file {file!r} is not in {entities.label} ({entities.given}) {at}{hint}"
    lines = f"lines {fault['code_start']}-{fault['code_end']}"
    if fault["fault"] == "past its file":
        return f"{log}: {lines} run past the end of {file}, {fault['last_line']} lines {at}"
    if fault["fault"] == "unknown module":
        return (
            f"{log}: module_path {fault['other']!r} is not a module (a top-level class or "
            f"function) of {file} in {entities.label} ({entities.given}) {at}"
        )
    if fault["fault"] == "two spans":
        return f"{log}: the source gives this item_id more than one line range (one is {file}:{fault['code_start']}-{fault['code_end']})"
    return f"{log}: {file} {lines} also has the item_id {fault['other']!r} in this source: one span, one id"


def _unshared(found: dict[str, Any]) -> str:
    """Why the block sources do not share their chunking (code_map.sql: chunking)."""
    a, b = found["source_a"], found["source_b"]
    if found["priority"] == 1:
        return (
            f"{a} and {b} give block {found['item_a']!r} other lines, "
            f"{found['start_a']}-{found['end_a']} and {found['start_b']}-{found['end_b']}"
        )
    if found["priority"] == 2:
        return (
            f"{a} and {b} name the lines {found['code_file']}:{found['start_a']}-"
            f"{found['end_a']} {found['item_a']!r} and {found['item_b']!r}"
        )
    return (
        f"{a} and {b} share no block: their blocks overlap in {found['code_file']}, never "
        "with one id and one line range"
    )
