"""The tables a request of `duckscore serve` carries, read by their table contracts.

One definition for both sides of the API: a RequestTable wraps the contract the scorer checks the
table with (fuse's retrieval_log for POST /v1/score, seed 001's answers, citations, chunks and
events for POST /v1/answers) and gives (1) the JSON Schema of its rows that /openapi.json
publishes, and (2) the Arrow table the server builds from a request's JSON rows, typed by the same
columns. So a column's JSON types, bounds (the log's score range, MAX_SCORE; a count's 2^53),
allowed values (granularity's doc/block) and nullability are written once, in the contract.

What a row schema says of a column, by its kind (core/tables.py; core/validate.py checks it):

- id: text of one character or more, or an integer (64-bit);
- text: text, one of `choices` when given, at most `max_length` characters when given;
- number: a number within [min, max]; count: a whole number within [min, max] and ±2^53;
- time: text (a timestamp DuckDB reads);
- `null` only where the column is nullable; required where the contract requires the column.

What a list of rows says, beyond each row: an id column is text in every row or an integer in
every row (an Arrow column has one type); an optional column that may not be null is in every
row or in none (a row without it would be a null); what some row must hold (`min_items`; one of
`one_of_columns`, the log's score or rank; `columns_given`, query_text when the recipe's query
analyzer reads it; `values_given`, a hit of every source the recipe declares). The keys of a row
that are not the contract's columns are ignored, but for a column's name written in another case
(a file's columns match in any case; here the names are exact), which is refused. A row that
breaks a rule the schema states is refused in one line naming the table, the row and the column,
before any SQL runs; the rules no schema can state (a repeated key, ranks that are not 1, 2, …,
a citation of an unknown answer) are the contract checks' and name the row as well.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..answering.policy import AnswerPolicy
from ..answering.tables import ANSWERS, CHUNKS, CITATIONS, EVENTS
from ..core.errors import InputError
from ..core.tables import Column, TableContract
from ..core.validate import MAX_COUNT
from ..fusion.contract import RETRIEVAL_LOG
from ..fusion.recipe_view import Recipe

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # an integer id is an Arrow int64
_ARROW_TYPES = {
    "id": pa.string(),
    "text": pa.string(),
    "time": pa.string(),
    "number": pa.float64(),
    "count": pa.int64(),
}
_WANTED = {
    "id": "text or an integer",
    "text": "text",
    "time": "text (a timestamp)",
    "number": "a number",
    "count": "a whole number",
}


@dataclass(frozen=True)
class RequestTable:
    """A table of a request: `name` is its key in the JSON body and names it in errors."""

    name: str
    contract: TableContract
    one_of_columns: tuple[str, ...] = ()  # some row has one of these columns
    columns_given: tuple[str, ...] = ()  # optional in the contract, some row has it here
    values_given: tuple[tuple[str, str], ...] = ()  # (column, value): some row has it
    no_nul: tuple[str, ...] = ()  # text columns whose values become SQL literals (no NUL)
    description: str = ""

    @property
    def min_items(self) -> int:
        return 0 if self.contract.allow_empty else 1

    # -- the JSON Schema ------------------------------------------------------------------------

    def row_schema(self) -> dict[str, Any]:
        """One row: an object of the contract's columns."""
        schema: dict[str, Any] = {
            "type": "object",
            "description": f"One row of the {self.contract.name} table. Keys that are not its "
            "columns are ignored (a column's name in another case is refused).",
            "required": [c.name for c in self.contract.columns if c.required],
            "properties": {c.name: self._column_schema(c) for c in self.contract.columns},
            "additionalProperties": True,
            # a column's name in another case is refused (a file's columns match in any case)
            "propertyNames": {
                "anyOf": [
                    {"enum": [c.name for c in self.contract.columns]},
                    {"not": {"pattern": _any_case(c.name for c in self.contract.columns)}},
                ]
            },
        }
        if self.one_of_columns:
            wanted = " or ".join(f"`{name}`" for name in self.one_of_columns)
            schema["description"] += f" The rows give {wanted}."
        return schema

    def _column_schema(self, column: Column) -> dict[str, Any]:
        schema = column_schema(column)
        if column.name in self.no_nul:
            schema["pattern"] = "^[^\\u0000]*$"
            schema["description"] = "Text without a NUL character."
        return schema

    def list_schema(self, row_ref: str) -> dict[str, Any]:
        """The list of rows: each row's schema (by `row_ref`) and the rules across rows."""
        across: list[dict[str, Any]] = []
        for column in self.contract.columns:
            if column.kind == "id":  # one Arrow type a column: text in every row, or integers
                across.append(
                    {
                        "anyOf": [
                            _every_row(column.name, {"type": _with_null(column, "string")}),
                            _every_row(column.name, {"type": _with_null(column, "integer")}),
                        ]
                    }
                )
            if not column.required and not column.nullable:  # absent in a row is null
                across.append(
                    {
                        "anyOf": [
                            {"items": {"required": [column.name]}},
                            {"items": {"not": {"required": [column.name]}}},
                        ]
                    }
                )
        if self.one_of_columns:
            across.append({"anyOf": [_some_row([name]) for name in self.one_of_columns]})
        across.extend(_some_row([name]) for name in self.columns_given)
        for name, value in self.values_given:
            across.append(_some_row([name], **{name: {"const": value}}))
        schema: dict[str, Any] = {"type": "array", "items": {"$ref": row_ref}}
        if self.description:
            schema["description"] = self.description
        if self.min_items:
            schema["minItems"] = self.min_items
        if across:
            schema["allOf"] = across
        return schema

    # -- the Arrow table ------------------------------------------------------------------------

    def to_arrow(self, rows: list[dict[str, Any]]) -> pa.Table:
        """The rows as an Arrow table of the contract's columns, each of its kind's type. One
        line naming the table, the row and the column refuses a value of a JSON type the column
        does not take, an id column of text in one row and an integer in another, a key that is
        a column's name in another case, and a required column no row has. No rows: the
        required columns, empty."""
        keys: set[str] = set().union(*rows)
        names = {column.name for column in self.contract.columns}
        by_lower = {name.lower(): name for name in names}
        for key in sorted(keys - names):
            if key.isascii() and key.lower() in by_lower:  # as the schema's [sS][cC]… patterns
                index = next(i for i, row in enumerate(rows) if key in row)
                raise self._fault(
                    rows, index, f"key {key!r} is column {by_lower[key.lower()]!r} written in "
                    "another case (the columns' names are case-sensitive here)"
                )  # fmt: skip
        if rows:
            missing = [c.name for c in self.contract.columns if c.required and c.name not in keys]
            if missing or (self.one_of_columns and not keys & set(self.one_of_columns)):
                wanted = (
                    f"column {missing[0]!r}" if missing
                    else "a column " + " or ".join(map(repr, self.one_of_columns))
                )  # fmt: skip
                found = ", ".join(sorted(keys)) or "none"
                raise InputError(f"{self.name}: no row has {wanted} (the rows' keys: {found})")
        arrays: dict[str, pa.Array[Any]] = {}
        for column in self.contract.columns:
            if column.name in keys:
                arrays[column.name] = self._column(
                    column, [row.get(column.name) for row in rows], rows
                )
            elif not rows and column.required:
                arrays[column.name] = pa.array([], _ARROW_TYPES[column.kind])
        return pa.table(arrays)

    def _column(
        self, column: Column, values: list[Any], rows: list[dict[str, Any]]
    ) -> pa.Array[Any]:
        """One column's values as its kind's Arrow type: at C speed when their Python types
        are the column's (a set of types), else the row at fault is found and named."""
        types = set(map(type, values)) - {type(None)}
        if column.kind == "id":
            if types <= {str}:
                return self._text(column, values, rows)
            if types <= {int} and _in_int64(values):
                return pa.array(values, pa.int64())
        elif column.kind in ("text", "time"):
            if types <= {str}:
                return self._text(column, values, rows)
        elif types <= {int, float}:
            if column.kind == "count" and types <= {int} and _in_int64(values):
                return pa.array(values, pa.int64())
            if types <= {float}:
                return pa.array(values, pa.float64())
            # an integer past a double's range is infinite: the checks name it
            return pa.array([None if v is None else _as_float(v) for v in values], pa.float64())
        if column.kind == "id" and types <= {int, float, str}:
            values = [int(v) if type(v) is float and v.is_integer() else v for v in values]
            whole = set(map(type, values)) - {type(None)} <= {int}  # 2.0 is the integer 2
            if whole and _in_int64(values):
                return pa.array(values, pa.int64())
        raise self._type_fault(column, values, rows)

    def _text(self, column: Column, values: list[Any], rows: list[dict[str, Any]]) -> pa.Array[Any]:
        """Text as Arrow holds it, UTF-8 (JSON's escapes can write a lone surrogate, \\ud800),
        and in a `no_nul` column without a NUL character (core/render.lit refuses one); else
        the row at fault is named."""
        try:
            array = pa.array(values, pa.string())
        except (UnicodeEncodeError, pa.ArrowException):
            self._text_fault(column, values, rows)
            raise
        if column.name in self.no_nul and "\x00" in "".join(v for v in values if v is not None):
            self._text_fault(column, values, rows)
        return array

    def _text_fault(self, column: Column, values: list[Any], rows: list[dict[str, Any]]) -> None:
        for index, value in enumerate(values):
            if value is None:
                continue
            if not _utf8(value):
                problem = f"is not Unicode text (a lone surrogate): {_shown(value)}"
            elif column.name in self.no_nul and "\x00" in value:
                problem = (
                    "holds a NUL character, which a source name cannot (it is written into the SQL)"
                )
            else:
                continue
            raise self._fault(rows, index, f"column {column.name!r} {problem}")

    def _type_fault(
        self, column: Column, values: list[Any], rows: list[dict[str, Any]]
    ) -> InputError:
        first: tuple[int, str] | None = None  # an id column's first row and its JSON type
        for index, value in enumerate(values):
            if value is None:
                continue
            kind = _json_type(value)
            if kind not in _ACCEPTED[column.kind]:
                return self._fault(
                    rows, index, f"column {column.name!r} is {_A[kind]}, not "
                    f"{_WANTED[column.kind]}: {_shown(value)}"
                )  # fmt: skip
            if column.kind != "id":
                continue
            if first is not None and kind != first[1]:
                return self._fault(
                    rows, index, f"column {column.name!r} is {_A[kind]}, where row "
                    f"{first[0] + 1}'s is {_A[first[1]]}: give every row's {column.name} as "
                    "text, or every row's as an integer"
                )  # fmt: skip
            first = first or (index, kind)
            if kind == "integer" and not INT64_MIN <= int(value) <= INT64_MAX:
                return self._fault(
                    rows, index, f"column {column.name!r} is an integer outside the 64-bit "
                    f"range: {_shown(value)}"
                )  # fmt: skip
        raise AssertionError(f"no fault in column {column.name!r}")  # pragma: no cover

    def _fault(self, rows: list[dict[str, Any]], index: int, problem: str) -> InputError:
        return InputError(f"{self.name} ({row_label(self.contract, rows, index)}): {problem}")


