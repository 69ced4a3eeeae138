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


# `eval --loc` (code localization): the levels, each with the key of its list in
# loc_outputs.jsonl; the k of each level by default (LocAgent's evaluation prints file 1, 3, 5,
# module and function 5, 10: the same largest k, so every value it prints is one of these);
# the metrics in LocAgent's order, under its names
LOC_LEVELS = {"file": "found_files", "module": "found_modules", "function": "found_entities"}
_LEVEL_NAMES = ", ".join(LOC_LEVELS)
LOC_DEFAULT_K = {"file": (1, 2, 3, 5), "module": (3, 5, 10), "function": (3, 5, 10)}
LOC_METRICS = {"acc": "Acc", "ndcg": "NDCG", "precision": "P", "recall": "Recall", "map": "MAP"}
_K_LIST = re.compile(r"[1-9][0-9]{0,9}(?:,[1-9][0-9]{0,9})*")


def parse_loc_levels(levels: str, k_specs: Sequence[str] = ()) -> dict[str, tuple[int, ...]]:
    """`--levels file,module` and `--k file=1,3,5` (any number): each chosen level, in the
    order given, with its k ascending (its default when no --k names it)."""
    chosen: list[str] = []
    for item in levels.split(","):
        level = item.strip().lower()
        if level not in LOC_LEVELS:
            raise MetricError(f"--levels: unknown level {item.strip()!r} (known: {_LEVEL_NAMES})")
        if level in chosen:
            raise MetricError(f"--levels: {level!r} is listed twice")
        chosen.append(level)
    cutoffs = {level: LOC_DEFAULT_K[level] for level in chosen}
    named: set[str] = set()
    for spec in k_specs:
        level, _, values = (part.strip() for part in spec.partition("="))
        level = level.lower()
        if level not in LOC_LEVELS:
            raise MetricError(f"--k {spec!r}: write LEVEL=K,K,… with a level of {_LEVEL_NAMES}")
        if level not in chosen:
            raise MetricError(f"--k {spec!r}: {level} is not one of --levels {levels!r}")
        if level in named:
            raise MetricError(f"--k: {level} is given twice")
        if not _K_LIST.fullmatch(values.replace(" ", "")):
            raise MetricError(
                f"--k {spec!r}: each k must be a whole number from 1 to {MAX_K} "
                "(written without sign or leading zeros), comma-separated"
            )
        ks = [int(k) for k in values.replace(" ", "").split(",")]
        if max(ks) > MAX_K or len(set(ks)) < len(ks):
            raise MetricError(f"--k {spec!r}: k above {MAX_K} or listed twice")
        named.add(level)
        cutoffs[level] = tuple(sorted(ks))
    return cutoffs
