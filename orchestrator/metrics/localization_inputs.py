"""The inputs of `duckscore eval --loc`: the localization outputs and the gold locations, loaded
into DuckDB as the long tables sql/metrics/localization.sql reads.

loc_outputs.jsonl and the benchmarks' gold JSONL are read line by line with Python's json, as the
benchmarks' own readers read them: DuckDB's read_json numbers records, not lines (a blank line
shifts every later number), and a typed column turns `[1]` into `['1']` without a word, while
each refusal here names the file and the line. A gold table (Parquet, CSV or JSON of
instance_id, level, location) is checked against its contract like every other input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..core.errors import InputError
from ..core.inputs import Table
from ..core.render import ident
from ..core.session import Session
from ..core.tables import OpenedInput
from .catalog import LOC_LEVELS
from .tables import LOC_ENTITY_FILES, LOC_GOLD_TABLE

JSON_SUFFIXES = (".json", ".jsonl", ".ndjson")
BENCHMARK_KEYS = ("file_changes", "edit_functions")
# a JSON Lines file, or its lines' values (the loc_outputs a run returns to Python)
Lines = str | Path | Sequence[Any]

# the tables the template reads, and the instances each side names
PREDICTIONS: dict[str, pa.DataType] = {"instance_id": pa.string(), "level": pa.string(),
                                       "position": pa.int64(), "location": pa.string()}  # fmt: skip
GOLD: dict[str, pa.DataType] = {"instance_id": pa.string(), "level": pa.string(),
                                "location": pa.string()}  # fmt: skip
INSTANCES: dict[str, pa.DataType] = {"instance_id": pa.string()}
# a gold instance and its revision (the commit its locations are at; NULL: not given)
GOLD_INSTANCES: dict[str, pa.DataType] = {"instance_id": pa.string(), "revision": pa.string()}


@dataclass(frozen=True)
class LocInputs:
    """What was read: the inputs as the user named them, for messages and --per-query's check."""

    loc: str
    gold: str
    gold_shape: str  # 'benchmark' (JSONL of file_changes / edit_functions) or 'table'
    predicted_instances: int
    gold_instances: int


def load_inputs(session: Session, loc: Lines, gold: Table, levels: list[str]) -> LocInputs:
    """Create loc_predictions, loc_predicted (the prediction lines' instances), loc_gold and
    loc_gold_instances (each with its revision, NULL when the gold gives none) in `session`."""
    predicted, rows = read_predictions(loc, levels)
    _load(session, "loc_predictions", PREDICTIONS, rows)
    _load(session, "loc_predicted", INSTANCES, [(i,) for i in predicted])
    shown = str(gold)
    if isinstance(gold, (str, Path)) and gold_is_benchmark(gold):
        instances, gold_rows = read_benchmark_gold(Path(gold))
        _load(session, "loc_gold", GOLD, gold_rows)
        _load(session, "loc_gold_instances", GOLD_INSTANCES, instances)
        shape = "benchmark"
    else:
        opened = session.open("gold", LOC_GOLD_TABLE, gold, "--gold")
        table, shown = ident(opened.contract.name), opened.given
        session.execute(
            "CREATE OR REPLACE TEMP VIEW loc_gold AS "
            f"SELECT instance_id, level, location FROM {table}"
        )
        _refuse_two_revisions(session, table, shown)
        session.execute(
            "CREATE OR REPLACE TEMP VIEW loc_gold_instances AS "
            f"SELECT instance_id, min(revision) AS revision FROM {table} GROUP BY instance_id"
        )
        shape = "table"
    gold_count = session.first_row("SELECT count(*) FROM loc_gold_instances")
    return LocInputs(
        shown_lines(loc), shown, shape, len(predicted), int(gold_count[0]) if gold_count else 0
    )


def _refuse_two_revisions(session: Session, table: str, gold: str) -> None:
    """An instance's rows of a gold table give one revision (or none): its locations are at
    one commit."""
    two = session.first_row(
        f"SELECT instance_id, list_sort(list(DISTINCT revision), 'ASC', 'NULLS FIRST') "
        f"FROM {table} GROUP BY instance_id "
        "HAVING count(DISTINCT revision) > 1 OR count(revision) NOT IN (0, count(*)) "
        "ORDER BY instance_id LIMIT 1"
    )
    if two is not None:
        instance, revisions = two
        raise InputError(
            f"--gold ({gold}): instance {instance!r} gives more than one revision "
            f"({', '.join('NULL' if r is None else repr(r) for r in revisions)}): an instance's "
            "locations are at one commit"
        )


