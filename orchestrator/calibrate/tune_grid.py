"""The grid and the folds of `duckscore tune`, in plain Python: `--grid KEY=VALUES` parsed into
axes, their grid points (every combination, the last key varying fastest), the folds of the
queries, and the cross-validated choice of a grid point from per-query metric values.

A grid value is a list (`a,b,c`) or an inclusive range (`a:b:step`, b included within a
tolerance of a millionth of a step); each value is read as `--set-recipe` reads one (YAML 1.2
numbers and booleans, core/policy.py's load_yaml: `010` is refused, `0o10` is 8, `yes` is text).
Keys are checked when the grid points are loaded as recipes (the `--set-recipe` machinery)."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ..core.errors import DuckscoreError
from ..core.policy import AmbiguousNumber, dump_yaml, load_yaml

MAX_GRID_POINTS = 10_000
MAX_RANGE_VALUES = 10_000


class TuneError(DuckscoreError):
    """A grid, fold count or metric `duckscore tune` cannot use."""


@dataclass(frozen=True)
class Axis:
    """One `--grid` option: a recipe key and its values, in the order given."""

    key: str
    values: tuple[Any, ...]
    given: str


def parse_axis(item: str) -> Axis:
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise TuneError(f"--grid {item!r}: expected KEY=VALUES (a,b,c or start:stop:step)")
    if not raw.strip():
        raise TuneError(f"--grid {item!r}: no values (give a,b,c or start:stop:step)")
    values = _range(item, raw) if ":" in raw else tuple(_value(item, v) for v in raw.split(","))
    if len(set(map(repr, values))) != len(values):
        raise TuneError(f"--grid {item!r}: a value is listed twice")
    return Axis(key, values, item)


def parse_grid(items: Sequence[str]) -> list[Axis]:
    if not items:
        raise TuneError("--grid: give at least one KEY=VALUES")
    axes = [parse_axis(item) for item in items]
    seen: set[str] = set()
    for axis in axes:
        if axis.key in seen:
            raise TuneError(f"--grid {axis.given!r}: the key {axis.key} is given twice")
        seen.add(axis.key)
    points = math.prod(len(axis.values) for axis in axes)
    if points > MAX_GRID_POINTS:
        raise TuneError(f"--grid: {points:,} grid points; at most {MAX_GRID_POINTS:,}")
    return axes


def grid_points(axes: Sequence[Axis]) -> list[dict[str, Any]]:
    """Every combination of the axes' values as {key: value}, the last axis varying fastest."""
    keys = [axis.key for axis in axes]
    return [dict(zip(keys, combo)) for combo in itertools.product(*(a.values for a in axes))]


def as_overrides(point: Mapping[str, Any]) -> list[str]:
    """A grid point as `--set-recipe` items (values written back as YAML)."""
    return [f"{key}={_yaml(value)}" for key, value in point.items()]


def _yaml(value: Any) -> str:
    return dump_yaml(value, flow=True, width=10_000).strip().removesuffix("...").strip()


def _value(item: str, raw: str) -> Any:
    if not raw.strip():
        raise TuneError(f"--grid {item!r}: an empty value")
    try:
        return load_yaml(raw)
    except AmbiguousNumber as exc:
        raise TuneError(f"--grid {item!r}: {exc.problem}") from None
    except yaml.YAMLError:
        raise TuneError(f"--grid {item!r}: {raw.strip()!r} is not valid YAML") from None


def _range(item: str, raw: str) -> tuple[Any, ...]:
    parts = raw.split(":")
    numbers: list[Any] = [_value(item, part) if part.strip() else None for part in parts]
    if len(parts) != 3 or not all(
        isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n) for n in numbers
    ):
        raise TuneError(f"--grid {item!r}: a range is start:stop:step, three numbers")
    start, stop, step = numbers
    if step <= 0 or stop < start:
        raise TuneError(f"--grid {item!r}: a range needs step > 0 and start <= stop")
    count = math.floor((stop - start) / step + 1e-6) + 1
    if count > MAX_RANGE_VALUES:
        raise TuneError(f"--grid {item!r}: {count:,} values; at most {MAX_RANGE_VALUES:,}")
    if all(isinstance(n, int) for n in numbers):
        return tuple(start + i * step for i in range(count))
    # 0:1:0.1 gives 0.3, not 0.30000000000000004: 12 significant digits, as a person writes it
    return tuple(float(f"{start + i * step:.12g}") for i in range(count))


def assign_folds(query_ids: Sequence[str], folds: int, seed: int) -> dict[str, int]:
    """Query ids sorted, shuffled by the seed, dealt round-robin into `folds` folds."""
    ids = sorted(query_ids)
    random.Random(seed).shuffle(ids)
    return {query_id: i % folds for i, query_id in enumerate(ids)}


@dataclass(frozen=True)
class FoldChoice:
    fold: int
    grid_point: int  # index into the grid points
    train_mean: float
    test_mean: float
    test_queries: int


@dataclass(frozen=True)
class Selection:
    folds: list[FoldChoice]
    cross_validated: float  # mean over every query of its held-out fold's choice
    held_out: dict[str, float]  # query_id -> the value of its fold's choice
    best: int  # the best grid point on every query
    means: list[float]  # each grid point's mean on every query


def select(values: Sequence[Mapping[str, float]], folds: Mapping[str, int]) -> Selection:
    """`values[g][query_id]`: grid point g's metric on each query (every query of `folds`).
    Fold f's choice is the grid point with the best mean on the queries of the other folds (ties:
    the first); it is scored on fold f. Sums are exactly rounded (fsum): no order dependence."""
    queries = sorted(folds)
    n_folds = max(folds.values()) + 1

    def mean(g: int, keep: Any) -> float:
        chosen = [values[g][q] for q in queries if keep(q)]
        return math.fsum(chosen) / len(chosen)

    def best(keep: Any) -> tuple[int, float]:
        scored = [(mean(g, keep), g) for g in range(len(values))]
        top = max(score for score, _ in scored)
        return next((g, score) for score, g in scored if score == top)

    choices: list[FoldChoice] = []
    held_out: dict[str, float] = {}
    for fold in range(n_folds):
        g, train = best(lambda q, f=fold: folds[q] != f)
        tested = [q for q in queries if folds[q] == fold]
        held_out.update({q: values[g][q] for q in tested})
        choices.append(
            FoldChoice(fold, g, train, mean(g, lambda q, f=fold: folds[q] == f), len(tested))
        )
    overall, _ = best(lambda q: True)
    return Selection(
        choices,
        math.fsum(held_out.values()) / len(held_out),
        held_out,
        overall,
        [mean(g, lambda q: True) for g in range(len(values))],
    )
