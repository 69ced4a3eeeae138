"""The one-sided permutation test of `eval --answers-quality` (seed 000 §11) in plain Python,
written from docs/metrics.md, not from the SQL: the pool is a version's `high` and `low` queries
with a value, each value rounded to 18 decimal places (exact, so equal sums tie); a pool of n with
2^n <= permutations is split every way (itertools), a larger one draws `permutations` splits,
split r putting `high` the first n_high queries ordered by DuckDB's hash('seed/r/query_id')
(the only thing taken from DuckDB), then by query_id."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal
from typing import Any

import duckdb

STEP = Decimal(1).scaleb(-18)


def exact(value: float) -> Decimal:
    """A value as the test sums it: its shortest decimal form rounded to 18 places."""
    return Decimal(repr(value)).quantize(STEP)


def permutation_test(
    high: dict[str, float], low: dict[str, float], permutations: int, seed: int
) -> dict[str, Any]:
    """n_high, n_low, exact, splits, as_extreme and p_value of the pool `high` + `low`
    (query_id -> value), or None for each when one side is empty (not testable)."""
    if not high or not low:
        return dict.fromkeys(("n_high", "n_low", "exact", "splits", "as_extreme", "p_value"))
    pool = {query_id: exact(value) for query_id, value in {**high, **low}.items()}
    observed = sum(exact(value) for value in high.values())
    is_exact = 2 ** len(pool) <= permutations
    sums = (
        _every_split(pool, len(high)) if is_exact else _drawn(pool, len(high), permutations, seed)
    )
    as_extreme = sum(total >= observed for total in sums)
    p_value = as_extreme / len(sums) if is_exact else (as_extreme + 1) / (permutations + 1)
    return {"n_high": len(high), "n_low": len(low), "exact": is_exact, "splits": len(sums),
            "as_extreme": as_extreme, "p_value": p_value}  # fmt: skip


def _every_split(pool: dict[str, Decimal], n_high: int) -> list[Decimal]:
    sums = [sum(chosen, Decimal(0)) for chosen in itertools.combinations(pool.values(), n_high)]
    assert len(sums) == math.comb(len(pool), n_high)
    return sums


def _drawn(pool: dict[str, Decimal], n_high: int, permutations: int, seed: int) -> list[Decimal]:
    ids = sorted(pool)
    keys = [f"{seed}/{split}/{query_id}" for split in range(permutations) for query_id in ids]
    (hashes,) = duckdb.connect().execute(
        "SELECT list_transform(?::VARCHAR[], lambda k: hash(k))", [keys]
    ).fetchone() or ([],)
    sums = []
    for split in range(permutations):
        row = hashes[split * len(ids) : (split + 1) * len(ids)]
        order = sorted(zip(row, ids, strict=True))
        sums.append(sum((pool[query_id] for _, query_id in order[:n_high]), Decimal(0)))
    return sums