def open_entity_files(session: Session, entities: Table) -> OpenedInput:
    """The view loc_entities(file_path, revision): the files `duckscore entities` listed, at
    their revisions."""
    return session.open("entities", LOC_ENTITY_FILES, entities, "--entities")


# -- loc_outputs.jsonl ------------------------------------------------------------------------
def read_predictions(
    loc: Lines, levels: list[str]
) -> tuple[list[str], list[tuple[str, str, int, str]]]:
    """The instances of loc_outputs.jsonl in file order, and one row per entry of the chosen
    levels' lists. A level whose key no line has is refused: every value would be 0."""
    instances: list[str] = []
    rows: list[tuple[str, str, int, str]] = []
    present: set[str] = set()
    for where, instance, value in instance_lines(loc, "--loc"):
        instances.append(instance)
        for level in levels:
            key = LOC_LEVELS[level]
            if value.get(key) is not None:
                present.add(level)
            for position, location in enumerate(string_list(value, key, where), 1):
                rows.append((instance, level, position, location))
    missing = [LOC_LEVELS[level] for level in levels if level not in present]
    if missing:
        raise InputError(
            f"--loc ({shown_lines(loc)}): no line has {' or '.join(missing)}, so its level would "
            "score 0 everywhere (choose the levels with --levels)"
        )
    return instances, rows


# -- the gold -----------------------------------------------------------------------------
def gold_is_benchmark(gold: str | Path) -> bool:
    """A JSON file whose first line has file_changes or edit_functions: the benchmarks' gold;
    anything else is a table of instance_id, level, location."""
    path = Path(gold)
    if path.suffix.lower() not in JSON_SUFFIXES or not path.is_file():
        return False
    try:
        first = next(json_lines(path, "--gold"), None)
    except InputError:  # not JSON lines (a JSON array over lines): a table, read as any other
        return False
    return (
        first is not None
        and isinstance(first[1], dict)
        and any(key in first[1] for key in BENCHMARK_KEYS)
    )


def read_benchmark_gold(
    path: Path,
) -> tuple[list[tuple[str, str | None]], list[tuple[str, str, str]]]:
    """The (instance_id, revision) of each line of a benchmark gold file and its (instance_id,
    level, location) rows: `file_changes[].file` (file), `.changes.edited_modules` (module),
    `.changes.edited_entities` (function); a line without file_changes derives all three from
    `edit_functions`. `revision` (or `base_commit`), optional, is the commit the locations
    are at."""
    instances: list[tuple[str, str | None]] = []
    rows: list[tuple[str, str, str]] = []
    for where, instance, value in instance_lines(path, "--gold"):
        instances.append((instance, gold_revision(value, where)))
        if value.get("file_changes") is not None:
            located = from_file_changes(value["file_changes"], where)
        elif "edit_functions" in value:
            located = from_edit_functions(gold_list(value, "edit_functions", where))
        else:
            raise InputError(f"{where}: neither file_changes nor edit_functions")
        rows += [(instance, level, location) for level, location in located]
    return instances, rows


def gold_revision(value: dict[str, Any], where: str) -> str | None:
    """A gold line's revision: its `revision`, else the benchmarks' `base_commit` (each a
    non-empty text when given); None when neither is given."""
    revision, base_commit = (
        _revision_key(value, key, where) for key in ("revision", "base_commit")
    )
    if revision is not None and base_commit is not None and revision != base_commit:
        raise InputError(f"{where}: revision {revision!r} and base_commit {base_commit!r} differ")
    return revision if revision is not None else base_commit


def _revision_key(value: dict[str, Any], key: str, where: str) -> str | None:
    found = value.get(key)
    if found is not None and (not isinstance(found, str) or not found):
        raise InputError(f"{where}: {key} {found!r} is not a non-empty text")
    return found


