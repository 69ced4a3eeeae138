"""Test helpers: fixture paths and a tolerant, null-safe value comparison."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SCIFACT = FIXTURES / "scifact"


def same_value(actual: Any, expected: Any, tol: float = 1e-12) -> bool:
    """Null-safe equality with a relative/absolute tolerance for floats."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, float) or isinstance(actual, float):
        return math.isclose(float(actual), float(expected), rel_tol=tol, abs_tol=tol)
    return actual == expected
