"""The precision a fitted number is written, hashed and scored at (policies' fitted values)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .frozen import FrozenList

# A fitted number is written, hashed into its version and scored at this many significant
# digits: a fit's last bits are the BLAS's and the CPU's (OpenBLAS picks its kernels per
# processor), and a version named after them would differ from machine to machine.
FITTED_DIGITS = 10


def at_written_precision(value: Any) -> Any:
    """`value` with every float rounded to FITTED_DIGITS significant digits, lists and mappings
    element by element (a policy's frozen views made plain); NaN, infinities, integers,
    booleans and text as they are. Idempotent, and dump_yaml / load_yaml give the rounded
    floats back exactly."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{FITTED_DIGITS}g}")
    if isinstance(value, Mapping):
        return {key: at_written_precision(item) for key, item in value.items()}
    if isinstance(value, list | FrozenList):
        return [at_written_precision(item) for item in value]
    if isinstance(value, tuple):
        return tuple(at_written_precision(item) for item in value)
    return value
