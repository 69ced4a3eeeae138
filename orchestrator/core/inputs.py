"""Input tables: resolve files, check them against a table contract, expose them as typed views.

The scoring SQL reads plain table names; this module creates those views over the user's
Parquet, CSV or JSON files (a file, a glob, or a folder, hive-partitioned or not) or DataFrames,
after core/validate.py has checked them: every contract violation is one error that names the
input, the file, the row (Parquet row number, or data row of a CSV/JSON file), the key of that
row and the column.
"""

from __future__ import annotations

import codecs
import glob
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import duckdb

from . import cache
from .connection import first_line, first_row, make_room
from .errors import InputError
from .render import ident, lit
from .tables import InputFile, OpenedInput, TableContract, nan_as_null_sql
from .validate import (
    FILE_COLUMN,
    ROW_COLUMN,
    check_columns,
    check_types,
    check_values,
    raw_view,
)

if TYPE_CHECKING:
    import pandas as pd

# What an input may be given as: a path, glob or folder, or an object DuckDB scans where it lies
# (a pandas or Polars DataFrame, an Arrow table, dataset or record batch reader, a DuckDB relation
# of the same connection). Nothing here imports pandas or Arrow: the command line never passes
# an object, and importing pandas costs ~0.5 s a run.
Table = Union[str, Path, "pd.DataFrame", Any]
FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
TEXT = "VARCHAR"


@dataclass(frozen=True)
class FileSet:
    """Chosen files of a larger input (one partition of a log, say), shown as `shown`."""

    shown: str
    files: tuple[str, ...]

    def __str__(self) -> str:
        return self.shown


@dataclass(frozen=True)
class Derived:
    """A table derived in SQL from input files (a retrieval log from trace spans, say): scanned
    as `relation` of the same connection, shown and fingerprinted as the files it came from."""

    relation: duckdb.DuckDBPyRelation
    shown: str
    files: tuple[InputFile, ...]
    format: str


def open_input(
    con: duckdb.DuckDBPyConnection, contract: TableContract, given: Table, label: str | None = None
) -> OpenedInput:
    """Create the typed view `contract.name` over `given` (path, glob, folder or DataFrame),
    after checking the whole contract."""
    label = label or contract.name
    raw = raw_view(contract)
    files: tuple[InputFile, ...]
    hive_keys: set[str] = set()
    if isinstance(given, Derived):
        shown, fmt, files = given.shown, given.format, given.files
        _create_object_view(con, raw, given.relation, label, shown)
    elif is_in_memory(given):
        shown, fmt = f"<{type(given).__name__}>", "memory"
        _create_object_view(con, raw, given, label, shown)
        files = (_object_fingerprint(con, raw, given, shown),)
    else:
        shown = str(given)
        paths, hive = resolve_files(given if isinstance(given, FileSet) else shown, label)
        if hive:  # the keys of its partition folders (`day=…`)
            hive_keys = {p.split("=")[0].lower() for f in paths for p in Path(f).parts if "=" in p}
        fmt = _format_of(paths, label)
        _create_raw_view(con, raw, paths, fmt, hive, label, shown, _text_columns(contract))
        files = tuple(fingerprint(f) for f in paths)
    if fmt != "memory" and all(f.bytes == 0 for f in files):
        raise InputError(f"{label} ({shown}): empty file, no rows")
    actual = _actual_columns(con, raw)
    try:
        names = check_columns(contract, actual, label, shown)
        check_types(con, contract, raw, names, actual, label, shown)
    except InputError:
        if _row_count(con, raw) != 0:
            raise
        if not contract.allow_empty:
            raise InputError(f"{label} ({shown}): no rows") from None
        # a header-only CSV types every column as text: with no rows, only presence matters
        names = check_columns(contract, actual, label, shown)
    rows = _values_checked_once(
        con, contract, raw, names, actual, label, shown, files_key(fmt, files)
    )
    others = _other_columns(contract, actual, names, hive_keys)
    _create_typed_view(con, contract, raw, names, others)
    return OpenedInput(contract, label, shown, fmt, files, rows, names, others)


def _other_columns(
    contract: TableContract, actual: dict[str, str], names: dict[str, str], hive_keys: set[str]
) -> tuple[str, ...]:
    """The columns a contract that passes others through keeps beside its own, in file order:
    those it does not name, but the keys of hive partition folders."""
    if not contract.passes_others:
        return ()
    taken = {name.lower() for name in names.values()} | hive_keys
    return tuple(name for name in actual if name.lower() not in taken)


