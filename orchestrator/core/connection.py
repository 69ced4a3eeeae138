"""DuckDB connections with the user's resource settings, and the one way a DuckDB error is shown."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from .errors import DuckscoreError
from .render import ident

SPILL_PREFIX = "duckscore-spill-"
# DuckDB starts every thread at once; 100,000 of them aborted the process (exit 134)
MAX_THREADS = 1024
DEFAULT_SPILL_BASE = ".tmp"  # DuckDB's own default for an in-memory database
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
            if not 1 <= self.threads <= MAX_THREADS:
                raise DuckscoreError(
                    f"--threads must be between 1 and {MAX_THREADS}, got {self.threads}"
                )
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


def connect(
    settings: EngineSettings | None = None, spill: Path | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection configured from `settings` (no SQL is spliced), spilling
    into `spill` when given."""
    settings = settings or EngineSettings()
    config = settings.config()
    if spill is not None:
        config["temp_directory"] = str(spill)
        # made now, not when DuckDB first spills (it would make the folder, not its parents): a
        # run that ends removes the base when it is empty, which this run's folder keeps it from
        with contextlib.suppress(OSError):
            spill.mkdir(parents=True, exist_ok=True)
    try:
        return duckdb.connect(":memory:", config=config)
    except duckdb.Error as exc:
        raise DuckscoreError(f"cannot start DuckDB with these settings: {exc}") from None


def spill_folder(settings: EngineSettings) -> Path:
    """This run's own folder under --temp-dir (default: DuckDB's `.tmp`), so that what a killed
    run spilled can be told apart and removed: folders of runs no longer alive are removed now."""
    base = Path(settings.temp_dir) if settings.temp_dir else Path(DEFAULT_SPILL_BASE)
    try:
        found = list(base.glob(f"{SPILL_PREFIX}*"))
    except OSError:  # another run ending removed the base while it was read (remove_spill)
        found = []
    for folder in found:
        owner = folder.name[len(SPILL_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)
    return base / f"{SPILL_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"


def remove_spill(folder: Path) -> None:
    """Remove a run's spill folder, and DuckDB's default `.tmp` when that leaves it empty (also
    when a signal stops the removal after the folder is gone)."""
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        if folder.parent == Path(DEFAULT_SPILL_BASE):
            with contextlib.suppress(OSError):
                folder.parent.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def first_row(
    con: duckdb.DuckDBPyConnection, statement: str, params: Any = None
) -> tuple[Any, ...] | None:
    """The first row of a result read to its end: DuckDB 2 refuses `register` and friends
    while a `fetchone()` result is still open on the connection."""
    rows = con.execute(statement, params).fetchall()
    return rows[0] if rows else None


def make_room(con: duckdb.DuckDBPyConnection, name: str, view: bool) -> None:
    """Drop the temp table (when a view `name` is to replace it) or temp view (when a table is)
    of that name: DuckDB replaces a table only by a table, a view only by a view, and one
    connection may make either of one name (a log with ranks keeps fuse_hits a view, one without
    a table; `parent_features` is a stage's table, or the typed view of score's input)."""
    other = "duckdb_tables()" if view else "duckdb_views()"
    column = "table_name" if view else "view_name"
    found = con.execute(
        f"SELECT 1 FROM {other} WHERE temporary AND lower({column}) = lower(?)", [name]
    ).fetchall()
    if found:
        con.execute(f"DROP {'TABLE' if view else 'VIEW'} {ident(name)}")


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (DuckDB's run to several), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
