"""Small pieces shared by every capability's runner: execute with a named error, record
settings, and keep the rendered SQL beside the outputs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Literal

import duckdb

from .engine import EngineSettings
from .errors import DuckscoreError
from .render import RenderedSQL, lit


def execute(con: duckdb.DuckDBPyConnection, statement: str, rendered: RenderedSQL) -> None:
    """Run a statement built from `rendered`; a DuckDB failure names the template."""
    try:
        con.execute(statement)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise DuckscoreError(f"sql/{rendered.template}: DuckDB failed: {first}") from None


def first_row(con: duckdb.DuckDBPyConnection, statement: str) -> tuple[Any, ...] | None:
    """The first row of a result read to its end: DuckDB 2 refuses `register` and friends
    while a `fetchone()` result is still open on the connection."""
    rows = con.execute(statement).fetchall()
    return rows[0] if rows else None


def copy_to(con: duckdb.DuckDBPyConnection, query: str, path: Path,
            fmt: Literal["parquet", "json"], rendered: RenderedSQL | None = None) -> int:
    """COPY a query's rows to one file; returns the row count. A failure names the file (and
    the template, when the query is one)."""
    try:
        with _one_thread(con) if fmt == "json" else nullcontext():
            row = first_row(con, f"COPY ({query}) TO {lit(str(path))} (FORMAT {fmt})")
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        source = f" from sql/{rendered.template}" if rendered else ""
        raise DuckscoreError(f"writing {path.name}{source}: DuckDB failed: {first}") from None
    return int(row[0]) if row else 0


@contextmanager
def _one_thread(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    # DuckDB's parallel JSON writer reserves a 256 MiB buffer per thread: under --memory-limit 1GB
    # that ran out of memory at 30M log rows, and one thread writes the contract as fast.
    threads = first_row(con, "SELECT current_setting('threads')")
    con.execute("SET threads = 1")
    try:
        yield
    finally:
        con.execute(f"SET threads = {int(threads[0]) if threads else 1}")


def settings_record(settings: EngineSettings | None) -> dict[str, Any]:
    settings = settings or EngineSettings()
    return {"threads": settings.threads, "memory_limit": settings.memory_limit,
            "temp_dir": str(settings.temp_dir) if settings.temp_dir else None}


def write_sql(stage: Path, rendered: list[RenderedSQL]) -> None:
    """The rendered SQL that produced the outputs, in stage/sql/, one file per template."""
    (stage / "sql").mkdir(exist_ok=True)
    for sql in rendered:
        (stage / "sql" / sql.template.replace("/", "_")).write_text(sql.text, encoding="utf-8")
