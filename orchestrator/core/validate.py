"""The checks of an input against its table contract: columns present and of their kind, and
every row's values (NULL, empty ids, NaN/inf, whole numbers, ranges, allowed values, unique keys),
each failure one InputError naming the input, file, row, key and column. Rows are labelled only
when a check fails: one pass of counts first, since a label costs a string per row."""

from __future__ import annotations

import duckdb

from .connection import first_line, first_row
from .errors import InputError
from .render import ident, lit
from .tables import Kind, OpenedInput, TableContract, nan_as_null_sql

FILE_COLUMN = "__duckscore_file"  # the raw views' file name and row number, for error messages
ROW_COLUMN = "__duckscore_row"
MAX_COUNT = 2**53  # a count above it is no whole number a double holds exactly
MAX_COUNT_SHOWN = "2^53"  # how messages write MAX_COUNT
_NUMERIC_TYPES = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL",
)
_INTEGER_TYPES = _NUMERIC_TYPES[:10]


def check_columns(
    contract: TableContract, actual: dict[str, str], label: str, given: str
) -> dict[str, str]:
    """Map contract column -> actual column name (matched without regard to case), checking
    that every required column is present."""
    by_lower = {name.lower(): name for name in actual}
    names: dict[str, str] = {}
    for column in contract.columns:
        found = by_lower.get(column.name.lower())
        if found is None:
            if column.required:
                have = ", ".join(actual) or "none"
                raise InputError(
                    f"{label} ({given}): missing column {column.name!r} (columns: {have})"
                )
            continue
        names[column.name] = found
    return names


_WANTED = {
    "id": "text or an integer",
    "text": "text",
    "number": "a number",
    "count": "a whole number",
    "time": "a timestamp or text",
    "flag": "true/false (or 1/0)",
}


def check_types(
    con: duckdb.DuckDBPyConnection,
    contract: TableContract,
    raw: str,
    names: dict[str, str],
    actual: dict[str, str],
    label: str,
    given: str,
) -> None:
    """Every present column is of its kind. A number read as text names the first row whose
    value is not a number (a CSV reader types a column as text for one such value)."""
    for column in contract.columns:
        if column.name not in names:
            continue
        dtype = actual[names[column.name]]
        if _type_fits(column.kind, dtype):
            continue
        problem = f"column {column.name!r} has type {dtype}; expected {_WANTED[column.kind]}"
        if column.kind in ("number", "count") and _base_type(dtype) == "VARCHAR":
            col = ident(names[column.name])
            where = _first_row_where(
                con,
                raw,
                row_label_sql(contract, names),
                f"{col} IS NOT NULL AND TRY_CAST({col} AS DOUBLE) IS NULL",
                col,
            )
            if where is not None:
                raise InputError(
                    f"{label} ({where}): column {column.name!r} is text, not {_WANTED[column.kind]}"
                )
            problem += " (numbers written as text)"
        raise InputError(f"{label} ({given}): {problem}")


def _base_type(dtype: str) -> str:
    return dtype.split("(", maxsplit=1)[0].upper().strip('"')


def _type_fits(kind: Kind, dtype: str) -> bool:
    base = _base_type(dtype)
    if base == "NULL":  # an all-NULL column (e.g. written by pandas): the value checks decide
        return True
    if kind == "id":
        return base in ("VARCHAR", "UUID") or base in _INTEGER_TYPES
    if kind == "text":
        return base == "VARCHAR"
    if kind == "time":
        return base == "VARCHAR" or base.startswith(("TIMESTAMP", "DATE"))
    if kind == "flag":
        return base in ("BOOLEAN", "VARCHAR") or base in _INTEGER_TYPES
    return base in _NUMERIC_TYPES


def check_values(
    con: duckdb.DuckDBPyConnection,
    contract: TableContract,
    raw: str,
    names: dict[str, str],
    label: str,
    given: str,
) -> int:
    # One pass of counts; rows are labelled only when a check fails (labels cost a string per row).
    checks = _value_checks(contract, names)
    counts = ", ".join(
        ["count(*)"] + [f"count(*) FILTER (WHERE {condition})" for _, condition, _ in checks]
    )
    try:
        result = first_row(con, f"SELECT {counts} FROM {ident(raw)}")
    except duckdb.Error as exc:
        raise InputError(f"{label}: cannot read {given}: {first_line(exc)}") from None
    assert result is not None
    total = int(result[0])
    if total == 0 and not contract.allow_empty:
        raise InputError(f"{label} ({given}): no rows")
    row_label = row_label_sql(contract, names)
    for (problem, condition, shown_value), failing in zip(checks, result[1:]):
        if failing:
            where = _first_row_where(con, raw, row_label, condition, shown_value)
            assert where is not None
            also = f" ({failing} rows in all)" if failing > 1 else ""
            raise InputError(f"{label} ({where}): {problem}{also}")
    if contract.key:
        _check_unique_key(con, contract, raw, names, row_label, label)
    return total


