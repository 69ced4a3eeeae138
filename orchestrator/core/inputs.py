"""Input tables: resolve files, check them against a table contract, expose them as typed views.

The scoring SQL reads plain table names; this module creates those views over the user's
Parquet, CSV or JSON files (a file, a glob, or a folder, hive-partitioned or not). Every contract
violation is one error that names the input, the file, the row (Parquet row number, or data row of
a CSV/JSON file), the key of that row and the column.
"""

from __future__ import annotations

import glob
import hashlib
import os
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from .connection import first_line, first_row
from .errors import InputError
from .render import ident, lit
from .tables import InputFile, Kind, OpenedInput, TableContract

Table = str | Path | pd.DataFrame  # what an input may be given as: a path, glob or folder, or a frame
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv",
           ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_FILE_COLUMN = "__duckscore_file"
_ROW_COLUMN = "__duckscore_row"
_NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                  "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL")
_INTEGER_TYPES = _NUMERIC_TYPES[:10]


def open_input(con: duckdb.DuckDBPyConnection, contract: TableContract,
               given: Table, label: str | None = None) -> OpenedInput:
    """Create the typed view `contract.name` over `given` (path, glob, folder or DataFrame),
    after checking the whole contract."""
    if not isinstance(given, pd.DataFrame):
        given = str(given)
    label = label or contract.name
    raw = f"__raw_{contract.name}"
    if isinstance(given, pd.DataFrame):
        shown, fmt, files = "<DataFrame>", "dataframe", (_frame_fingerprint(given),)
        _create_frame_view(con, raw, given)
    else:
        paths, hive = resolve_files(given, label)
        shown, fmt = given, _format_of(paths, label)
        _create_raw_view(con, raw, paths, fmt, hive, label, given)
        files = tuple(fingerprint(f) for f in paths)
    if not isinstance(given, pd.DataFrame) and all(f.bytes == 0 for f in files):
        raise InputError(f"{label} ({shown}): empty file, no rows")
    actual = _actual_columns(con, raw)
    try:
        names = _check_columns(contract, actual, label, shown)
    except InputError:
        if _row_count(con, raw) != 0:
            raise
        if not contract.allow_empty:
            raise InputError(f"{label} ({shown}): no rows") from None
        # a header-only CSV types every column as text: with no rows, only presence matters
        names = _check_columns(contract, actual, label, shown, check_types=False)
    rows = _check_values(con, contract, raw, names, label, shown)
    _create_typed_view(con, contract, raw, names)
    return OpenedInput(contract, label, shown, fmt, files, rows, names)


def resolve_files(given: str, label: str) -> tuple[list[str], bool]:
    """The sorted data files behind a path, glob or folder, and whether they are hive-partitioned."""
    if os.path.isdir(given):
        files = sorted(
            str(p) for p in Path(given).rglob("*")
            if p.is_file() and p.suffix.lower() in FORMATS and not p.name.startswith((".", "_"))
        )
        if not files:
            raise InputError(f"{label}: folder {given} holds no .parquet, .csv or .json files")
    elif glob.has_magic(given):
        files = sorted(f for f in glob.glob(given, recursive=True) if os.path.isfile(f))
        if not files:
            raise InputError(f"{label}: no files match {given}")
    elif os.path.isfile(given):
        files = [given]
    else:
        raise InputError(f"{label}: no such file: {given}")
    root = given if os.path.isdir(given) else _glob_root(given) if glob.has_magic(given) else None
    hive = root is not None and any(
        "=" in part for f in files for part in Path(os.path.relpath(f, root)).parent.parts)
    return files, hive


def _glob_root(pattern: str) -> str:
    """The folder part of a glob before its first wildcard."""
    parts = Path(pattern).parts
    fixed = [p for p in parts[: next(i for i, p in enumerate(parts) if glob.has_magic(p))]]
    return str(Path(*fixed)) if fixed else "."


def fingerprint(path: str) -> InputFile:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return InputFile(path=os.path.abspath(path), bytes=os.path.getsize(path), sha256=digest.hexdigest())


