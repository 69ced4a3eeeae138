"""Which labelled queries each fit learns from: the label floors, the label-set hash, and the
stratified folds (within each label: query ids sorted, shuffled by the seed, dealt round-robin)."""

from __future__ import annotations

import hashlib
import math
import random

import pandas as pd

from ..core.session import Session
from .settings import CLASSES, CalibrationError, CalibrationSettings

CONFIDENCE = 0.05  # a class quantile needs n with (1 - tail)^n <= 0.05 (Wilks)


def minimum_labels(quantile: float) -> int:
    """Labels needed before the sample's extreme bounds the quantile with 95% confidence."""
    tail = min(quantile, 1 - quantile)
    return math.ceil(math.log(CONFIDENCE) / math.log(1 - tail))


def check_label_counts(counts: dict[str, int], settings: CalibrationSettings) -> None:
    needs = {
        "bad": minimum_labels(settings.bad_quantile),
        "good": minimum_labels(settings.good_quantile),
        "ambiguous": minimum_labels(settings.hitl_quantile),
    }
    for label, needed in needs.items():
        if counts.get(label, 0) < needed:
            raise CalibrationError(
                f"--labels: {counts.get(label, 0)} `{label}` labels; estimating their quantile needs "
                f"at least {needed} (the sample's extreme must bound it with 95% confidence)"
            )
    fewest, label = min((counts.get(label, 0), label) for label in CLASSES)
    if settings.folds > fewest:
        # 1000 folds of 300 labels ran for minutes, to 19 GB of memory and 12 GB of spill
        raise CalibrationError(
            f"--folds {settings.folds}: more folds than the {fewest} `{label}` labels; at most "
            f"{fewest} (every fold tests at least one query of each label)"
        )


def label_set_sha256(labels: pd.DataFrame) -> str:
    lines = sorted(f"{q}\t{label}\n" for q, label in zip(labels["query_id"], labels["label"]))
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def assign_folds(labels: pd.DataFrame, folds: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    assigned: dict[str, int] = {}
    for label in CLASSES:
        ids = sorted(labels.loc[labels["label"] == label, "query_id"])
        rng.shuffle(ids)
        assigned.update({query_id: i % folds for i, query_id in enumerate(ids)})
    return assigned


def build_membership(session: Session, folds: dict[str, int], n_folds: int) -> None:
    """The temp table cal_membership(fit, scope, query_id): `all` trains on every query; fold k
    trains on the others and tests on its own."""
    rows = [("all", "train", q) for q in folds]
    for k in range(n_folds):
        name = f"fold{k}"
        rows += [(name, "train" if f != k else "test", q) for q, f in folds.items()]
    session.register("cal_membership", pd.DataFrame(rows, columns=["fit", "scope", "query_id"]))
