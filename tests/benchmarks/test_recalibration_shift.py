"""benchmarks/recalibration_shift.py cannot rot: its subsampling by hand, and its core on one
collection, one rate, one seed — the subsample's shipped decisions against the subsample scored
on its own, the shipped map's ECE against 10 equal-width bins written out in numpy, its Brier
score by hand — and the tables of docs/recalibrate.md are the recorded results."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks import recalibration_shift as bench
from duckscore.api.functions import run

from ..helpers import ROOT

pytestmark = pytest.mark.slow

# 8 good, 4 bad: a rate of 2/3
OUTCOME = pd.Series(
    [1.0] * 8 + [0.0] * 4, index=[f"g{i}" for i in range(8)] + [f"b{i}" for i in range(4)]
)


@pytest.mark.parametrize(
    ("rate", "good", "bad"),
    [(0.8, 8, 2), (0.5, 4, 4), (0.3, 2, 4)],  # 8·0.2/0.8 = 2; 4·0.5/0.5 = 4; 4·0.3/0.7 = 1.7 → 2
)
def test_a_subsample_drops_the_side_in_excess(rate: float, good: int, bad: int) -> None:
    ids = bench.subsample(OUTCOME, rate, seed=0)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert (OUTCOME.loc[ids] == 1.0).sum() == good and (OUTCOME.loc[ids] == 0.0).sum() == bad
    assert bench.subsample(OUTCOME, rate, seed=0) == ids  # seeded
    kept = {tuple(bench.subsample(OUTCOME, rate, seed)) for seed in range(10)}
    assert len(kept) > 1  # drawn at random


def ece(p: np.ndarray, y: np.ndarray) -> float:
    bins = np.minimum((p * 10).astype(int), 9)
    return float(sum(abs(p[bins == b].sum() - y[bins == b].sum()) for b in range(10)) / len(p))


def test_one_subsample_end_to_end() -> None:
    results = bench.main(
        ["--collections", "cisi", "--rates", "0.8", "--seeds", "1", "--workers", "1"],
        echo=lambda _: None,
    )
    [row] = results["subsamples"]
    collection = bench.load("cisi")
    ids = bench.subsample(collection.outcome, 0.8, 0)
    assert row["n"] == len(ids) == 56 and row["good"] == 45  # CISI's 45 good of 76 judged
    log = collection.log[collection.log["query_id"].isin(ids)]
    alone = run(log, explain=False).queries.df().set_index("query_id").loc[ids]
    assert np.array_equal(alone["p_good"], collection.shipped.loc[ids, "p_good"])
    y = collection.outcome.loc[ids].to_numpy()
    assert row["shipped"] == pytest.approx(ece(alone["p_good"].to_numpy(), y), abs=1e-12)
    brier = sum((p - o) ** 2 for p, o in zip(alone["p_good"], y, strict=True)) / len(y)
    assert row["shipped_brier"] == pytest.approx(brier, abs=1e-12)
    for method in bench.methods():
        assert 0.0 <= row[method] <= 1.0
        if row[f"{method}_refused"]:
            assert row[method] == row["shipped"] and row[f"{method}_chosen"] == "refused"
    assert row["auto_chosen"] in ("keep", "prior", "quantile")
    assert row["labels_40_chosen"] in (
        "shipped",
        "label_free",
        "prior",
        "quantile",
        "prior_labels",
        "refit",
        "intercept",
        "rate",
        "refused",
    )
    assert 0.0 <= row["labels_40_held_out"] <= 1.0  # on the 16 queries the labels did not see
    assert row["shift"] in ("none", "rate", "scale", "inseparable", "other")
    assert 0 < row["noise_mean"] <= row["noise_p95"]
    [summary] = results["summary"]
    assert summary["subsamples"] == 1 and summary["shifts"] == {row["shift"]: 1}
    assert summary["labels_40"]["at_most_bar"] == int(row["labels_40"] <= 0.10)
    for method in ("shipped", *bench.methods()):
        assert 0.0 <= row[f"{method}_brier"] <= 1.0
        assert summary[method]["brier"] == row[f"{method}_brier"]


def test_the_docs_tables_are_the_recorded_results() -> None:
    recorded = json.loads(
        (ROOT / "benchmarks/results/recalibration_shift.json").read_text(encoding="utf-8")
    )
    page = (ROOT / "docs/recalibrate.md").read_text(encoding="utf-8").splitlines()
    for line in bench.markdown(recorded["summary"]).splitlines():
        assert not line or line in page, f"docs/recalibrate.md lacks the recorded row {line}"
