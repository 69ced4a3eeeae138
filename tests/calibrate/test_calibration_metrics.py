"""Calibration metrics (sql/calibrate/*.sql via duckscore.calibration_metrics) against oracles
that are not the SQL: scikit-learn (AUROC, average precision, Brier), numpy (ECE, reliability
bins, risk–coverage, the bootstrap from its written specification), the textbook Wilson formula
and scipy's binomtest(...).proportion_ci(method='wilson')."""

from __future__ import annotations

import json
import math
import warnings

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, norm
from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

from duckscore.calibrate.calibration_metrics import compute_metrics
from duckscore.core.errors import InputError, TemplateError

TOL = 1e-12
SCIPY_Z = float(norm.ppf(0.975))  # scipy's wilson interval uses the exact quantile, not 1.96


def _con(frame: pd.DataFrame, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"threads": threads} if threads else {})
    con.execute("CREATE TABLE predictions AS SELECT * FROM frame")
    return con


def _metrics(frame: pd.DataFrame, threads: int | None = None, **kwargs) -> dict:
    con = _con(frame, threads)
    try:
        return compute_metrics(con, **kwargs)
    finally:
        con.close()


def _frame(scores, outcomes, levels=None) -> pd.DataFrame:
    data = {
        "query_id": [f"q{i:05d}" for i in range(len(scores))],
        "score": np.asarray(scores, dtype=float),
        "outcome": np.asarray(outcomes, dtype=bool),
    }
    if levels is not None:
        data["level"] = levels
    return pd.DataFrame(data)


def _random(seed: int, n: int, grid: int | None = 20) -> tuple[np.ndarray, np.ndarray]:
    """Scores on a coarse grid (many ties), outcomes drawn with probability ~ score."""
    rng = np.random.default_rng(seed)
    scores = rng.random(n)
    if grid:
        scores = np.round(scores * grid) / grid
    outcomes = rng.random(n) < 0.15 + 0.7 * scores
    return scores, outcomes


# -- oracles ------------------------------------------------------------------------------------


def wilson_textbook(k: int, n: int, z: float) -> tuple[float, float]:
    """Wilson (1927): (p̂ + z²/2n ± z·sqrt(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)."""
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


def ece_numpy(scores: np.ndarray, outcomes: np.ndarray, bins: int):
    """ECE with the documented edge rule: bin k = min(floor(s·bins), bins − 1)."""
    index = np.minimum(np.floor(scores * bins).astype(int), bins - 1)
    rows, ece = [], 0.0
    for k in range(bins):
        mask = index == k
        count = int(mask.sum())
        if count:
            conf, acc = scores[mask].mean(), outcomes[mask].mean()
            ece += count / len(scores) * abs(acc - conf)
            rows.append((k, count, conf, acc))
        else:
            rows.append((k, 0, None, None))
    return ece, rows


def risk_coverage_numpy(scores: np.ndarray, outcomes: np.ndarray):
    points = []
    for t in np.unique(scores)[::-1]:
        kept = scores >= t
        points.append((t, kept.mean(), 1 - outcomes[kept].mean()))
    return points


def lowbias32(x: int) -> int:
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def bootstrap_numpy(frame: pd.DataFrame, resamples: int, seed: int) -> tuple[float, float, int]:
    """The specification in sql/calibrate/bootstrap.sql, in plain Python + sklearn."""
    ordered = frame.sort_values("query_id")
    scores, outcomes = ordered["score"].to_numpy(), ordered["outcome"].to_numpy().astype(int)
    n = len(ordered)
    values = []
    for b in range(resamples):
        stream = lowbias32(seed ^ lowbias32(b))
        picks = [lowbias32(stream ^ i) % n for i in range(n)]
        y = outcomes[picks]
        if 0 < y.sum() < n:
            values.append(roc_auc_score(y, scores[picks]))
    return float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975)), len(values)


# -- agreement with the oracles -----------------------------------------------------------------


