"""An independent plain-Python reference of `duckscore eval --loc`, written from the published
definitions, not from sql/metrics/localization.sql.

The metrics transcribe LocAgent's evaluation code (evaluation/eval_metric.py of
gersteinlab/LocAgent, `cal_metrics_w_file` and the metric functions it calls) into lists: per
instance a 0/1 vector of the first max_k predictions (1 where the prediction is gold) and an
"ideal" vector with a 1 at each of the first min(|G|, max_k) places, then
    acc_at_k        sum(pred[:k]) == sum(ideal[:k])
    recall_at_k     sum(pred[:k]) / sum(ideal)
    normalized_dcg  dcg(pred[:k]) / dcg(ideal[:k]), dcg(v) = sum(v[i] / log2(i + 2)), 0/0 -> 0
    precision_at_k  sum(pred[:k]) / k
    average_precision_at_k   (sum over j < k with pred[j]: hits so far / (j + 1)) / k
each averaged over the instances with gold at the level. The inputs are read as the docs say:
Python's json per line; paths with `\\` as `/` and leading `./` removed; at function level with
merge_init, a trailing `.__init__` removed; each side's repeated locations kept once (the first).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

KEYS = {"file": "found_files", "module": "found_modules", "function": "found_entities"}
NAMES = (("acc", "Acc"), ("ndcg", "NDCG"), ("precision", "P"), ("recall", "Recall"), ("map", "MAP"))


def clean(location: str, level: str, merge_init: bool) -> str:
    location = location.replace("\\", "/")
    while location.startswith("./"):
        location = location[2:]
    if merge_init and level == "function" and location.endswith(".__init__"):
        location = location[: -len(".__init__")]
    return location


def first_of_each(locations: list[str]) -> list[str]:
    kept: list[str] = []
    for location in locations:
        if location not in kept:
            kept.append(location)
    return kept


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def predictions(path: Path, level: str, merge_init: bool) -> dict[str, list[str]]:
    return {
        str(row["instance_id"]): first_of_each(
            [clean(x, level, merge_init) for x in row.get(KEYS[level]) or []]
        )
        for row in read_jsonl(path)
    }


def benchmark_gold(rows: list[dict[str, Any]], level: str) -> dict[str, list[str]]:
    """LocAgent's load_gt_dict (file_changes) and, for lines without it, the edit_functions
    reading of its cal_metrics_w_dataset."""
    gold: dict[str, list[str]] = {}
    for row in rows:
        found: list[str] = []
        if row.get("file_changes") is not None:
            for change in row["file_changes"]:
                if level == "file":
                    found.append(change["file"])
                else:
                    key = "edited_modules" if level == "module" else "edited_entities"
                    found += (change.get("changes") or {}).get(key) or []
        else:
            for entry in row["edit_functions"]:
                file, _, name = entry.partition(":")
                if level == "file":
                    found.append(file)
                elif name and level == "module":
                    found.append(f"{file}:{name.split('.')[0]}")
                elif name:
                    found.append(entry)
        gold[str(row["instance_id"])] = found
    return gold


def table_gold(rows: list[tuple[str, str, str]], level: str) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    for instance, row_level, location in rows:
        gold.setdefault(instance, [])
        if row_level == level:
            gold[instance].append(location)
    return gold


def dcg(vector: list[int]) -> float:
    return sum(v / math.log2(i + 2) for i, v in enumerate(vector))


def metric(kind: str, pred: list[int], ideal: list[int], k: int) -> float:
    if kind == "acc":
        return 1.0 if sum(pred[:k]) == sum(ideal[:k]) else 0.0
    if kind == "recall":
        return sum(pred[:k]) / sum(ideal) if sum(ideal) else 0.0
    if kind == "ndcg":
        ideal_dcg = dcg(ideal[:k])
        return dcg(pred[:k]) / ideal_dcg if ideal_dcg else 0.0
    if kind == "precision":
        return sum(pred[:k]) / k
    ap, hits = 0.0, 0
    for j in range(k):
        if pred[j] == 1:
            hits += 1
            ap += hits / (j + 1)
    return ap / k


def per_instance(
    predicted: dict[str, list[str]], gold: dict[str, list[str]], ks: tuple[int, ...], level: str,
    merge_init: bool,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """instance -> {"Acc@1": …}: the instances whose gold has a location at the level."""
    max_k = max(ks)
    values: dict[str, dict[str, float]] = {}
    for instance, raw in gold.items():
        locations = first_of_each([clean(x, level, merge_init) for x in raw])
        if not locations:
            continue
        shown = predicted.get(instance, [])[:max_k]
        pred = [1 if x in locations else 0 for x in shown] + [0] * (max_k - len(shown))
        ideal = [1 if i < len(locations) else 0 for i in range(max_k)]
        values[instance] = {
            f"{name}@{k}": metric(kind, pred, ideal, k) for kind, name in NAMES for k in ks
        }
    return values


def means(values: dict[str, dict[str, float]]) -> dict[str, float]:
    names = next(iter(values.values())).keys()
    return {name: sum(values[i][name] for i in sorted(values)) / len(values) for name in names}
