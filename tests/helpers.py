"""Test helpers: fixture paths, a tolerant, null-safe value comparison, and the one rule for a
component a test needs: missing, it skips — but in CI, where .ci/run installs it, it fails."""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SCIFACT = FIXTURES / "scifact"
# the integrations' tools, each in its own environment (`make integrations`)
DBT = ROOT / ".venv-dbt" / "bin" / "dbt"
PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"


def in_ci() -> bool:
    """Any truthy CI variable (.ci/run sets CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need(available: bool, what: str) -> None:
    """Skip without `what` — but in CI, where .ci/run installs it, fail."""
    if not available:
        if in_ci():
            pytest.fail(f"{what} is missing in CI (.ci/run installs it)")
        pytest.skip(f"{what} is not installed")


def need_module(name: str) -> ModuleType:
    """The module `name` (pyspark, psycopg, ranx: the test extra's), imported — or a skip (a
    failure in CI). Never pytest.importorskip, which skips in CI too."""
    need(importlib.util.find_spec(name) is not None, f"the Python package {name}")
    return importlib.import_module(name)


def need_tool(tool: Path) -> Path:
    """`tool`, one of the integrations' (DBT, PHOENIX), or a skip (a failure in CI)."""
    need(tool.is_file(), f"{tool.relative_to(ROOT)} (`make integrations`)")
    return tool


def same_value(actual: Any, expected: Any, tol: float = 1e-12) -> bool:
    """Null-safe equality with a relative/absolute tolerance for floats."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, float) or isinstance(actual, float):
        return math.isclose(float(actual), float(expected), rel_tol=tol, abs_tol=tol)
    return actual == expected