def _check_against_oracles(scores, outcomes, bins=10) -> dict:
    m = _metrics(_frame(scores, outcomes), bootstrap=0, bins=bins, z=SCIPY_Z)
    y = outcomes.astype(int)
    assert m["n"] == len(y) and m["n_positive"] == int(y.sum())
    if 0 < y.sum() < len(y):
        assert m["auroc"] == pytest.approx(roc_auc_score(y, scores), abs=TOL)
    else:
        assert m["auroc"] is None
    if y.sum() > 0:
        assert m["average_precision"] == pytest.approx(average_precision_score(y, scores), abs=TOL)
    else:
        assert m["average_precision"] is None
    assert m["brier"] == pytest.approx(brier_score_loss(y, scores), abs=TOL)
    ece, rows = ece_numpy(scores, y, bins)
    assert m["ece"] == pytest.approx(ece, abs=TOL)
    assert len(m["bins"]) == bins
    for got, (k, count, conf, acc) in zip(m["bins"], rows):
        assert (got["bin"], got["n"]) == (k, count)
        assert got["lower_edge"] == pytest.approx(k / bins) and got["upper_edge"] == pytest.approx(
            (k + 1) / bins
        )
        if count:
            assert got["mean_score"] == pytest.approx(conf, abs=TOL)
            assert got["accuracy"] == pytest.approx(acc, abs=TOL)
            ci = binomtest(got["n_correct"], count).proportion_ci(method="wilson")
            assert got["accuracy_wilson_lower"] == pytest.approx(ci.low, abs=TOL)
            assert got["accuracy_wilson_upper"] == pytest.approx(ci.high, abs=TOL)
        else:
            assert got["mean_score"] is got["accuracy"] is got["accuracy_wilson_lower"] is None
    curve = risk_coverage_numpy(scores, y)
    assert len(m["risk_coverage"]) == len(curve)
    for got, (t, coverage, risk) in zip(m["risk_coverage"], curve):
        assert got["threshold"] == t
        assert got["coverage"] == pytest.approx(coverage, abs=TOL)
        assert got["risk"] == pytest.approx(risk, abs=TOL)
    return m


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("n", "grid"), [(2, 4), (37, 5), (250, 20), (400, None)])
def test_agrees_with_sklearn_and_numpy(seed: int, n: int, grid: int | None) -> None:
    scores, outcomes = _random(seed, n, grid)
    _check_against_oracles(scores, outcomes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 8), st.booleans()), min_size=1, max_size=40),
    st.integers(1, 12),
)
def test_hypothesis_ties_and_edges(pairs: list[tuple[int, bool]], bins: int) -> None:
    # scores k/8 land exactly on bin edges for bins = 2, 4, 8: the documented rule decides
    scores = np.array([k / 8 for k, _ in pairs])
    outcomes = np.array([o for _, o in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check_against_oracles(scores, outcomes, bins=bins)


def test_bin_edges_lower_edge_belongs_to_the_bin_and_one_to_the_last() -> None:
    m = _metrics(_frame([0.0, 0.25, 0.5, 0.75, 1.0], [1, 0, 1, 0, 1]), bins=4, bootstrap=0)
    assert [b["n"] for b in m["bins"]] == [1, 1, 1, 2]


def test_all_one_class_and_single_row() -> None:
    positives = _metrics(_frame([0.2, 0.5, 0.9], [1, 1, 1]), bootstrap=50)
    assert positives["auroc"] is None and positives["auroc_ci"]["lower"] is None
    assert positives["auroc_ci"]["valid_resamples"] == 0
    assert (
        positives["average_precision"] == average_precision_score([1, 1, 1], [0.2, 0.5, 0.9]) == 1.0
    )
    assert positives["brier"] == pytest.approx(
        brier_score_loss([1, 1, 1], [0.2, 0.5, 0.9]), abs=TOL
    )
    negatives = _metrics(_frame([0.2, 0.5, 0.9], [0, 0, 0]), bootstrap=50)
    assert negatives["auroc"] is None and negatives["average_precision"] is None
    assert [p["risk"] for p in negatives["risk_coverage"]] == [1.0, 1.0, 1.0]
    single = _metrics(_frame([0.7], [1]), bootstrap=20)
    assert single["n"] == 1 and single["auroc"] is None and single["auroc_ci"]["upper"] is None
    assert single["brier"] == pytest.approx(0.09, abs=TOL)
    assert single["ece"] == pytest.approx(0.3, abs=TOL)
    assert single["risk_coverage"] == [
        {"threshold": 0.7, "kept": 1, "errors": 0, "coverage": 1.0, "risk": 0.0}
    ]
    lo, hi = wilson_textbook(1, 1, 1.96)
    assert single["accuracy"] == {
        "value": 1.0,
        "wilson_lower": pytest.approx(lo, abs=TOL),
        "wilson_upper": pytest.approx(hi, abs=TOL),
    }


def test_scores_outside_the_unit_interval_rank_but_do_not_calibrate() -> None:
    rng = np.random.default_rng(5)
    logits = rng.normal(size=120).round(1) * 3
    outcomes = rng.random(120) < 1 / (1 + np.exp(-logits))
    m = _metrics(_frame(logits, outcomes), bootstrap=0)
    assert m["auroc"] == pytest.approx(roc_auc_score(outcomes, logits), abs=TOL)
    assert m["average_precision"] == pytest.approx(
        average_precision_score(outcomes, logits), abs=TOL
    )
    assert not m["scores_in_unit_interval"]
    assert m["brier"] is m["ece"] is m["bins"] is None


def test_levels_precision_with_wilson_intervals() -> None:
    scores, outcomes = _random(11, 300)
    levels = np.where(scores >= 0.7, "high", np.where(scores >= 0.4, "medium", "low"))
    m = _metrics(_frame(scores, outcomes, list(levels)), bootstrap=0, z=1.96)
    assert [row["level"] for row in m["levels"]] == ["high", "medium", "low"]
    for row in m["levels"]:
        mask = levels == row["level"]
        k, n = int(outcomes[mask].sum()), int(mask.sum())
        assert (row["n"], row["n_correct"]) == (n, k)
        assert row["precision"] == pytest.approx(k / n, abs=TOL)
        assert row["mean_score"] == pytest.approx(scores[mask].mean(), abs=TOL)
        lo, hi = wilson_textbook(k, n, 1.96)
        assert row["precision_wilson_lower"] == pytest.approx(lo, abs=TOL)
        assert row["precision_wilson_upper"] == pytest.approx(hi, abs=TOL)
    scipy_m = _metrics(_frame(scores, outcomes, list(levels)), bootstrap=0, z=SCIPY_Z)
    for row in scipy_m["levels"]:
        ci = binomtest(row["n_correct"], row["n"]).proportion_ci(method="wilson")
        assert (row["precision_wilson_lower"], row["precision_wilson_upper"]) == (
            pytest.approx(ci.low, abs=TOL),
            pytest.approx(ci.high, abs=TOL),
        )
    assert _metrics(_frame(scores, outcomes), bootstrap=0)["levels"] is None


# -- bootstrap ----------------------------------------------------------------------------------


def test_bootstrap_matches_its_specification() -> None:
    scores, outcomes = _random(3, 60, grid=10)
    frame = _frame(scores, outcomes)
    m = _metrics(frame, bootstrap=200, seed=12345)
    lower, upper, valid = bootstrap_numpy(frame, 200, 12345)
    assert m["auroc_ci"]["valid_resamples"] == valid and m["auroc_ci"]["resamples"] == 200
    assert m["auroc_ci"]["lower"] == pytest.approx(lower, abs=TOL)
    assert m["auroc_ci"]["upper"] == pytest.approx(upper, abs=TOL)


def test_bootstrap_is_reproducible_thread_independent_and_seeded() -> None:
    scores, outcomes = _random(8, 500, grid=None)
    frame = _frame(scores, outcomes)
    one = _metrics(frame, threads=1, bootstrap=1000, seed=7)
    two = _metrics(frame, threads=2, bootstrap=1000, seed=7)
    again = _metrics(frame.sample(frac=1.0, random_state=1), threads=2, bootstrap=1000, seed=7)
    other = _metrics(frame, threads=2, bootstrap=1000, seed=8)
    ci = one["auroc_ci"]
    assert ci["valid_resamples"] == 1000
    assert ci["lower"] < one["auroc"] < ci["upper"]
    assert (
        json.dumps(one) == json.dumps(two) == json.dumps(again)
    )  # every figure, to the last digit
    assert (other["auroc_ci"]["lower"], other["auroc_ci"]["upper"]) != (ci["lower"], ci["upper"])
    assert other["auroc"] == one["auroc"]


def test_result_is_plain_json() -> None:
    scores, outcomes = _random(2, 50)
    m = _metrics(_frame(scores, outcomes, ["a"] * 25 + [None] * 25), bootstrap=10)
    assert json.loads(json.dumps(m)) == m
    assert {row["level"] for row in m["levels"]} == {"a", None}


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (pd.DataFrame({"query_id": [1], "score": [0.5]}), "missing column 'outcome'"),
        (
            pd.DataFrame({"query_id": [1, 2], "score": [0.5, 0.1], "outcome": [1, 2]}),
            "outcome is not 0/1",
        ),
        (
            pd.DataFrame({"query_id": [1, 1], "score": [0.5, 0.1], "outcome": [1, 0]}),
            "query_id is repeated",
        ),
        (
            pd.DataFrame({"query_id": [1, 2], "score": [0.5, float("nan")], "outcome": [1, 0]}),
            "score is NULL",
        ),
    ],
)
def test_bad_input_is_named(frame: pd.DataFrame, message: str) -> None:
    with pytest.raises(InputError, match=message):
        _metrics(frame)


@pytest.mark.parametrize("kwargs", [{"bins": 0}, {"bootstrap": -1}, {"seed": -1}, {"z": 0.0}])
def test_bad_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(TemplateError):
        _metrics(_frame([0.5, 0.6], [1, 0]), **kwargs)
