"""`duckscore calibrate-answers` (seed 001's future improvement 3, issue 50): the non-negative
logistic fit against scikit-learn, the precision cuts by hand, and the command end to end on
fixtures/answer_labels, its written policy scored by `duckscore answers`, its held-out figures
recomputed with scikit-learn from predictions.csv."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner, Result
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score

from duckscore.answering.policy import load_answer_policy
from duckscore.calibrate.answer_fit import fit_non_negative, level_cuts, precision_cut, rescaled
from duckscore.cli import cli

from ..helpers import FIXTURES

LABELLED = FIXTURES / "answer_labels"
FACTORS = ["citation_quality", "answer_quality", "retrieval", "certainty"]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args], catch_exceptions=False)


def inputs(labels: Path = LABELLED / "labels.csv") -> list[str]:
    args = [f"--{n}={LABELLED / f'{n}.csv'}" for n in ("answers", "citations", "chunks", "events")]
    return [*args, f"--labels={labels}"]


def sklearn_fit(x: np.ndarray, y: np.ndarray) -> LogisticRegression:
    return LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000).fit(x, y)


def drawn(coefficients: list[float], seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((500, 4))
    z = coefficients[0] + x @ np.array(coefficients[1:])
    return x, (rng.random(500) < 1 / (1 + np.exp(-z))).astype(float)


def test_the_fit_is_scikit_learns_when_its_optimum_is_positive() -> None:
    x, y = drawn([-2.0, 1.5, 2.0, 0.8, 1.0], seed=1)
    reference = sklearn_fit(x, y)
    assert (reference.coef_ > 0).all()  # the unconstrained optimum is feasible
    fitted = fit_non_negative(x, y)
    assert fitted.coefficients == pytest.approx(reference.coef_[0], abs=1e-6)
    assert fitted.intercept == pytest.approx(reference.intercept_[0], abs=1e-6)


def test_an_anti_correlated_factor_gets_0_and_the_others_scikit_learns_without_it() -> None:
    x, y = drawn([-1.0, 2.0, -3.0, 1.0, 1.0], seed=2)
    assert sklearn_fit(x, y).coef_[0][1] < 0  # unconstrained, the second factor goes negative
    fitted = fit_non_negative(x, y)
    without = sklearn_fit(x[:, [0, 2, 3]], y)
    assert fitted.coefficients[1] == 0.0
    expected = [without.coef_[0][0], 0.0, without.coef_[0][1], without.coef_[0][2]]
    assert fitted.coefficients == pytest.approx(expected, abs=1e-6)
    assert fitted.intercept == pytest.approx(without.intercept_[0], abs=1e-6)


def test_weights_are_rescaled_to_the_base_sum() -> None:
    assert rescaled((1.0, 0.0, 2.0, 1.0), 10.0) == (2.5, 0.0, 5.0, 2.5)
    assert rescaled((1.0, 1.0, 1.0, 0.0), 10.0) == (3.3333, 3.3333, 3.3333, 0.0)
    assert rescaled((0.0, 0.0, 0.0, 0.0), 10.0) is None


def test_precision_cuts_by_hand() -> None:
    percentage = np.array([95.0, 90.0, 80.0, 80.0, 70.0, 60.0, 50.0])
    correct = np.array([1, 1, 1, 0, 1, 0, 0])
    # at or above 95: 1/1; 90: 2/2; 80: 3/4; 70: 4/5; 60: 4/6; 50: 4/7
    assert precision_cut(percentage, correct, 0.9) == 90.0
    assert precision_cut(percentage, correct, 0.75) == 70.0
    assert precision_cut(percentage, correct, 0.6) == 60.0
    assert precision_cut(percentage, np.zeros(7), 0.5) is None
    # the SQL compares round(percentage, 6): 74.9999999 and 75 are one cut
    assert precision_cut(np.array([75.0, 74.99999999]), np.array([0, 1]), 0.5) == 75.0


def test_a_cut_no_percentage_reaches_keeps_the_base_cut_and_says_so() -> None:
    percentage = np.array([90.0, 80.0, 70.0])
    (high, medium), notes = level_cuts(percentage, np.array([0, 1, 1]), (0.9, 0.6), (75.0, 50.0))
    assert (high, medium) == (75.0, 70.0)  # 70: 2/3 correct
    assert notes == [
        "high: no percentage has a share of 0.9 correct answers at or above it; the base cut 75 "
        "is kept"
    ]
    (high, medium), notes = level_cuts(percentage, np.array([0, 1, 0]), (0.9, 0.4), (75.0, 50.0))
    assert (high, medium) == (75.0, 75.0)  # medium's 80 (1/2) lowered to high's
    assert notes[-1] == "medium: its cut 80 is above high's; lowered to 75"


def held_out_oracle(predictions: pd.DataFrame, fold: int, column: str, level: str) -> dict:
    """A fold's figures recomputed by scikit-learn: the logistic map of the percentage fitted
    on the other folds' answers (unpenalised intercept, C = 1)."""
    train, test = predictions[predictions["fold"] != fold], predictions[predictions["fold"] == fold]
    train_x = (train["base_percentage"] if column == "base" else train["train_percentage"]) / 100
    model = sklearn_fit(train_x.to_numpy()[:, None], train["correct"])
    assert model.coef_[0][0] > 0  # so the non-negative map is the same
    test_x = (test["base_percentage"] if column == "base" else test["held_out_percentage"]) / 100
    p = model.predict_proba(test_x.to_numpy()[:, None])[:, 1]
    return {
        "auc": roc_auc_score(test["correct"], test_x),
        "brier": brier_score_loss(test["correct"], p),
        "log_loss": log_loss(test["correct"], p, labels=[False, True]),
        "level_accuracy": float(((test[level] == "high") == test["correct"]).mean()),
    }