def hits_table(recipe: Recipe) -> RequestTable:
    """POST /v1/score's hits: the retrieval log, as `open_log` reads it with `recipe` — a score
    or a rank column, query_text when the recipe's query analyzer reads it, and a row of every
    source the recipe declares (recipe.plan refuses a log without one)."""
    return RequestTable(
        "hits",
        RETRIEVAL_LOG,
        one_of_columns=("score", "rank"),
        columns_given=("query_text",) if recipe.query_analyzer.enabled else (),
        values_given=tuple(("source", name) for name in sorted(recipe.sources)),
        no_nul=("source",),  # the plan writes each source's name into the SQL
        description="The hits of one query or many: the retrieval log's rows (docs/fuse.md).",
    )


def answer_tables(answer_policy: AnswerPolicy) -> dict[str, RequestTable]:
    """POST /v1/answers' tables, as `open_answer_inputs` checks them: the chunks' rerank_score
    within the answer policy's score_range."""
    low, high = answer_policy.score_range
    ranged = dataclasses.replace(CHUNKS.column("rerank_score"), min=low, max=high)
    return {
        "answers": RequestTable("answers", ANSWERS, description="The logged answers."),
        "citations": RequestTable("citations", CITATIONS, description="Each answer's citations."),
        "chunks": RequestTable(
            "chunks", contract_with(CHUNKS, [ranged]), description="Each answer's reranked chunks."
        ),
        "events": RequestTable(
            "events", EVENTS, description="Streaming contradiction events (optional)."
        ),
    }