def raw_view(contract: TableContract) -> str:
    """The view of an input's columns as given (plus file and row), under its typed view."""
    return f"__raw_{contract.name}"


def fault_probe(contract: TableContract, names: dict[str, str], raw: str) -> str:
    """One query whose one value is true when `raw` breaks a rule check_values enforces: no
    rows, a value rule, a repeated key (or, rarely, two keys of one hash). It says nothing of
    what or where: a caller that finds it true runs check_values for the message."""
    broken = [] if contract.allow_empty else ["count(*) = 0"]
    conditions = [condition for _, condition, _ in _value_checks(contract, names)]
    if conditions:
        either = " OR ".join(f"({condition})" for condition in conditions)
        broken.append(f"count(*) FILTER (WHERE {either}) > 0")
    if contract.key:
        keys = ", ".join(ident(names[k]) for k in contract.key)
        broken.append(f"count(DISTINCT hash({keys})) <> count(*)")
    return f"SELECT {' OR '.join(broken) or 'FALSE'} FROM {ident(raw)}"


def _value_checks(
    contract: TableContract, names: dict[str, str]
) -> list[tuple[str, str, str | None]]:
    """(problem, failing condition, value to show) for every column rule of the contract."""
    checks: list[tuple[str, str, str | None]] = []
    for column in contract.columns:
        if column.name not in names:
            continue
        col = ident(names[column.name])
        number = f"CAST({col} AS DOUBLE)"
        if not column.nullable:
            checks.append((f"column {column.name!r} is null", f"{col} IS NULL", None))
        if column.kind == "id":
            checks.append(
                (f"column {column.name!r} is empty", f"CAST({col} AS VARCHAR) = ''", None)
            )
            continue
        if column.kind == "time":
            checks.append(
                (
                    f"column {column.name!r} is not a timestamp",
                    f"TRY_CAST({col} AS TIMESTAMP) IS NULL",
                    col,
                )
            )
            continue
        if column.kind == "flag":  # BOOLEAN, an integer or text (a CSV's "True", "0" …)
            checks.append(
                (
                    f"column {column.name!r} is not true/false (or 1/0)",
                    f"lower(CAST({col} AS VARCHAR)) NOT IN ('true', 'false', '1', '0')",
                    col,
                )
            )
            continue
        if column.kind == "text":
            if column.choices:
                checks.append(
                    (
                        f"column {column.name!r} is not one of {', '.join(column.choices)}",
                        f"{col} NOT IN ({', '.join(lit(c) for c in column.choices)})",
                        col,
                    )
                )
            if column.max_length is not None:
                checks.append(
                    (
                        f"column {column.name!r} is longer than {column.max_length} characters",
                        f"length({col}) > {lit(column.max_length)}",
                        col,
                    )
                )
            continue
        if column.nan_as_null:  # NaN is NULL here; DuckDB orders NaN above every number
            checks.append((f"column {column.name!r} is infinite", f"isinf({number})", col))
            number = nan_as_null_sql(number)
        else:
            checks.append(
                (f"column {column.name!r} is NaN or infinite", f"NOT isfinite({number})", col)
            )
        if column.kind == "count":
            checks.append(
                (
                    f"column {column.name!r} is not a whole number",
                    f"{number} <> round({number})",
                    col,
                )
            )
            checks.append(
                (
                    f"column {column.name!r} is too large (above {MAX_COUNT_SHOWN})",
                    f"abs({number}) > {lit(float(MAX_COUNT))}",
                    col,
                )
            )
        if column.min is not None:
            checks.append(
                (
                    f"column {column.name!r} is below {column.min:g}",
                    f"{number} < {lit(float(column.min))}",
                    col,
                )
            )
        if column.max is not None:
            checks.append(
                (
                    f"column {column.name!r} is above {column.max:g}",
                    f"{number} > {lit(float(column.max))}",
                    col,
                )
            )
    return checks


