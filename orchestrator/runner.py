"""Small pieces shared by every capability's runner: execute with a named error, record
settings, and keep the rendered SQL beside the outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from .engine import EngineSettings
from .errors import DuckscoreError
from .render import RenderedSQL


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


def settings_record(settings: EngineSettings | None) -> dict[str, Any]:
    settings = settings or EngineSettings()
    return {"threads": settings.threads, "memory_limit": settings.memory_limit,
            "temp_dir": str(settings.temp_dir) if settings.temp_dir else None}


def write_sql(stage: Path, rendered: list[RenderedSQL]) -> None:
    """The rendered SQL that produced the outputs, in stage/sql/, one file per template."""
    (stage / "sql").mkdir(exist_ok=True)
    for sql in rendered:
        (stage / "sql" / sql.template.replace("/", "_")).write_text(sql.text, encoding="utf-8")
