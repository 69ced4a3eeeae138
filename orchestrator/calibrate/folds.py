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
HITL_QUANTILES = tuple(round(0.5 + i / 100, 2) for i in range(21))  # --hitl-quantile's band


def minimum_labels(quantile: float) -> int:
    """Labels needed before the sample's extreme bounds the quantile with 95% confidence."""
    tail = min(quantile, 1 - quantile)
    return math.ceil(math.log(CONFIDENCE) / math.log(1 - tail))


def check_label_counts(
    counts: dict[str, int],
    settings: CalibrationSettings,
    where: str,
    labelled: dict[str, int] | None = None,
    option: str = "",
) -> None:
    """Refuse, before any work, labels too few for the quantiles the settings estimate, saying
    what would work with these counts. `labelled`: the counts before only those that occur in
    the input of `option` were kept."""
    s = settings
    bad, good, ambiguous = (counts.get(label, 0) for label in ("bad", "good", "ambiguous"))

    def of_labelled(label: str) -> str:
        return "" if labelled is None else f" in {option} ({labelled.get(label, 0)} labelled)"

    if bad < minimum_labels(s.bad_quantile):
        needed = minimum_labels(s.bad_quantile)
        raise CalibrationError(
            f"{where}: T_low (the {_p(s.bad_quantile)} of the `bad` queries' scores, under "
            f"either --thresholds) needs at least {needed} `bad` queries; you have "
            f"{bad}{of_labelled('bad')}: label at least {needed - bad} more"
        )
    if s.thresholds == "quantile" and good < minimum_labels(s.good_quantile):
        needed = minimum_labels(s.good_quantile)
        raise CalibrationError(
            f"{where}: T_high by --thresholds quantile (the {_p(s.good_quantile)} of the `good` "
            f"queries' scores) needs at least {needed} `good` queries; you have "
            f"{good}{of_labelled('good')}: use --thresholds precision (T_high by "
            f"--target-precision needs no quantile of `good`) or label at least {needed - good} "
            "more"
        )
    if ambiguous < minimum_labels(s.hitl_quantile):
        needed = minimum_labels(s.hitl_quantile)
        raise CalibrationError(
            f"{where}: R_hitl (the {_p(s.hitl_quantile)} of the `ambiguous` queries' top-2 "
            f"ratios, --hitl-quantile {s.hitl_quantile:g}) needs at least {needed} `ambiguous` "
            f"queries; you have {ambiguous}{of_labelled('ambiguous')}: "
            + _lower_hitl_quantile(ambiguous, needed)
        )
    fewest, label = min((counts.get(label, 0), label) for label in CLASSES)
    if settings.folds > fewest:
        # 1000 folds of 300 labels ran for minutes, to 19 GB of memory and 12 GB of spill
        raise CalibrationError(
            f"--folds {settings.folds}: more folds than the {fewest} `{label}` queries"
            f"{of_labelled(label)}; use --folds {fewest} or fewer (every fold tests at least "
            "one query of each label)"
        )


def _p(quantile: float) -> str:
    return f"P{quantile * 100:g}"


def _lower_hitl_quantile(ambiguous: int, needed: int) -> str:
    """The highest --hitl-quantile of the seed's P50–P70 band these ambiguous labels support."""
    supported = [q for q in HITL_QUANTILES if minimum_labels(q) <= ambiguous]
    more = f"label at least {needed - ambiguous} more"
    if not supported:
        lowest = HITL_QUANTILES[0]
        return f"{more} (--hitl-quantile {lowest:g} needs {minimum_labels(lowest)})"
    q = supported[-1]
    return f"use --hitl-quantile {q:g} (needs {minimum_labels(q)}) or {more}"


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
