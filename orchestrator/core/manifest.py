"""manifest.json: what produced an output folder, so any result can be replayed and compared."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from importlib.metadata import version
from typing import Any

import duckdb

from .render import RenderedSQL
from .tables import OpenedInput
from .version import __version__


def build_manifest(
    command: str,
    policy_record: dict[str, Any],
    sql: Iterable[RenderedSQL],
    inputs: Mapping[str, OpenedInput],
    outputs: Mapping[str, int],
    options: dict[str, Any],
) -> dict[str, Any]:
    return {
        "command": command,
        "duckscore_version": __version__,
        "duckdb_version": duckdb.__version__,
        "sqlglot_version": version("sqlglot"),
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "policy": policy_record,
        "sql": {r.template: {"sha256": r.sha256} for r in sql},
        "inputs": {name: _describe_input(opened) for name, opened in inputs.items()},
        "outputs": {name: {"rows": rows} for name, rows in outputs.items()},
        "options": options,
    }


def _describe_input(opened: OpenedInput) -> dict[str, Any]:
    return {
        "given": opened.given,
        "format": opened.format,
        "rows": opened.rows,
        "files": [asdict(f) for f in opened.files],
    }