def files_key(fmt: str, files: tuple[InputFile, ...]) -> str | None:
    """What a check of files' rows depends on in them: their paths and sha256; None for an
    object in memory or a table derived from files, which a cache must not vouch for."""
    if fmt not in ("parquet", "csv", "json"):
        return None
    return cache.digest(fmt, json.dumps([(f.path, f.sha256) for f in files]))


@lru_cache(maxsize=1)
def _validator() -> str:
    here = Path(__file__).parent
    return cache.code_id(
        str(here / "validate.py"), str(here / "inputs.py"), str(here / "tables.py"),
        f"duckdb {duckdb.__version__}",
    )  # fmt: skip


def _values_checked_once(
    con: duckdb.DuckDBPyConnection,
    contract: TableContract,
    raw: str,
    names: dict[str, str],
    actual: dict[str, str],
    label: str,
    shown: str,
    files: str | None,
) -> int:
    """check_values, once per content: the rows of files that passed are kept in the cache
    (core/cache.py), keyed by the files (files_key), their columns, the contract and the code
    that checks; objects in memory, which can change under one name, are checked every time."""
    if files is None:
        return check_values(con, contract, raw, names, label, shown)
    key = cache.digest(
        _validator(), files, repr(contract), json.dumps(names, sort_keys=True),
        json.dumps(actual, sort_keys=True),
    )  # fmt: skip
    found = cache.read("validated", key)
    if isinstance(found, int):
        return found
    rows = check_values(con, contract, raw, names, label, shown)
    cache.write("validated", key, rows)
    return rows


def resolve_files(given: str | FileSet, label: str) -> tuple[list[str], bool]:
    """The sorted data files behind a path, glob or folder, and whether they are hive-partitioned
    (a FileSet: its own files, read without hive columns)."""
    if isinstance(given, FileSet):
        return sorted(given.files), False
    if os.path.isdir(given):
        files = sorted(
            str(p)
            for p in Path(given).rglob("*")
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
        "=" in part for f in files for part in Path(os.path.relpath(f, root)).parent.parts
    )
    return files, hive


def input_paths(opened: OpenedInput) -> list[str]:
    """What an output must stay out of: the input's files, and the folder it reads everything
    (or, for a `**` glob, every match) under."""
    if opened.format == "memory":
        return []
    given = opened.given
    if os.path.isdir(given):
        return [given]
    if glob.has_magic(given) and "**" in given:
        return [_glob_root(given)]
    return [f.path for f in opened.files]


def _glob_root(pattern: str) -> str:
    """The folder part of a glob before its first wildcard."""
    parts = Path(pattern).parts
    fixed = list(parts[: next(i for i, p in enumerate(parts) if glob.has_magic(p))])
    return str(Path(*fixed)) if fixed else "."


def fingerprint(path: str) -> InputFile:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return InputFile(
        path=os.path.abspath(path), bytes=os.path.getsize(path), sha256=digest.hexdigest()
    )


def is_in_memory(given: object) -> bool:
    """An object to scan where it lies rather than a path, glob or folder."""
    return not isinstance(given, (str, os.PathLike, FileSet))


def _create_object_view(
    con: duckdb.DuckDBPyConnection, raw: str, given: object, label: str, shown: str
) -> None:
    """The raw view over an in-memory object, scanned in place (no copy): DuckDB reads pandas,
    Polars and Arrow memory and relations of its own connection directly. Two cases are copied:
    a pandas frame DuckDB cannot scan (a view with negative strides, e.g. `frame[::-1]`), and a
    relation of another connection (read through Arrow). An ENUM column — a pandas `category`
    of text, or a DuckDB ENUM — is read as its values, VARCHAR (categories of numbers DuckDB
    already reads as the numbers), as the same frame without categories would be."""
    scanned = f"{raw}_object"
    try:
        con.register(scanned, given)
        con.execute(f"SELECT * FROM {ident(scanned)} LIMIT 1").fetchall()
    except duckdb.Error as exc:
        if is_pandas(given):
            con.register(scanned, given.copy())  # type: ignore[attr-defined]
        elif isinstance(given, duckdb.DuckDBPyRelation):
            con.register(scanned, given.to_arrow_table())
        else:
            raise InputError(
                f"{label}: cannot read an object of type {type(given).__name__} "
                f"({first_line(exc)}); give a path, a pandas or Polars DataFrame, an Arrow "
                "table or dataset, or a DuckDB relation"
            ) from None
    enums = [
        f"CAST({ident(name)} AS {TEXT}) AS {ident(name)}"
        for name, dtype in _actual_columns(con, scanned).items()
        if dtype.startswith("ENUM(")
    ]
    columns = f"* REPLACE ({', '.join(enums)})" if enums else "*"
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {ident(raw)} AS SELECT {columns}, "
        f"{lit(shown)} AS {FILE_COLUMN}, row_number() OVER () AS {ROW_COLUMN} "
        f"FROM {ident(scanned)}"
    )