def _frame_fingerprint(frame: pd.DataFrame) -> InputFile:
    """sha256 of the frame's Arrow IPC serialisation (works for nested columns too)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    payload = sink.getvalue()
    return InputFile(path="<DataFrame>", bytes=payload.size,
                     sha256=hashlib.sha256(payload.to_pybytes()).hexdigest())


def _create_frame_view(con: duckdb.DuckDBPyConnection, raw: str, frame: pd.DataFrame) -> None:
    # A contiguous copy: DuckDB cannot scan some pandas views (e.g. negative strides).
    con.register(f"{raw}_frame", frame.reset_index(drop=True).copy())
    con.execute(f"CREATE OR REPLACE TEMP VIEW {ident(raw)} AS SELECT *, "
                f"{lit('<DataFrame>')} AS {_FILE_COLUMN}, row_number() OVER () AS {_ROW_COLUMN} "
                f"FROM {ident(raw + '_frame')}")


def _format_of(files: list[str], label: str) -> str:
    formats = {FORMATS.get(Path(f).suffix.lower()) for f in files}
    if None in formats:
        odd = next(f for f in files if Path(f).suffix.lower() not in FORMATS)
        raise InputError(f"{label}: {odd}: unknown file type (use .parquet, .csv, .tsv, .json or .jsonl)")
    if len(formats) > 1:
        raise InputError(f"{label}: mixes file types ({', '.join(sorted(f for f in formats if f))})")
    return formats.pop()  # type: ignore[return-value]


def _create_raw_view(con: duckdb.DuckDBPyConnection, raw: str, files: list[str], fmt: str,
                     hive: bool, label: str, given: str) -> None:
    reader = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}[fmt]
    options = [f"filename = {lit(_FILE_COLUMN)}", "union_by_name = true",
               f"hive_partitioning = {lit(hive)}"]
    if fmt == "parquet":
        options.append("file_row_number = true")
    scan = f"{reader}({lit(files)}, {', '.join(options)})"
    try:
        if fmt == "parquet":
            view = f"SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS {_ROW_COLUMN} FROM {scan}"
        else:
            # CSV/JSON readers have no file_row_number; loaded into a table, rowid keeps file order.
            loaded = ident(raw + "_loaded")
            con.execute(f"CREATE OR REPLACE TEMP TABLE {loaded} AS SELECT * FROM {scan}")
            view = (f"SELECT * EXCLUDE (__rowid), __rowid - min(__rowid) OVER "
                    f"(PARTITION BY {_FILE_COLUMN}) + 1 AS {_ROW_COLUMN} "
                    f"FROM (SELECT *, rowid AS __rowid FROM {loaded})")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {ident(raw)} AS {view}")
        con.execute(f"SELECT * FROM {ident(raw)} LIMIT 0")
    except duckdb.Error as exc:
        raise InputError(f"{label}: cannot read {given}: {first_line(exc)}") from None


def _row_count(con: duckdb.DuckDBPyConnection, raw: str) -> int:
    row = first_row(con, f"SELECT count(*) FROM {ident(raw)}")
    return int(row[0]) if row else 0


def _actual_columns(con: duckdb.DuckDBPyConnection, raw: str) -> dict[str, str]:
    described = con.execute(f"DESCRIBE {ident(raw)}").fetchall()
    return {name: str(dtype) for name, dtype, *_ in described
            if name not in (_FILE_COLUMN, _ROW_COLUMN)}


def _check_columns(contract: TableContract, actual: dict[str, str], label: str,
                   given: str, check_types: bool = True) -> dict[str, str]:
    """Map contract column -> actual column name, checking presence and type."""
    by_lower = {name.lower(): name for name in actual}
    names: dict[str, str] = {}
    for column in contract.columns:
        found = by_lower.get(column.name.lower())
        if found is None:
            if column.required:
                have = ", ".join(actual) or "none"
                raise InputError(f"{label} ({given}): missing column {column.name!r} (columns: {have})")
            continue
        dtype = actual[found]
        if check_types and not _type_fits(column.kind, dtype):
            want = {"id": "text or an integer", "text": "text", "number": "a number",
                    "count": "a whole number", "time": "a timestamp or text"}[column.kind]
            raise InputError(f"{label} ({given}): column {column.name!r} has type {dtype}; expected {want}")
        names[column.name] = found
    return names


def _type_fits(kind: Kind, dtype: str) -> bool:
    base = dtype.split("(")[0].upper().strip('"')
    if base == "NULL":  # an all-NULL column (e.g. written by pandas): the value checks decide
        return True
    if kind == "id":
        return base in ("VARCHAR", "UUID") or base in _INTEGER_TYPES
    if kind == "text":
        return base == "VARCHAR"
    if kind == "time":
        return base == "VARCHAR" or base.startswith(("TIMESTAMP", "DATE"))
    return base in _NUMERIC_TYPES


def _check_values(con: duckdb.DuckDBPyConnection, contract: TableContract, raw: str,
                  names: dict[str, str], label: str, given: str) -> int:
    # One pass of counts; rows are labelled only when a check fails (labels cost a string per row).
    checks = _value_checks(contract, names)
    counts = ", ".join(["count(*)"] + [f"count(*) FILTER (WHERE {condition})" for _, condition, _ in checks])
    try:
        result = first_row(con, f"SELECT {counts} FROM {ident(raw)}")
    except duckdb.Error as exc:
        raise InputError(f"{label}: cannot read {given}: {first_line(exc)}") from None
    assert result is not None
    total = int(result[0])
    if total == 0 and not contract.allow_empty:
        raise InputError(f"{label} ({given}): no rows")
    row_label = _row_label_sql(contract, names)
    for (problem, condition, shown_value), failing in zip(checks, result[1:]):
        if failing:
            shown = row_label if shown_value is None else f"{row_label} || ', value ' || CAST({shown_value} AS VARCHAR)"
            where = first_row(con, f"SELECT {shown} FROM {ident(raw)} WHERE {condition} "
                                   f"ORDER BY {_FILE_COLUMN}, {_ROW_COLUMN} LIMIT 1")
            assert where is not None
            also = f" ({failing} rows in all)" if failing > 1 else ""
            raise InputError(f"{label} ({where[0]}): {problem}{also}")
    if contract.key:
        _check_unique_key(con, contract, raw, names, row_label, label)
    return total


def _value_checks(contract: TableContract, names: dict[str, str]) -> list[tuple[str, str, str | None]]:
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
            checks.append((f"column {column.name!r} is empty", f"CAST({col} AS VARCHAR) = ''", None))
            continue
        if column.kind == "time":
            checks.append((f"column {column.name!r} is not a timestamp",
                           f"TRY_CAST({col} AS TIMESTAMP) IS NULL", col))
            continue
        if column.kind == "text":
            if column.choices:
                checks.append((f"column {column.name!r} is not one of {', '.join(column.choices)}",
                               f"{col} NOT IN ({', '.join(lit(c) for c in column.choices)})", col))
            continue
        checks.append((f"column {column.name!r} is NaN or infinite", f"NOT isfinite({number})", col))
        if column.kind == "count":
            checks.append((f"column {column.name!r} is not a whole number",
                           f"{number} <> round({number})", col))
            checks.append((f"column {column.name!r} is too large (above 2^53)",
                           f"abs({number}) > {lit(float(2 ** 53))}", col))
        if column.min is not None:
            checks.append((f"column {column.name!r} is below {column.min:g}",
                           f"{number} < {lit(float(column.min))}", col))
        if column.max is not None:
            checks.append((f"column {column.name!r} is above {column.max:g}",
                           f"{number} > {lit(float(column.max))}", col))
    return checks


def _row_label_sql(contract: TableContract, names: dict[str, str]) -> str:
    """SQL for 'file, row N, key=value…' naming one row."""
    parts = [f"{_FILE_COLUMN}", f"', row ' || {_ROW_COLUMN}"]
    for key in contract.key:
        if key in names:
            parts.append(f"', {key}=' || coalesce('''' || CAST({ident(names[key])} AS VARCHAR) || '''', 'NULL')")
    return " || ".join(parts)


def _check_unique_key(con: duckdb.DuckDBPyConnection, contract: TableContract, raw: str,
                      names: dict[str, str], row_label: str, label: str) -> None:
    keys = ", ".join(ident(names[k]) for k in contract.key)
    # Grouping by one 64-bit hash of the key is twice as fast as grouping by the key's strings;
    # a repeated hash (a duplicate, or rarely a collision) is then confirmed on the key itself.
    repeated_hash = first_row(con, f"SELECT key_hash FROM (SELECT hash({keys}) AS key_hash FROM {ident(raw)}) "
                                   "GROUP BY key_hash HAVING count(*) > 1 LIMIT 1")
    if repeated_hash is None:
        return
    duplicate = first_row(
        con,
        f"SELECT list({row_label} ORDER BY {_FILE_COLUMN}, {_ROW_COLUMN})[1:2], count(*) AS n "
        f"FROM {ident(raw)} GROUP BY {keys} HAVING count(*) > 1 "
        f"ORDER BY {keys} LIMIT 1"
    )
    if duplicate is not None:
        first, second = duplicate[0]
        raise InputError(f"{label} ({second}): duplicate ({', '.join(contract.key)}), "
                         f"first seen at {first}")


def check_references(con: duckdb.DuckDBPyConnection, child: OpenedInput, column: str,
                     parent: OpenedInput, parent_column: str) -> None:
    """Every value of `column` in `child` is a `parent_column` of `parent`: else one error
    naming the child's file, row and key."""
    value = typed_column(child, column)
    check_rows(con, child, f"{value} NOT IN (SELECT {ident(parent_column)} FROM {ident(parent.contract.name)})",
               f"{column} {{value}} is not in {parent.label}", shown=value)


