"""`duckscore recalibrate --adapt auto`, the default (issue 51): the shift diagnosed first, and
only what it supports adapted. Checked against the shipped policy file itself (a kept policy's
parameters), a log whose rate of good answers was moved by construction (SciFact's queries drawn
again by their SciFact judgments, so the true rate is known) with Saerens et al.'s posterior
formula in numpy, and, with labels, each candidate map's cross-validated Brier score
recomputed with scipy (and the labels' Wilson interval by hand)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner, Result
from scipy import optimize

from duckscore.calibrate.recalibration import PRIOR_STRENGTHS, stratified_folds
from duckscore.cli import cli
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.resources import policies_dir

from ..helpers import FIXTURES, SCIFACT
from .rate_oracle import likelihood_rate

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("recalibrate_auto")]

CISI_LOG = FIXTURES / "cisi" / "retrieval_log.parquet"
SCIFACT_LOG = SCIFACT / "retrieval_log.parquet"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def ok(*args: str) -> Result:
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    return result


def printed(result: Result) -> dict[str, str]:
    return dict(line.split(None, 1) for line in result.stdout.splitlines())


def shipped() -> dict:
    return yaml.safe_load((policies_dir("score") / f"{DEFAULT_POLICY}.yaml").read_text())


def logit(p: np.ndarray | float) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-12, 1 - 1e-12)
    return np.log(p / (1 - p))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recalibrate_auto")


@pytest.mark.parametrize(
    ("log", "shift"), [(SCIFACT_LOG, "none"), (CISI_LOG, "scale")], ids=["scifact", "cisi"]
)
def test_auto_keeps_the_shipped_map_where_the_log_does_not_refute_it(
    log: Path, shift: str, work: Path
) -> None:
    """SciFact, the calibration's own log: no shift. CISI: its scores moved, and any rate fits
    a moved scale, the shipped map's (mean p_good 0.27) too. Both keep the policy as it is."""
    out = work / f"kept_{log.parent.name}.yaml"
    result = ok("recalibrate", "--policy", DEFAULT_POLICY, "--log", str(log), "--out", str(out))
    document, packaged = yaml.safe_load(out.read_text()), shipped()
    assert document["parameters"] == packaged["parameters"]
    # the version still names the recalibration: the old parameters' hash
    assert document["score_policy_version"] == f"{DEFAULT_POLICY}_recal_d92cc30f"
    report = document["metadata"]["recalibration"]
    assert report["adapt"] == "auto" and report["chosen"]["adapt"] == "keep"
    assert report["diagnosis"]["shift"] == shift and "prior_shift" not in report
    assert report["thresholds"]["moved_by_quantile"] is False
    lines = printed(result)
    assert lines["chosen"].startswith("keep  (") and lines["chosen"].endswith(")")
    assert lines["diagnosis"].startswith({"none": "no shift", "scale": "a scale shift"}[shift])
    # the packaged policy records its top-2 ratios too: the diagnosis compares them
    assert "the top-2 ratio's KS" in lines["diagnosis"]
    assert lines["assumes"].startswith("the shipped map and thresholds still hold on this log")
    # the distribution the new policy records is the log's, ratios included
    queries = pd.read_parquet(ok_run(log, out, work))
    recorded = document["metadata"]["score_distribution"]
    levels = np.linspace(0, 1, 101)
    for key, column in (
        ("best_score_quantiles", "best_overall_score"),
        ("top2_ratio_quantiles", "top2_ratio"),
    ):
        expected = np.quantile(queries[column].fillna(0.0), levels)
        np.testing.assert_allclose(recorded[key], expected, rtol=1e-9, atol=1e-12)


def ok_run(log: Path, policy: Path, work: Path) -> Path:
    out = work / f"run_{policy.stem}"
    ok("run", "--log", str(log), "--policy", str(policy), "--out", str(out))
    return out / "queries.parquet"


@pytest.fixture(scope="module")
def scifact_labels(work: Path) -> pd.DataFrame:
    out = work / "scifact_labels.parquet"
    ok("labels", "--run", str(SCIFACT / "reference_rrf_k60.parquet"), "--qrels",
       str(SCIFACT / "qrels.parquet"), "--out", str(out))  # fmt: skip
    return pd.read_parquet(out)