def row_label(contract: TableContract, rows: list[dict[str, Any]], index: int) -> str:
    """'row N, key=…' of a request's row, as the contract checks name a row (from 1)."""
    parts = [f"row {index + 1}"]
    for key in contract.key:
        value = rows[index].get(key)
        parts.append(f"{key}=" + ("NULL" if value is None else f"'{_key_text(value)}'"))
    return ", ".join(parts)


def column_schema(column: Column) -> dict[str, Any]:
    """The JSON Schema of one column's values, from its contract definition."""
    schema: dict[str, Any]
    if column.kind == "id":
        schema = {
            "type": ["string", "integer"],
            "minLength": 1,
            "minimum": INT64_MIN,
            "maximum": INT64_MAX,
            "description": "An id: text (not empty) or an integer, of one type in every row.",
        }
    elif column.kind in ("text", "time"):
        schema = {"type": "string"}
        if column.choices:
            schema["enum"] = list(column.choices)
        if column.max_length is not None:
            schema["maxLength"] = column.max_length
        if column.kind == "time":
            schema["description"] = "A timestamp, as text."
    else:
        low = -MAX_COUNT if column.kind == "count" else None
        high = MAX_COUNT if column.kind == "count" else None
        schema = {"type": "integer" if column.kind == "count" else "number"}
        bounds = {
            "minimum": _tighter(max, column.min, low),
            "maximum": _tighter(min, column.max, high),
        }
        schema.update({key: _plain(v) for key, v in bounds.items() if v is not None})
    if column.nullable and "enum" in schema:  # a nullable enum: the form generators read
        return {"anyOf": [schema, {"type": "null"}]}
    if column.nullable:
        schema["type"] = _with_null(column, schema["type"])
    return schema


