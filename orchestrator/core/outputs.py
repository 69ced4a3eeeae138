"""Atomic output folders: everything is written to a sibling temporary folder, then moved in.

A failed run leaves the destination exactly as it was: no partial file, no half-written folder.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import duckdb

from .errors import OutputError
from .render import lit

if TYPE_CHECKING:
    import pandas as pd


@contextmanager
def atomic_output_dir(destination: Path) -> Iterator[Path]:
    """Yield a staging folder; on success move its files into `destination` (created if needed)."""
    destination = Path(destination)
    if destination.exists() and not destination.is_dir():
        raise OutputError(f"--out {destination}: exists and is not a folder")
    parent = destination.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.tmp-", dir=parent))
    except OSError as exc:
        raise OutputError(f"--out {destination}: cannot create ({exc.strerror})") from None
    try:
        yield staging
        _publish(staging, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, destination: Path) -> None:
    if not destination.exists():
        os.replace(staging, destination)
        return
    for item in sorted(staging.iterdir()):
        target = destination / item.name
        if target.is_dir() and not item.is_dir():
            raise OutputError(f"{target}: is a folder, cannot replace it with a file")
        if target.is_dir():
            shutil.rmtree(target)
        os.replace(item, target)


@contextmanager
def atomic_output_file(destination: Path, option: str = "--out") -> Iterator[Path]:
    """Yield a temporary sibling path; on success rename it to `destination`. A failure (also an
    OSError or DuckDB error inside the block) leaves the destination as it was."""
    destination = Path(destination)
    if destination.is_dir():
        raise OutputError(f"{option} {destination}: is a folder")
    try:
        parent = destination.resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{destination.name}.tmp-", dir=parent)
        os.close(handle)
    except OSError as exc:
        raise OutputError(f"{option} {destination}: cannot write ({exc.strerror})") from None
    staging = Path(name)
    try:
        yield staging
        os.replace(staging, destination)
    except (OSError, duckdb.Error) as exc:
        detail = exc.strerror if isinstance(exc, OSError) else str(exc).strip().splitlines()[0]
        raise OutputError(f"{option} {destination}: cannot write ({detail})") from None
    finally:
        staging.unlink(missing_ok=True)


def write_json(path: Path, document: Any) -> None:
    path.write_text(
        json.dumps(document, indent=2, sort_keys=False, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def write_frame(
    frame: pd.DataFrame,
    destination: Path,
    option: str = "--out",
    select: str = "SELECT * FROM frame",
    fmt: Literal["parquet", "csv"] = "parquet",
) -> None:
    """Write `select` over the DataFrame (as the view `frame`) to one Parquet or CSV file,
    atomically: on failure the destination is left as it was."""
    options = "FORMAT parquet" if fmt == "parquet" else "FORMAT csv, HEADER true"
    with atomic_output_file(destination, option) as staging:
        con = duckdb.connect(":memory:")
        try:
            con.register("frame", frame)
            con.execute(f"COPY ({select}) TO {lit(str(staging))} ({options})")
        finally:
            con.close()