RATE = 0.25


@pytest.fixture(scope="module")
def rate_shifted(work: Path, scifact_labels: pd.DataFrame) -> tuple[Path, Path, pd.DataFrame]:
    """1,000 of SciFact's queries drawn again (new query ids) with a good one RATE/0.54 as likely
    as before and another 0.75/0.46: the same queries, so the same scores given a label, at a
    rate of good answers moved to about RATE — a pure rate shift, its true rate known from the
    judgments. The policy: the packaged default, as if its calibration had held 3,000 queries
    of SciFact's distribution (a reference of 300 cannot tell a rate from a scale: the noise of
    its KS test is 0.09)."""
    log = pd.read_parquet(SCIFACT_LOG)
    good = (scifact_labels["label"] == "good").to_numpy()
    weight = np.where(good, RATE / good.mean(), (1 - RATE) / (1 - good.mean()))
    rng = np.random.default_rng(0)
    picked = rng.choice(len(scifact_labels), 1000, p=weight / weight.sum())
    ids = scifact_labels["query_id"].to_numpy()[picked]
    by_id = dict(tuple(log.groupby("query_id")))
    new_ids = [f"{q}~{k}" for k, q in enumerate(ids)]
    path = work / "rate_shifted.parquet"
    pd.concat([by_id[q].assign(query_id=n) for q, n in zip(ids, new_ids, strict=True)]).to_parquet(
        path
    )
    labels = pd.DataFrame({"query_id": new_ids, "good": good[picked]})
    document = shipped()
    document["metadata"]["score_distribution"]["queries"] = 3000
    policy = work / "large_calibration.yaml"
    policy.write_text(yaml.safe_dump(document, sort_keys=False))
    return path, policy, labels


def test_a_moved_rate_moves_the_prior_and_keeps_the_thresholds(
    work: Path, rate_shifted: tuple[Path, Path, pd.DataFrame]
) -> None:
    log, policy, labels = rate_shifted
    true_rate = float(labels["good"].mean())
    out = work / "rate.yaml"
    result = ok("recalibrate", "--policy", str(policy), "--log", str(log), "--out", str(out))
    document = yaml.safe_load(out.read_text())
    report = document["metadata"]["recalibration"]
    diagnosis = report["diagnosis"]
    assert diagnosis["shift"] == "rate" and report["chosen"]["adapt"] == "prior"
    low, high = diagnosis["rates_scale_held"]
    assert low <= true_rate <= high
    estimate = diagnosis["rate_estimate"]
    assert estimate == pytest.approx(true_rate, abs=0.05)
    # the prior moved to the diagnosis' estimate (not EM's), from the rate the map implies
    assert report["prior_shift"] == pytest.approx(
        logit(estimate) - logit(diagnosis["reference_rate"]), abs=1e-9
    )
    for name in ("T_low", "T_high", "R_hitl"):  # the scale held: so do the thresholds
        assert document["parameters"][name] == shipped()["parameters"][name]
    # each query's new p_good is Saerens et al.'s posterior at the new rate (eq. 2.4)
    old = pd.read_parquet(ok_run(log, policy, work))
    new = pd.read_parquet(ok_run(log, out, work))
    p, pi = old["p_good"].to_numpy(), diagnosis["reference_rate"]
    up, down = estimate / pi, (1 - estimate) / (1 - pi)
    np.testing.assert_allclose(new["p_good"], up * p / (up * p + down * (1 - p)), atol=1e-6)
    # and it is closer to the judgments than the shipped map was
    y = old[["query_id"]].merge(labels, on="query_id")["good"].to_numpy(float)
    assert np.mean((new["p_good"] - y) ** 2) < np.mean((p - y) ** 2)
    assert abs(new["p_good"].mean() - true_rate) < abs(p.mean() - true_rate)
    assumes = printed(result)["assumes"]
    assert (
        f"moved, to {100 * estimate:.0f} % (--adapt auto, by prior: the diagnosis' estimate"
        in assumes
    )
    assert "T_low and T_high as calibrated (the score scale held)" in assumes