def _first_row_where(
    con: duckdb.DuckDBPyConnection, raw: str, row_label: str, condition: str, value: str | None
) -> str | None:
    """'file, row N, key=…[, value V]' of the first row (in file order) where `condition` holds."""
    shown = row_label if value is None else f"{row_label} || ', value ' || CAST({value} AS VARCHAR)"
    where = first_row(
        con,
        f"SELECT {shown} FROM {ident(raw)} WHERE {condition} "
        f"ORDER BY {FILE_COLUMN}, {ROW_COLUMN} LIMIT 1",
    )
    return None if where is None else str(where[0])


def row_label_sql(contract: TableContract, names: dict[str, str]) -> str:
    """SQL for 'file, row N, key=value…' naming one row."""
    parts = [f"{FILE_COLUMN}", f"', row ' || {ROW_COLUMN}"]
    for key in contract.key:
        if key in names:
            parts.append(
                f"', {key}=' || coalesce('''' || CAST({ident(names[key])} AS VARCHAR) || '''', 'NULL')"
            )
    return " || ".join(parts)


def _check_unique_key(
    con: duckdb.DuckDBPyConnection,
    contract: TableContract,
    raw: str,
    names: dict[str, str],
    row_label: str,
    label: str,
) -> None:
    keys = ", ".join(ident(names[k]) for k in contract.key)
    # Grouping by one 64-bit hash of the key is twice as fast as grouping by the key's strings;
    # a repeated hash (a duplicate, or rarely a collision) is then confirmed on the key itself.
    repeated_hash = first_row(
        con,
        f"SELECT key_hash FROM (SELECT hash({keys}) AS key_hash FROM {ident(raw)}) "
        "GROUP BY key_hash HAVING count(*) > 1 LIMIT 1",
    )
    if repeated_hash is None:
        return
    duplicate = first_row(
        con,
        f"SELECT list({row_label} ORDER BY {FILE_COLUMN}, {ROW_COLUMN})[1:2], count(*) AS n "
        f"FROM {ident(raw)} GROUP BY {keys} HAVING count(*) > 1 "
        f"ORDER BY {keys} LIMIT 1",
    )
    if duplicate is not None:
        first, second = duplicate[0]
        raise InputError(
            f"{label} ({second}): duplicate ({', '.join(contract.key)}), first seen at {first}"
        )


def check_references(
    con: duckdb.DuckDBPyConnection,
    child: OpenedInput,
    column: str,
    parent: OpenedInput,
    parent_column: str,
) -> None:
    """Every value of `column` in `child` is a `parent_column` of `parent`: else one error
    naming the child's file, row and key."""
    value = typed_column(child, column)
    check_rows(
        con,
        child,
        f"{value} NOT IN (SELECT {ident(parent_column)} FROM {ident(parent.contract.name)})",
        f"{column} {{value}} is not in {parent.label}",
        shown=value,
    )


def typed_column(opened: OpenedInput, name: str) -> str:
    """SQL for contract column `name` of `opened`'s raw rows (alias `child`), cast to the contract type."""
    column = opened.contract.column(name)
    if name not in opened.columns:
        return f"CAST(NULL AS {column.sql_type})"
    return f"CAST(child.{ident(opened.columns[name])} AS {column.sql_type})"


def check_rows(
    con: duckdb.DuckDBPyConnection,
    opened: OpenedInput,
    failing: str,
    problem: str,
    shown: str | None = None,
) -> None:
    """Raise one error naming the first row (file, row, key) of `opened` where the SQL condition
    `failing` (over its raw columns, see typed_column) holds; `{value}` in `problem` becomes the
    value of `shown` in that row."""
    raw = f"{ident(raw_view(opened.contract))} AS child"
    row = first_row(con, f"SELECT count(*) FROM {raw} WHERE {failing}")
    if not row or not row[0]:
        return
    value = f"CAST({shown} AS VARCHAR)" if shown else "NULL"
    where = first_row(
        con,
        f"SELECT {row_label_sql(opened.contract, opened.columns)}, {value} FROM {raw} "
        f"WHERE {failing} ORDER BY {FILE_COLUMN}, {ROW_COLUMN} LIMIT 1",
    )
    assert where is not None
    also = f" ({row[0]:,} rows in all)" if row[0] > 1 else ""
    message = problem.replace("{value}", repr(where[1]))
    raise InputError(f"{opened.label} ({where[0]}): {message}{also}")