def typed_column(opened: OpenedInput, name: str) -> str:
    """SQL for contract column `name` of `opened`'s raw rows (alias `child`), cast to the contract type."""
    column = opened.contract.column(name)
    if name not in opened.columns:
        return f"CAST(NULL AS {column.sql_type})"
    return f"CAST(child.{ident(opened.columns[name])} AS {column.sql_type})"


def check_rows(con: duckdb.DuckDBPyConnection, opened: OpenedInput, failing: str, problem: str,
               shown: str | None = None) -> None:
    """Raise one error naming the first row (file, row, key) of `opened` where the SQL condition
    `failing` (over its raw columns, see typed_column) holds; `{value}` in `problem` becomes the
    value of `shown` in that row."""
    raw = f"{ident('__raw_' + opened.contract.name)} AS child"
    row = first_row(con, f"SELECT count(*) FROM {raw} WHERE {failing}")
    if not row or not row[0]:
        return
    value = f"CAST({shown} AS VARCHAR)" if shown else "NULL"
    where = first_row(con, f"SELECT {_row_label_sql(opened.contract, opened.columns)}, {value} FROM {raw} "
                           f"WHERE {failing} ORDER BY {_FILE_COLUMN}, {_ROW_COLUMN} LIMIT 1")
    assert where is not None
    also = f" ({row[0]:,} rows in all)" if row[0] > 1 else ""
    message = problem.replace("{value}", repr(where[1]))
    raise InputError(f"{opened.label} ({where[0]}): {message}{also}")


def create_empty_view(con: duckdb.DuckDBPyConnection, contract: TableContract) -> None:
    """The typed view of an optional table that was not given: its columns, no rows."""
    columns = ", ".join(f"CAST(NULL AS {c.sql_type}) AS {ident(c.name)}" for c in contract.columns)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {ident(contract.name)} AS SELECT {columns} WHERE FALSE")


def _create_typed_view(con: duckdb.DuckDBPyConnection, contract: TableContract, raw: str,
                       names: dict[str, str]) -> None:
    projections = []
    for column in contract.columns:
        if column.name in names:
            source = f"CAST({ident(names[column.name])} AS {column.sql_type})"
        else:
            source = f"CAST(NULL AS {column.sql_type})"
        projections.append(f"{source} AS {ident(column.name)}")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {ident(contract.name)} AS "
                f"SELECT {', '.join(projections)} FROM {ident(raw)}")


def schema_of(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """Column -> type of a table or view, for sqlglot's qualify."""
    described = con.execute(f"DESCRIBE {ident(table)}").fetchall()
    return {name: str(dtype) for name, dtype, *_ in described}