# -- labels -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def forty(work: Path) -> pd.DataFrame:
    """40 of CISI's judged queries, labelled from its reference run: a draw on which the refit's
    held-out Brier score beats the rate's by between 1 and 1.96 standard errors."""
    out = work / "cisi_labels.parquet"
    cisi = FIXTURES / "cisi"
    ok("labels", "--run", str(cisi / "reference_rrf_k60.parquet"), "--qrels",
       str(cisi / "qrels.parquet"), "--out", str(out))  # fmt: skip
    labels = pd.read_parquet(out).sample(n=40, random_state=10)
    labels.to_parquet(work / "forty.parquet")
    return labels


def penalised_fit(z: np.ndarray, y: np.ndarray, strength: float) -> tuple[float, float]:
    """argmin of the log-loss of σ(a + b·z) + strength/2·(a² + (b − 1)²), b ≥ 0 (a negative b
    refitted with b = 0, its penalty then strength/2·a²), by scipy."""

    def loss(theta: np.ndarray) -> float:
        eta = theta[0] + theta[1] * z
        penalty = strength / 2 * (theta[0] ** 2 + (theta[1] - 1) ** 2)
        return float(np.sum(np.logaddexp(0, eta) - y * eta) + penalty)

    a, b = optimize.minimize(loss, np.array([0.0, 1.0]), method="BFGS", options={"gtol": 1e-10}).x
    if b >= 0:
        return float(a), float(b)
    flat = optimize.minimize_scalar(
        lambda c: float(np.sum(np.logaddexp(0, c) - y * c) + strength / 2 * c**2)
    )
    return float(flat.x), 0.0


def brier_held_out(z: np.ndarray, y: np.ndarray, folds: int, fit) -> np.ndarray:
    """Each label's p from `fit` on the other folds (the code's fold dealing, seed 0)."""
    fold_of = stratified_folds(y, folds, 0)
    p = np.empty(len(y))
    for k in range(folds):
        test = fold_of == k
        a, b = fit(z[~test], y[~test])
        p[test] = 1 / (1 + np.exp(-(a + b * z[test])))
    return p


