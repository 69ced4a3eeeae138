"""DuckDB connections with the user's resource settings, and the one way a DuckDB error is shown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from .errors import DuckscoreError

_MEMORY = re.compile(r"\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class EngineSettings:
    """--threads, --memory-limit and --temp-dir, as every command takes them."""

    threads: int | None = None
    memory_limit: str | None = None
    temp_dir: Path | None = None

    def config(self) -> dict[str, str | bool | int | float | list[str]]:
        config: dict[str, str | bool | int | float | list[str]] = {}
        if self.threads is not None:
            if self.threads < 1:
                raise DuckscoreError(f"--threads must be at least 1, got {self.threads}")
            config["threads"] = self.threads
        if self.memory_limit is not None:
            if not _MEMORY.fullmatch(self.memory_limit):
                raise DuckscoreError(
                    f"--memory-limit {self.memory_limit!r}: expected a size such as 1GB or 512MiB"
                )
            config["memory_limit"] = self.memory_limit.strip()
        if self.temp_dir is not None:
            config["temp_directory"] = str(self.temp_dir)
        return config

    def record(self) -> dict[str, Any]:
        """The settings as the manifest records them."""
        return {
            "threads": self.threads,
            "memory_limit": self.memory_limit,
            "temp_dir": str(self.temp_dir) if self.temp_dir else None,
        }


def connect(settings: EngineSettings | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection configured from `settings` (no SQL is spliced)."""
    settings = settings or EngineSettings()
    try:
        return duckdb.connect(":memory:", config=settings.config())
    except duckdb.Error as exc:
        raise DuckscoreError(f"cannot start DuckDB with these settings: {exc}") from None


def first_row(
    con: duckdb.DuckDBPyConnection, statement: str, params: Any = None
) -> tuple[Any, ...] | None:
    """The first row of a result read to its end: DuckDB 2 refuses `register` and friends
    while a `fetchone()` result is still open on the connection."""
    rows = con.execute(statement, params).fetchall()
    return rows[0] if rows else None


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (DuckDB's run to several), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