@pytest.mark.slow
def test_the_command_fits_cross_validates_and_its_policy_scores(tmp_path: Path) -> None:
    out = tmp_path / "cal"
    result = run("calibrate-answers", *inputs(), "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    document = yaml.safe_load((out / "policy.yaml").read_text())
    version = document["answer_policy_version"]
    assert version.startswith("answer_v1_cal_") and document["parent_version"] == "answer_v1"
    assert report["adopted"]  # the fixture's labels follow citations and certainty
    weights = document["parameters"]["weights"]
    assert sum(weights.values()) == pytest.approx(10.0, abs=4e-4)
    assert weights["answer_quality"] == 0.0  # the fixture's labels favour short answers
    assert load_answer_policy(str(out / "policy.yaml")).version == version

    # the written policy scores through `duckscore answers`: the percentage is 100 × Σ w·f / Σ w
    # of the base run's factors, and the level follows the written cuts
    base_out, cal_out = tmp_path / "base", tmp_path / "scored"
    assert run("answers", *inputs()[:4], "--out", str(base_out)).exit_code == 0
    scored = run(
        "answers", *inputs()[:4], "--policy", str(out / "policy.yaml"), "--out", str(cal_out)
    )
    assert scored.exit_code == 0, scored.output
    base = pd.read_parquet(base_out / "answers.parquet").set_index("answer_id")
    cal = pd.read_parquet(cal_out / "answers.parquet").set_index("answer_id")
    expected = 100 * sum(weights[f] * base[f] for f in FACTORS) / sum(weights.values())
    assert np.allclose(cal["percentage"], expected, atol=1e-9)
    assert (cal["answer_policy_version"] == version).all()

    predictions = pd.read_csv(out / "predictions.csv")
    assert predictions.groupby("query_id")["fold"].nunique().max() == 1  # a query in one fold
    assert sorted(predictions["fold"].unique()) == [0, 1, 2, 3, 4]
    assert np.allclose(predictions["percentage"], cal.loc[predictions["answer_id"], "percentage"])

    # the cuts: the lowest percentage with the target share of correct answers at or above it
    rounded = predictions["percentage"].round(6)
    levels = document["parameters"]["levels"]
    for cut, target in ((levels["high_at_least"], 0.9), (levels["medium_at_least"], 0.6)):
        share = {p: predictions["correct"][rounded >= p].mean() for p in rounded.unique()}
        assert cut == min(p for p, s in share.items() if s >= target)

    # held-out figures, recomputed by scikit-learn from each fold's training answers
    for fold in report["folds"]:
        k = fold["fold"]
        train_weights = fold["weights"]
        predictions["train_percentage"] = (
            100
            * sum(
                train_weights[f] * base.loc[predictions["answer_id"], f].to_numpy() for f in FACTORS
            )
            / sum(train_weights.values())
        )
        for name, level in (("base", "base_level"), ("fitted", "held_out_level")):
            oracle = held_out_oracle(predictions, k, name, level)
            assert fold[name] == pytest.approx(oracle, abs=1e-6), (k, name)
    means = report["mean"]
    assert report["adopted"] == (means["fitted"]["log_loss"] <= means["base"]["log_loss"])


@pytest.mark.slow
def test_weights_that_do_no_better_than_the_base_are_not_adopted(tmp_path: Path) -> None:
    """Labels of coin flips (a hash of the answer id): the fitted weights lose held out."""
    labels = pd.read_csv(LABELLED / "labels.csv")
    flips = [
        int(hashlib.sha256(f"0{a}".encode()).hexdigest(), 16) % 2 == 0 for a in labels["answer_id"]
    ]
    labels.assign(correct=flips).to_csv(tmp_path / "flips.csv", index=False)
    out = tmp_path / "cal"
    result = run("calibrate-answers", *inputs(tmp_path / "flips.csv"), "--out", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert not report["adopted"]
    assert "worse than the base weights'" in report["reason"]
    document = yaml.safe_load((out / "policy.yaml").read_text())
    assert document["parameters"]["weights"] == report["weights"]["base"]
    assert document["parameters"]["levels"] == {"high_at_least": 75.0, "medium_at_least": 50.0}
    assert len(report["levels"]["notes"]) == 2  # neither target is reached: both base cuts kept


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ({"answer_id": "nope", "correct": "true"}, "answer_id 'nope' is not in --answers"),
        ({"answer_id": "a00_0", "correct": "maybe"}, "column 'correct' is not true/false (or 1/0)"),
    ],
)
def test_bad_labels_are_one_line_naming_file_row_and_column(
    tmp_path: Path, row: dict[str, str], problem: str
) -> None:
    labels = pd.read_csv(LABELLED / "labels.csv", dtype=str)
    labels = pd.concat([labels[labels["answer_id"] != row["answer_id"]], pd.DataFrame([row])])
    labels.to_csv(tmp_path / "labels.csv", index=False)
    out = tmp_path / "cal"
    result = CliRunner().invoke(
        cli, ["-q", "calibrate-answers", *inputs(tmp_path / "labels.csv"), "--out", str(out)]
    )
    assert result.exit_code != 0
    message = result.output.strip()
    assert len(message.splitlines()) == 1, message
    assert str(tmp_path / "labels.csv") in message and problem in message
    assert f"row {len(labels)}" in message  # the last data row
    assert not out.exists()