def refit_whole(folds: int):
    """The refit as a procedure: its prior strength of lowest held-out Brier on the training
    part's own folds (a tie keeps the stronger), then fitted on all of it."""

    def fit(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        inner = min(folds, int(min(y.sum(), len(y) - y.sum())))
        scores = {
            s: float(
                np.mean(
                    (brier_held_out(z, y, inner, lambda zz, yy, s=s: penalised_fit(zz, yy, s)) - y)
                    ** 2
                )
            )
            for s in PRIOR_STRENGTHS
        }
        best = min(scores.values())
        return penalised_fit(z, y, max(s for s, v in scores.items() if v <= best + 1e-12))

    return fit


def intercept_only(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """σ(a + z) by maximum likelihood: the root of Σ σ(a + z) − Σ y."""
    return optimize.brentq(
        lambda a: float(np.sum(1 / (1 + np.exp(-(a + z)))) - y.sum()), -30, 30
    ), 1.0


def rate_only(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """σ(a), a the log-odds of the labels' rate (kept within [1/(n+1), n/(n+1)])."""
    rate = min(max(y.mean(), 1 / (len(y) + 1)), len(y) / (len(y) + 1))
    return math.log(rate / (1 - rate)), 0.0


def test_labels_choose_the_map_of_lowest_cross_validated_brier_or_their_rate(
    work: Path, forty: pd.DataFrame
) -> None:
    out = work / "labelled.yaml"
    result = ok(
        "recalibrate", "--policy", DEFAULT_POLICY, "--log", str(CISI_LOG), "--labels",
        str(work / "forty.parquet"), "--out", str(out),
    )  # fmt: skip
    report = yaml.safe_load(out.read_text())["metadata"]["recalibration"]
    labels = report["labels"]
    # auto kept the shipped map on CISI: it is also the label-free map, so not a candidate twice;
    # beside it the map moved by quantile — not the prior: EM's rate is degenerate here
    assert report["chosen"]["adapt"] == "keep" and report["em_base_rate"] < 0.02
    assert list(labels["cv_brier_by_candidate"]) == [
        "shipped", "quantile", "refit", "intercept", "rate"
    ]  # fmt: skip
    assert labels["rate_with_the_log"] is None  # its scale moved: the log is no evidence
    shipped_run = pd.read_parquet(ok_run(CISI_LOG, Path(DEFAULT_POLICY), work))
    rated = forty.merge(shipped_run, on="query_id").sort_values("query_id")  # the folds' order
    y = (rated["label"] == "good").to_numpy(float)
    p = rated["p_good"].to_numpy()
    folds = min(5, int(min(y.sum(), len(y) - y.sum())))
    by_quantile = work / "by_quantile.yaml"
    ok("recalibrate", "--policy", DEFAULT_POLICY, "--log", str(CISI_LOG), "--adapt", "quantile",
       "--out", str(by_quantile))  # fmt: skip
    moved = forty.merge(pd.read_parquet(ok_run(CISI_LOG, by_quantile, work)), on="query_id")
    held = {  # each label's p_good from a map that did not see it
        "shipped": p,  # not fitted on the labels: already out of sample
        "quantile": moved.sort_values("query_id")["p_good"].to_numpy(),
        "refit": brier_held_out(logit(p), y, folds, refit_whole(folds)),
        "intercept": brier_held_out(logit(p), y, folds, intercept_only),
        "rate": brier_held_out(logit(p), y, folds, rate_only),
    }
    expected = {name: np.mean((q - y) ** 2) for name, q in held.items()}
    assert labels["cv_brier_by_candidate"] == pytest.approx(expected, abs=1e-5)
    # the lowest; but the log is no evidence here, so the labels' rate unless the lowest beats it
    # at the 95 % level (1.96 standard errors of the paired difference)
    lowest = min(expected, key=expected.__getitem__)
    gap = (held["rate"] - y) ** 2 - (held[lowest] - y) ** 2
    z = gap.mean() / (gap.std(ddof=1) / math.sqrt(len(y)))
    assert lowest != "rate" and 1.0 < z <= 1.96  # these forty: one standard error would not do
    assert labels["chosen"] == "rate"
    lines = printed(result)
    assert lines["p_good_by_labels"].startswith(f"{labels['chosen']}  (cross-validated Brier")
    # the labels' rate with Wilson's 95 % interval, by hand
    k, n, z = int(y.sum()), len(y), 1.96
    centre, half = (
        (k / n + z * z / (2 * n)),
        z * math.sqrt(k / n * (1 - k / n) / n + z * z / (4 * n * n)),
    )
    wilson = [(centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)]
    assert labels["rate_interval_95"] == pytest.approx(wilson, abs=1e-9)
    assert (
        f"{k} good of {n} labels, 95 % interval {wilson[0]:.2f}–{wilson[1]:.2f}"
        in lines["base_rate"]
    )


@pytest.fixture(scope="module")
def thirty_percent(work: Path, scifact_labels: pd.DataFrame) -> tuple[Path, pd.DataFrame]:
    """SciFact's log restricted to every query judged not good and as many good ones as a rate
    of 0.3 needs (a rate moved, the scale not; the 300-query reference cannot tell which), and
    40 of its queries' labels."""
    good = scifact_labels[scifact_labels["label"] == "good"]["query_id"]
    other = scifact_labels[scifact_labels["label"] != "good"]["query_id"]
    rng = np.random.default_rng(7)
    kept = set(other) | set(rng.choice(good, round(len(other) * 3 / 7), replace=False))
    log = pd.read_parquet(SCIFACT_LOG)
    path = work / "thirty_percent.parquet"
    log[log["query_id"].isin(kept)].to_parquet(path)
    labels = scifact_labels[scifact_labels["query_id"].isin(kept)].sample(n=40, random_state=2)
    labels.to_parquet(work / "thirty_percent_labels.parquet")
    return path, labels


def saerens_em(p: np.ndarray, fitted: float) -> float:
    """The rate whose posteriors, re-weighted from `fitted` to it, average to it (eq. 2.9)."""
    rate = fitted
    for _ in range(100_000):
        up, down = rate / fitted, (1 - rate) / (1 - fitted)
        updated = float(np.mean(up * p / (up * p + down * (1 - p))))
        if abs(updated - rate) < 1e-13:
            break
        rate = updated
    return updated


def moved_prior(p: np.ndarray, fitted: float, rate: float) -> np.ndarray:
    """Saerens et al.'s posterior at `rate` of a posterior p at `fitted` (eq. 2.4)."""
    up, down = rate / fitted, (1 - rate) / (1 - fitted)
    return up * p / (up * p + down * (1 - p))


def test_labels_settle_what_the_diagnosis_cannot(
    work: Path, thirty_percent: tuple[Path, pd.DataFrame]
) -> None:
    log, labels = thirty_percent
    out = work / "settled.yaml"
    result = ok("recalibrate", "--policy", DEFAULT_POLICY, "--log", str(log), "--labels",
                str(work / "thirty_percent_labels.parquet"), "--out", str(out))  # fmt: skip
    document = yaml.safe_load(out.read_text())
    report = document["metadata"]["recalibration"]
    assert report["chosen"]["adapt"] == "keep"  # the label-free default kept the map …
    by_labels = report["labels"]
    # … and the labels weigh both label-free explanations beside it: the rate moved, the scale
    # … and the rate of the labels and the log together, a map moved to it
    assert list(by_labels["cv_brier_by_candidate"]) == [
        "shipped", "prior", "quantile", "prior_labels", "refit", "intercept", "rate"
    ]  # fmt: skip
    old = pd.read_parquet(ok_run(log, Path(DEFAULT_POLICY), work))
    fitted = shipped()["metadata"]["score_distribution"]["base_rate"]
    rate = saerens_em(old["p_good"].to_numpy(), fitted)
    assert report["em_base_rate"] == pytest.approx(rate, abs=1e-8)
    rated = labels.merge(old, on="query_id").sort_values("query_id")  # the folds' order
    y = (rated["label"] == "good").to_numpy(float)
    p_labelled = rated["p_good"].to_numpy()
    assert by_labels["cv_brier_by_candidate"]["prior"] == pytest.approx(
        np.mean((moved_prior(p_labelled, fitted, rate) - y) ** 2), abs=1e-6
    )
    unlabelled = old[~old["query_id"].isin(labels["query_id"])]["p_good"].to_numpy()
    together = likelihood_rate(unlabelled, y, fitted)
    assert by_labels["rate_with_the_log"] == pytest.approx(together, abs=1e-6)
    folds = min(5, int(min(y.sum(), len(y) - y.sum())))
    fold_of = stratified_folds(y, folds, 0)
    held_out = np.empty(len(y))
    for k in range(folds):  # each fold's rate from the log and the other folds' labels
        test = fold_of == k
        fold_rate = likelihood_rate(unlabelled, y[~test], fitted)
        held_out[test] = moved_prior(p_labelled[test], fitted, fold_rate)
    assert by_labels["cv_brier_by_candidate"]["prior_labels"] == pytest.approx(
        np.mean((held_out - y) ** 2), abs=1e-6
    )
    # on these 40 labels the map moved to that rate: its p_good, and T_low and R_hitl kept,
    # the scale held (T_high the labels' target precision sets)
    assert by_labels["chosen"] == "prior_labels"
    lines = printed(result)
    assert f"; with the log's unlabelled queries {together:.3f};" in lines["base_rate"]
    assert f"within one standard error of the lowest, the one whose mean p_good on the log is " \
        f"nearest {together:.3f})" in lines["p_good_by_labels"]  # fmt: skip
    assert "prior moved to the rate of them and the log's other queries" in lines["assumes"]
    new = pd.read_parquet(ok_run(log, out, work))
    expected = moved_prior(old["p_good"].to_numpy(), fitted, together)
    np.testing.assert_allclose(new["p_good"], expected, atol=1e-5)
    for name in ("T_low", "R_hitl"):
        assert document["parameters"][name] == shipped()["parameters"][name]
    assert not report["thresholds"]["moved_by_quantile"]


def test_an_explicit_adapt_is_only_refitted_by_the_labels(
    work: Path, thirty_percent: tuple[Path, pd.DataFrame]
) -> None:
    log, _ = thirty_percent
    out = work / "explicit.yaml"
    ok("recalibrate", "--policy", DEFAULT_POLICY, "--log", str(log), "--adapt", "prior",
       "--labels", str(work / "thirty_percent_labels.parquet"), "--out", str(out))  # fmt: skip
    by_labels = yaml.safe_load(out.read_text())["metadata"]["recalibration"]["labels"]
    assert list(by_labels["cv_brier_by_candidate"]) == [
        "shipped", "label_free", "refit", "intercept", "rate"
    ]  # fmt: skip