def contract_with(contract: TableContract, columns: Iterable[Column]) -> TableContract:
    """`contract` with the columns of the same names replaced by `columns`."""
    by_name = {column.name: column for column in columns}
    return dataclasses.replace(
        contract, columns=tuple(by_name.get(c.name, c) for c in contract.columns)
    )


_ACCEPTED = {
    "id": ("string", "integer"),
    "text": ("string",),
    "time": ("string",),
    "number": ("integer", "number"),
    "count": ("integer", "number"),
}
_A = {
    "string": "text",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "a list",
}


def json_type(value: Any) -> str:
    """A decoded JSON value's type, as a message names it: text, an integer, a list, …"""
    return "null" if value is None else _A[_json_type(value)]


def _any_case(names: Iterable[str]) -> str:
    """A pattern of `names` in any case: score is [sS][cC][oO][rR][eE]."""

    def letters(name: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in name)

    return "^(" + "|".join(letters(name) for name in names) + ")$"


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value; a whole float (2.0) is an integer, as JSON Schema says."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def _in_int64(values: list[Any]) -> bool:
    given = [v for v in values if v is not None]
    return not given or (min(given) >= INT64_MIN and max(given) <= INT64_MAX)


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer past a double's range: the checks name it
        return math.copysign(math.inf, value)


def _with_null(column: Column, types: str | list[str]) -> str | list[str]:
    if not column.nullable:
        return types
    return [*(types if isinstance(types, list) else [types]), "null"]


def _some_row(required: list[str], **properties: Any) -> dict[str, Any]:
    some: dict[str, Any] = {"required": required}
    if properties:
        some["properties"] = properties
    return {"contains": some}


def _every_row(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"items": {"properties": {name: schema}}}


def _tighter(pick: Any, *bounds: float | None) -> float | None:
    given = [b for b in bounds if b is not None]
    return pick(given) if given else None


def _plain(bound: float) -> int | float:
    """A bound as JSON writes it best: 1 and 2^53 as integers, 1e100 as a number."""
    return int(bound) if float(bound).is_integer() and abs(bound) <= MAX_COUNT else bound


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _key_text(value: Any) -> str:
    return value if isinstance(value, str) and _utf8(value) else _shown(value).strip('"')


def _shown(value: Any) -> str:
    """A value as JSON, at most 40 characters; a lone surrogate escaped (a message is UTF-8)."""
    text = json.dumps(value, ensure_ascii=False)
    text = text if _utf8(text) else json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