@pytest.mark.slow
def test_two_runs_write_the_same_bytes(tmp_path: Path) -> None:
    for name in ("one", "two"):
        result = run("calibrate-answers", *inputs(), "--folds", "2", "--out", str(tmp_path / name))
        assert result.exit_code == 0, result.output
    for written in ("policy.yaml", "report.json", "report.md", "predictions.csv"):
        assert (tmp_path / "one" / written).read_bytes() == (
            tmp_path / "two" / written
        ).read_bytes()


def test_more_folds_than_labelled_queries_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "cal"
    result = CliRunner().invoke(
        cli, ["-q", "calibrate-answers", *inputs(), "--folds", "41", "--out", str(out)]
    )
    assert result.exit_code != 0
    assert "--folds 41: needs at least 2 and at most the 40 labelled queries" in result.output
    assert not out.exists()


@pytest.mark.slow
def test_correct_as_booleans_or_as_text_is_the_same_labelling(tmp_path: Path) -> None:
    # a `flag` column: Parquet booleans, integers and CSV text ("True", "0") read alike
    labels = pd.read_csv(LABELLED / "labels.csv", dtype=str)
    truth = labels["correct"].str.lower().isin(["true", "1"])
    labels.assign(correct=truth).to_parquet(tmp_path / "bool.parquet")
    labels.assign(correct=truth.astype(int)).to_parquet(tmp_path / "int.parquet")
    labels.assign(correct=truth.map({True: "True", False: "0"})).to_csv(
        tmp_path / "text.csv", index=False
    )
    reports = []
    for name in ("bool.parquet", "int.parquet", "text.csv"):
        out = tmp_path / name.replace(".", "_")
        run("calibrate-answers", *inputs(tmp_path / name), "--folds", "2", "--out", str(out))
        reports.append(json.loads((out / "report.json").read_text())["weights"])
    assert reports[0] == reports[1] == reports[2]