def from_file_changes(changes: Any, where: str) -> list[tuple[str, str]]:
    if not isinstance(changes, list):
        raise InputError(f"{where}: file_changes is not a list")
    located: list[tuple[str, str]] = []
    for index, change in enumerate(changes):
        at = f"file_changes[{index}]"
        if not isinstance(change, dict):
            raise InputError(f"{where}: {at} is not an object")
        file = change.get("file")
        if not isinstance(file, str) or not file:
            raise InputError(f"{where}: {at}.file is not a non-empty text")
        located.append(("file", file))
        edited = change.get("changes")
        if edited is None:
            continue
        if not isinstance(edited, dict):
            raise InputError(f"{where}: {at}.changes is not an object")
        for level, key in (("module", "edited_modules"), ("function", "edited_entities")):
            located += [
                (level, entry) for entry in gold_list(edited, key, f"{where}: {at}.changes")
            ]
    return located


def from_edit_functions(entries: list[str]) -> list[tuple[str, str]]:
    """`path.py:Class.method` gives the file `path.py`, the module `path.py:Class` and the
    entity itself (LocAgent's reading of Loc-Bench); an entry without `:` names a file only."""
    located: list[tuple[str, str]] = []
    for entry in entries:
        file, colon, name = entry.partition(":")
        located.append(("file", file))
        if colon and name:
            located += [("module", f"{file}:{name.split('.')[0]}"), ("function", entry)]
    return located


# -- JSON lines ---------------------------------------------------------------------------
def shown_lines(given: Lines) -> str:
    """How messages name `given`: its path, or the kind of the values."""
    return str(given) if isinstance(given, (str, Path)) else f"<{type(given).__name__}>"


def json_lines(path: Path, label: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of `path`, parsed as json.loads does; a line
    that is not JSON stops with its number."""
    if not path.is_file():
        raise InputError(f"{label} ({path}): no such file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{label} ({path}, line {where}): not UTF-8 text (byte 0x{data[exc.start]:02x})"
        ) from None
    if not text.strip():
        raise InputError(f"{label} ({path}): empty file, no lines")
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{label} ({path}, line {number}): not JSON: {exc.msg} (column {exc.colno})"
            ) from None


def instance_lines(given: Lines, label: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, instance_id, object) of each line: `where` names the file (or the list) and line
    for messages; an instance_id seen on an earlier line is refused."""
    first_line: dict[str, int] = {}
    values = (
        json_lines(Path(given), label) if isinstance(given, (str, Path)) else enumerate(given, 1)
    )
    for number, value in values:
        where = f"{label} ({shown_lines(given)}, line {number})"
        instance = instance_id(value, where)
        if instance in first_line:
            raise InputError(
                f"{where}: instance_id {instance!r} again (first at line {first_line[instance]})"
            )
        first_line[instance] = number
        yield where, instance, value


def instance_id(value: Any, where: str) -> str:
    """The line's instance_id, a non-empty text (an integer is taken as its digits)."""
    if not isinstance(value, dict):
        raise InputError(f"{where}: not a JSON object")
    found = value.get("instance_id")
    if isinstance(found, int) and not isinstance(found, bool):
        return str(found)
    if not isinstance(found, str) or not found:
        shown = "no instance_id" if found is None else f"instance_id {found!r} is not a text"
        raise InputError(f"{where}: {shown}")
    return found


def string_list(value: dict[str, Any], key: str, where: str) -> list[str]:
    """`value[key]` as a list of texts; absent or null is an empty list."""
    found = value.get(key)
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(item, str) for item in found):
        raise InputError(f"{where}: {key} is not a list of texts")
    return found


def gold_list(value: dict[str, Any], key: str, where: str) -> list[str]:
    """string_list, refusing an empty text (a gold location nothing can name)."""
    found = string_list(value, key, where)
    if "" in found:
        raise InputError(f"{where}: {key} holds an empty text")
    return found


def _load(
    session: Session, name: str, columns: dict[str, pa.DataType], rows: list[tuple[Any, ...]]
) -> None:
    """The temp table `name` of `rows`, typed as `columns` (also when there are none)."""
    table = pa.table(
        {column: pa.array([row[i] for row in rows], type=kind)
         for i, (column, kind) in enumerate(columns.items())}
    )  # fmt: skip
    staged = f"{name}_arrow"
    session.con.register(staged, table)
    try:
        session.execute(
            f"CREATE OR REPLACE TEMP TABLE {ident(name)} AS SELECT * FROM {ident(staged)}"
        )
    finally:
        session.con.unregister(staged)