def is_pandas(given: object) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(given, pandas.DataFrame)


def _object_fingerprint(
    con: duckdb.DuckDBPyConnection, raw: str, given: object, shown: str
) -> InputFile:
    """sha256 of the object's schema, row count and an order-independent sum of its rows'
    hashes, computed by DuckDB as it scans: nothing is serialised. `bytes` is the memory the
    object reports (Arrow's nbytes, Polars' estimated_size, pandas' memory_usage), else 0."""
    described = _actual_columns(con, raw)
    hashed = ", ".join(ident(name) for name in described) or "NULL"
    row = first_row(con, f"SELECT count(*), sum(hash({hashed})::HUGEINT) FROM {ident(raw)}")
    digest = hashlib.sha256(json.dumps([described, str(row)]).encode("utf-8")).hexdigest()
    return InputFile(path=shown, bytes=_reported_bytes(given), sha256=digest)


def _reported_bytes(given: object) -> int:
    for measure in ("nbytes", "estimated_size"):
        value = getattr(given, measure, None)
        value = value() if callable(value) else value
        if isinstance(value, int):
            return value
    if is_pandas(given):
        return int(given.memory_usage(index=False).sum())  # type: ignore[attr-defined]
    return 0


def _format_of(files: list[str], label: str) -> str:
    formats = {FORMATS.get(Path(f).suffix.lower()) for f in files}
    if None in formats:
        odd = next(f for f in files if Path(f).suffix.lower() not in FORMATS)
        raise InputError(f"{label}: {odd}: unknown file type (use {', '.join(FORMATS)})")
    if len(formats) > 1:
        raise InputError(
            f"{label}: mixes file types ({', '.join(sorted(f for f in formats if f))})"
        )
    return formats.pop()  # type: ignore[return-value]


def _text_columns(contract: TableContract) -> set[str]:
    """The contract's id and text columns (lower case): read as written, never typed by guess."""
    return {c.name.lower() for c in contract.columns if c.kind in ("id", "text")}


def _create_raw_view(
    con: duckdb.DuckDBPyConnection,
    raw: str,
    files: list[str],
    fmt: str,
    hive: bool,
    label: str,
    given: str,
    text_columns: set[str],
) -> None:
    """The raw view of the files: every column as the file types it, except that id and text
    columns of a CSV or JSON file are read as text (DuckDB would guess "42" a number, "t" a
    boolean, "2024-01-01" a date, and "007" would become 7)."""
    reader = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}[fmt]
    options = [
        f"filename = {lit(FILE_COLUMN)}",
        "union_by_name = true",
        f"hive_partitioning = {lit(hive)}",
    ]
    try:
        if fmt == "parquet":
            options.append("file_row_number = true")
        elif fmt == "csv":
            options += _csv_text_types(con, files, label, text_columns)
        else:
            options += _json_text_types(con, files, text_columns)
        scan = f"{reader}({lit(files)}, {', '.join(options)})"
        if fmt == "parquet":
            view = f"SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS {ROW_COLUMN} FROM {scan}"
            con.execute(f"CREATE OR REPLACE TEMP VIEW {ident(raw)} AS {view}")
        else:
            create_numbered_view(con, raw, scan)
        con.execute(f"SELECT * FROM {ident(raw)} LIMIT 0")
    except duckdb.Error as exc:
        if fmt != "parquet":
            _refuse_other_encodings(files, label)
        raise InputError(f"{label}: cannot read {given}: {first_line(exc)}") from None


def create_numbered_view(con: duckdb.DuckDBPyConnection, name: str, scan: str) -> None:
    """The view `name` of `scan` (a CSV or JSON reader with `filename = FILE_COLUMN`) with each
    row's line number in its file as ROW_COLUMN. These readers have no file_row_number, and a
    window over the scan numbers rows in the order its threads finish (a 5,000-line file was
    numbered out of order); loaded into a table, whose rowid keeps the scan's order, they are
    numbered in file order."""
    loaded = ident(name + "_loaded")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {loaded} AS SELECT * FROM {scan}")
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {ident(name)} AS "
        f"SELECT * EXCLUDE (__rowid), __rowid - min(__rowid) OVER "
        f"(PARTITION BY {FILE_COLUMN}) + 1 AS {ROW_COLUMN} "
        f"FROM (SELECT *, rowid AS __rowid FROM {loaded})"
    )


