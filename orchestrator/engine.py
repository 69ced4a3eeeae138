"""DuckDB connections with the user's resource settings, and SQL execution with clear errors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .errors import DuckscoreError

_MEMORY = re.compile(r"\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class EngineSettings:
    threads: int | None = None
    memory_limit: str | None = None
    temp_dir: Path | None = None

    def config(self) -> dict[str, str | int]:
        config: dict[str, str | int] = {}
        if self.threads is not None:
            if self.threads < 1:
                raise DuckscoreError(f"--threads must be at least 1, got {self.threads}")
            config["threads"] = self.threads
        if self.memory_limit is not None:
            if not _MEMORY.fullmatch(self.memory_limit):
                raise DuckscoreError(f"--memory-limit {self.memory_limit!r}: expected a size such as 1GB or 512MiB")
            config["memory_limit"] = self.memory_limit.strip()
        if self.temp_dir is not None:
            config["temp_directory"] = str(self.temp_dir)
        return config


def connect(settings: EngineSettings | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection configured from `settings` (no SQL is spliced)."""
    settings = settings or EngineSettings()
    try:
        return duckdb.connect(":memory:", config=settings.config())
    except duckdb.Error as exc:
        raise DuckscoreError(f"cannot start DuckDB with these settings: {exc}") from None
