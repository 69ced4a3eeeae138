"""The metrics `duckscore eval` knows and how they are named: `ndcg@10`, `recall@100`, `map` …
Parsing is strict and keeps each name as the user spelled it (the keys of the means). Light to
import: the command line reads its defaults from here."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import DuckscoreError

DEFAULT_METRICS = "ndcg@10,recall@100,mrr@10,map"
MAX_K = 1_000_000_000
DEFAULT_LABEL_K = 10  # `duckscore labels`: a query with no relevant document in its top k is bad

# metric -> needs a cutoff (the others without @k use the whole run, as ranx with k = 0)
METRICS: dict[str, bool] = {
    "ndcg": False,
    "recall": False,
    "precision": True,
    "mrr": False,
    "map": False,
    "hit_rate": False,
    "hits": False,
}
_KNOWN = "ndcg@k, recall@k, precision@k, mrr@k, map, map@k, hit_rate@k, hits@k"
_SPEC = re.compile(r"(?P<name>[A-Za-z_]+)(?:@(?P<k>.*))?", re.DOTALL)


class MetricError(DuckscoreError):
    """--metrics names an unknown metric or a bad cutoff."""


@dataclass(frozen=True)
class Metric:
    """One requested metric: `key` exactly as the user wrote it, `k` None for the whole run."""

    key: str
    name: str
    k: int | None

    @property
    def suffix(self) -> str:
        return "_all" if self.k is None else f"_at_{self.k}"

    @property
    def column(self) -> str:
        return f"{self.name}{self.suffix}"

    @property
    def context(self) -> dict[str, Any]:
        return {"name": self.name, "k": self.k, "suffix": self.suffix, "column": self.column}


def parse_metrics(spec: str | Sequence[str]) -> list[Metric]:
    """Parse `ndcg@10,recall@100,map` (or a list of such names) strictly; keys keep their spelling."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    metrics: list[Metric] = []
    seen: dict[tuple[str, int | None], str] = {}
    for item in items:
        if not isinstance(item, str):
            raise MetricError(f"--metrics: expected metric names, got {item!r}")
        key = item.strip()
        if not key:
            raise MetricError(f"--metrics {_shown(spec)}: empty metric name (known: {_KNOWN})")
        match = _SPEC.fullmatch(key)
        name = match.group("name").lower() if match else key.lower()
        if match is None or name not in METRICS:
            raise MetricError(
                f"--metrics: unknown metric {key!r}{_did_you_mean(key)} (known: {_KNOWN})"
            )
        k_text = match.group("k")
        needs_k = METRICS[name]
        if k_text is None:
            if needs_k:
                raise MetricError(f"--metrics: {key!r} needs a cutoff, e.g. {name}@10")
            k = None
        else:
            if not re.fullmatch(r"[1-9][0-9]{0,9}", k_text) or int(k_text) > MAX_K:
                raise MetricError(
                    f"--metrics: bad cutoff in {key!r}: k must be a whole number "
                    f"from 1 to {MAX_K} (written without sign or leading zeros)"
                )
            k = int(k_text)
        if (name, k) in seen:
            raise MetricError(f"--metrics: {key!r} is listed twice (as {seen[(name, k)]!r})")
        seen[(name, k)] = key
        metrics.append(Metric(key, name, k))
    if not metrics:
        raise MetricError(f"--metrics: no metric given (known: {_KNOWN})")
    return metrics


def _shown(spec: str | Sequence[str]) -> str:
    return repr(spec if isinstance(spec, str) else ",".join(map(str, spec)))


def _did_you_mean(key: str) -> str:
    name = key.split("@", 1)[0].lower()
    close = difflib.get_close_matches(name, list(METRICS), n=1)
    if not close:
        return ""
    tail = key[len(name) :] if "@" in key else ("@k" if METRICS[close[0]] else "")
    return f" (did you mean {close[0] + tail!r}?)"


# the paired two-sided tests of `eval --baseline` (metrics/significance.py)
TESTS = ("randomization", "t-test")