def _csv_text_types(
    con: duckdb.DuckDBPyConnection, files: list[str], label: str, text_columns: set[str]
) -> list[str]:
    """read_csv's `types` for the text columns some file's header names (naming one that no
    header has is an error to DuckDB)."""
    headers = {name for path in files for name in _csv_header(con, path, label)}
    chosen = sorted(
        {name.lower(): name for name in headers if name.lower() in text_columns}.values()
    )
    if not chosen:
        return []
    return [f"types = {{{', '.join(f'{lit(name)}: {lit(TEXT)}' for name in chosen)}}}"]


def _json_text_types(
    con: duckdb.DuckDBPyConnection, files: list[str], text_columns: set[str]
) -> list[str]:
    """read_json's `columns` (every key, as detected) when a text column was detected as
    something else; none when detection already reads them as text."""
    detected = con.execute(f"DESCRIBE SELECT * FROM read_json({lit(files)}, union_by_name = true)")
    types = {name: str(dtype) for name, dtype, *_ in detected.fetchall()}
    if all(dtype == TEXT for name, dtype in types.items() if name.lower() in text_columns):
        return []
    columns = ", ".join(
        f"{lit(name)}: {lit(TEXT if name.lower() in text_columns else dtype)}"
        for name, dtype in types.items()
    )
    return [f"columns = {{{columns}}}"]


def _refuse_other_encodings(files: list[str], label: str) -> None:
    """A text file DuckDB could not read because it is not UTF-8 (Latin-1, say): DuckDB says
    only "CSV Error on Line: 2", so name the encoding problem and where it is."""
    for path in files:
        decoder = codecs.getincrementaldecoder("utf-8")()
        lines_before = 0
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                try:
                    decoder.decode(block)
                except UnicodeDecodeError as exc:
                    # exc.object is a partial character left from the last block + this block
                    line = lines_before + exc.object.count(b"\n", 0, exc.start) + 1
                    raise InputError(
                        f"{label} ({path}, line {line}): not UTF-8 text (byte "
                        f"0x{exc.object[exc.start]:02x}); save the file as UTF-8"
                    ) from None
                lines_before += block.count(b"\n")


def _csv_header(con: duckdb.DuckDBPyConnection, path: str, label: str) -> list[str]:
    """The column names of a CSV file's header; one named twice is refused: DuckDB would rename
    the second (`a_1`) and the first would be read silently."""
    try:
        header = first_row(
            con, f"SELECT * FROM read_csv({lit(path)}, header = false, all_varchar = true) LIMIT 1"
        )
    except duckdb.Error:
        return []  # unreadable: the full read reports it
    names = [name for name in header or () if name]
    seen: set[str] = set()
    for name in names:
        key = name.strip().lower()
        if key in seen:
            raise InputError(f"{label} ({path}): column {name!r} appears twice in the header")
        seen.add(key)
    return names


def _row_count(con: duckdb.DuckDBPyConnection, raw: str) -> int:
    row = first_row(con, f"SELECT count(*) FROM {ident(raw)}")
    return int(row[0]) if row else 0


def _actual_columns(con: duckdb.DuckDBPyConnection, raw: str) -> dict[str, str]:
    described = con.execute(f"DESCRIBE {ident(raw)}").fetchall()
    return {
        name: str(dtype) for name, dtype, *_ in described if name not in (FILE_COLUMN, ROW_COLUMN)
    }


def create_empty_view(con: duckdb.DuckDBPyConnection, contract: TableContract) -> None:
    """The typed view of an optional table that was not given: its columns, no rows."""
    columns = ", ".join(f"CAST(NULL AS {c.sql_type}) AS {ident(c.name)}" for c in contract.columns)
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {ident(contract.name)} AS SELECT {columns} WHERE FALSE"
    )


def _create_typed_view(
    con: duckdb.DuckDBPyConnection,
    contract: TableContract,
    raw: str,
    names: dict[str, str],
    others: tuple[str, ...] = (),
) -> None:
    projections = []
    for column in contract.columns:
        if column.name in names:
            source = f"CAST({ident(names[column.name])} AS {column.sql_type})"
            if column.nan_as_null:
                source = nan_as_null_sql(source)
        else:
            source = f"CAST(NULL AS {column.sql_type})"
        projections.append(f"{source} AS {ident(column.name)}")
    projections += [ident(name) for name in others]
    make_room(con, contract.name, view=True)
    con.execute(
        f"CREATE OR REPLACE TEMP VIEW {ident(contract.name)} AS "
        f"SELECT {', '.join(projections)} FROM {ident(raw)}"
    )


def schema_of(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    """Column -> type of a table or view, for sqlglot's qualify."""
    described = con.execute(f"DESCRIBE {ident(table)}").fetchall()
    return {name: str(dtype) for name, dtype, *_ in described}
