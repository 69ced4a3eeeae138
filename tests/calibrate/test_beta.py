"""Beta calibration as a p_good map (issue 32): the fitted map equals scikit-learn's logistic
regression on Kull et al.'s features [ln s′, −ln(1 − s′)] with Platt's targets as sample weights; a
negative coefficient drops its feature, as betacal does; `auto` keeps the variant of lowest
held-out Brier score; on SciFact, `--probability beta` writes a map that `duckscore score` applies,
and every fold's held-out p_good is scikit-learn's refit on the fold's training decisions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss

from duckscore.calibrate.pipeline import calibrate
from duckscore.calibrate.probability import (
    Variant,
    apply_map,
    choose_variant,
    chosen_method,
    fit_map,
    variants,
)
from duckscore.calibrate.settings import CalibrationSettings
from duckscore.cli import cli
from duckscore.scoring.pipeline import score

from ..helpers import SCIFACT
from .test_calibrate import scifact_labels  # noqa: F401  (a fixture)

CLIP = 1e-6  # s′ = the best score clipped to [CLIP, 1 − CLIP], as docs/score.md defines the map
BETA = Variant("beta", ("best_overall_score",))


def _platt_targets(y: np.ndarray) -> np.ndarray:
    positives, negatives = y.sum(), len(y) - y.sum()
    return np.where(y == 1, (positives + 1) / (positives + 2), 1 / (negatives + 2))


def _kull_features(best: np.ndarray) -> np.ndarray:
    """[ln s′, −ln(1 − s′)]: Kull et al.'s features, whose coefficients a and b must be ≥ 0."""
    s = np.clip(best, CLIP, 1 - CLIP)
    return np.column_stack([np.log(s), -np.log(1 - s)])


def _logistic(x: np.ndarray, y: np.ndarray) -> LogisticRegression:
    """Unpenalised (C=inf: scikit-learn's spelling of penalty=None) logistic regression on Platt's
    targets, each row once as good and once as not, weighted by its target."""
    target = _platt_targets(y)
    return LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(
        np.vstack([x, x]),
        np.r_[np.ones(len(y)), np.zeros(len(y))],
        sample_weight=np.r_[target, 1 - target],
    )


def _sklearn_beta(best: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(c, a, b) of logit = c + a·ln s′ − b·ln(1 − s′), as betacal fits it: a negative a drops
    ln s′, else a negative b drops ln(1 − s′), and the other feature is refitted alone."""
    x = _kull_features(best)
    model = _logistic(x, y)
    a, b = model.coef_[0]
    if a < 0:
        alone = _logistic(x[:, [1]], y)
        return alone.intercept_[0], 0.0, alone.coef_[0][0]
    if b < 0:
        alone = _logistic(x[:, [0]], y)
        return alone.intercept_[0], alone.coef_[0][0], 0.0
    return model.intercept_[0], a, b


def _decisions(best: np.ndarray, good: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"best_overall_score": best, "label": np.where(good, "good", "bad")})


def _drawn(seed: int, n: int, c: float, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Scores in [0, 1] (one 0, one 1, one below the clip) and outcomes drawn from a beta map."""
    rng = np.random.default_rng(seed)
    best = rng.beta(2.0, 2.0, n)
    best[:3] = [0.0, 1.0, 1e-9]
    x = _kull_features(best)
    p = 1 / (1 + np.exp(-(c + a * x[:, 0] + b * x[:, 1])))
    return best, (rng.random(n) < p).astype(int)


def _expected_block(c: float, a: float, b: float) -> dict:
    return {"intercept": c, "ln_score": a, "ln_one_minus_score": -b}


@pytest.mark.parametrize(("seed", "n"), [(0, 40), (1, 150), (2, 600), (3, 3000)])
def test_beta_fit_equals_scikit_learn(seed: int, n: int) -> None:
    best, y = _drawn(seed, n, 0.3, 1.5, 2.0)
    block = fit_map(BETA, _decisions(best, y))
    model = _logistic(_kull_features(best), y)
    assert (model.coef_[0] > 0).all()  # the unconstrained fit: nothing dropped
    c, (a, b) = model.intercept_[0], model.coef_[0]
    assert block["method"] == "beta"
    assert block["beta"] == pytest.approx(_expected_block(c, a, b), abs=1e-6)
    grid = np.r_[0.0, 1e-7, np.linspace(0.001, 0.999, 101), 1 - 1e-7, 1.0]
    np.testing.assert_allclose(
        apply_map(block, pd.DataFrame({"best_overall_score": grid})),
        model.predict_proba(_kull_features(grid))[:, 1],
        atol=1e-7,
    )


def test_the_identity_map_gives_the_clipped_score() -> None:
    """logit = ln s′ − ln(1 − s′) is the logit of s′ itself: p_good = s′, the score clipped to
    [1e-6, 1 − 1e-6] as the SQL clips it (tests/score/test_probability.py)."""
    identity = {
        "method": "beta",
        "beta": {"intercept": 0.0, "ln_score": 1.0, "ln_one_minus_score": -1.0},
    }
    best = np.array([-1.0, 0.0, 1e-9, 1e-6, 0.25, 1 - 1e-6, 1 - 1e-9, 1.0, 2.0])
    p_good = apply_map(identity, pd.DataFrame({"best_overall_score": best}))
    np.testing.assert_allclose(p_good, np.clip(best, 1e-6, 1 - 1e-6), rtol=1e-9)


@pytest.mark.parametrize(
    ("truth", "dropped"),
    [
        ((0.5, -1.0, 2.5), "ln_score"),  # a < 0: P(good) rises again towards 0
        ((0.5, 2.5, -1.0), "ln_one_minus_score"),  # b < 0: it falls again towards 1
    ],
)
def test_a_negative_coefficient_drops_its_feature(truth: tuple, dropped: str) -> None:
    best, y = _drawn(5, 2000, *truth)
    unconstrained = _logistic(_kull_features(best), y).coef_[0]
    assert (unconstrained < 0).sum() == 1  # the case: one coefficient of the wrong sign
    block = fit_map(BETA, _decisions(best, y))["beta"]
    assert block[dropped] == 0.0
    assert block == pytest.approx(_expected_block(*_sklearn_beta(best, y)), abs=1e-6)
    assert block["ln_score"] >= 0 >= block["ln_one_minus_score"]  # a map rising with the score


def test_a_falling_score_leaves_the_base_rate() -> None:
    """Both coefficients negative, and the one kept still negative alone: a constant, the logit
    of the mean Platt target (the unpenalised logistic regression without features)."""
    best, y = _drawn(6, 2000, 0.5, -1.5, -1.5)
    x = _kull_features(best)
    assert (_logistic(x, y).coef_[0] < 0).all() and _logistic(x[:, [1]], y).coef_[0][0] < 0
    mean = _platt_targets(y).mean()
    block = fit_map(BETA, _decisions(best, y))["beta"]
    assert block == pytest.approx(_expected_block(np.log(mean / (1 - mean)), 0.0, 0.0), abs=1e-9)


def _fold_frames(seed: int, logit) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Three folds' training and held-out decisions, good drawn with P = σ(logit(s, r))."""
    rng = np.random.default_rng(seed)
    n = 900
    best, ratio = rng.random(n), rng.random(n)
    good = rng.random(n) < 1 / (1 + np.exp(-logit(best, ratio)))
    frame = _decisions(best, good).assign(top2_ratio=ratio, fold=np.arange(n) % 3)
    trained = {f"fold_{k}": frame[frame.fold != k] for k in range(3)}
    held_out = {f"fold_{k}": frame[frame.fold == k] for k in range(3)}
    return trained, held_out


def _sklearn_held_out_brier(
    variant: Variant, trained: dict[str, pd.DataFrame], held_out: dict[str, pd.DataFrame]
) -> float:
    p, y = [], []
    for fit, test in held_out.items():
        train = trained[fit]
        good = (train.label == "good").to_numpy(dtype=int)
        if variant.method == "beta":
            c, a, b = _sklearn_beta(train.best_overall_score.to_numpy(), good)
            x = _kull_features(test.best_overall_score.to_numpy())
            p.append(1 / (1 + np.exp(-(c + a * x[:, 0] + b * x[:, 1]))))
        else:
            features = list(variant.features)
            model = _logistic(train[features].to_numpy(), good)
            p.append(model.predict_proba(test[features].to_numpy())[:, 1])
        y.append((test.label == "good").to_numpy(dtype=int))
    return float(brier_score_loss(np.concatenate(y), np.concatenate(p)))


@pytest.mark.parametrize(
    ("logit", "winner"),
    [
        (lambda s, r: -1.0 + 0.3 * np.log(s) - 2.0 * np.log(1 - s), "beta(best_overall_score)"),
        (lambda s, r: -3.0 + 4.0 * s + 3.0 * r, "platt(best_overall_score, top2_ratio)"),
    ],
)
def test_auto_keeps_the_variant_of_lowest_held_out_brier(logit, winner: str) -> None:
    assert chosen_method("auto", 999) == "auto" and chosen_method("auto", 1000) == "isotonic"
    assert [v.name for v in variants("auto")] == [
        "platt(best_overall_score)",
        "platt(best_overall_score, top2_ratio)",
        "beta(best_overall_score)",
    ]
    assert [v.method for v in variants("platt")] == ["platt", "platt"]
    assert variants("beta") == [BETA]
    trained, held_out = _fold_frames(11, logit)
    chosen, held_out_brier = choose_variant("auto", trained, held_out)
    expected = {v.name: _sklearn_held_out_brier(v, trained, held_out) for v in variants("auto")}
    assert held_out_brier == pytest.approx(expected, abs=1e-9)
    assert chosen.name == min(expected, key=expected.__getitem__) == winner


def test_the_command_offers_beta(tmp_path: Path) -> None:
    """--probability beta passes the options and the settings and stops at the missing inputs;
    an unknown method does not get so far."""
    missing = [str(tmp_path / name) for name in ("features.parquet", "labels.parquet")]
    common = ["calibrate", "--features", missing[0], "--labels", missing[1], "--out", "p.yaml"]
    beta = CliRunner().invoke(cli, [*common, "--probability", "beta"])
    assert beta.exit_code == 2 and ": no such file: " in beta.output
    other = CliRunner().invoke(cli, [*common, "--probability", "logistic"])
    assert other.exit_code == 2 and "'logistic' is not one of" in other.output


@pytest.fixture(scope="module")
def beta_calibrated(scifact_labels: Path, tmp_path_factory: pytest.TempPathFactory):  # noqa: F811
    out = tmp_path_factory.mktemp("beta_calibrated")
    result = calibrate(
        scifact_labels,
        out / "policy.yaml",
        log=SCIFACT / "retrieval_log.parquet",
        settings=CalibrationSettings(
            folds=3, passes=1, thresholds="precision", target_precision=0.9, probability="beta"
        ),
    )
    return out, result


def _oracle_p_good(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    c, a, b = _sklearn_beta(
        train.best_overall_score.fillna(0.0).to_numpy(), (train.label == "good").to_numpy(dtype=int)
    )
    x = _kull_features(test.best_overall_score.fillna(0.0).to_numpy())
    return 1 / (1 + np.exp(-(c + a * x[:, 0] + b * x[:, 1])))


@pytest.mark.slow
@pytest.mark.xdist_group("beta_calibrated")  # its fixture computed once, on one worker
def test_held_out_p_good_equals_scikit_learn_per_fold(beta_calibrated) -> None:
    out, result = beta_calibrated
    document = yaml.safe_load((out / "policy.yaml").read_text(encoding="utf-8"))
    block = document["parameters"]["probability"]
    assert block["method"] == "beta" and "platt" not in block
    assert set(block["beta"]) == {"intercept", "ln_score", "ln_one_minus_score"}
    probability = document["metadata"]["validation"]["probability"]
    assert (probability["method"], probability["features"]) == ("beta", ["best_overall_score"])
    held_out = result.predictions[result.predictions["fit"] != "all"]
    training = result.probability_training
    p, y = [], []
    for fit, test in held_out.groupby("fit"):
        train = training[training["fit"] == fit]
        assert set(train.query_id).isdisjoint(test.query_id)
        expected = _oracle_p_good(train, test)
        np.testing.assert_allclose(test["p_good"], expected, atol=1e-6)
        p.append(expected)
        y.append((test["label"] == "good").to_numpy(dtype=int))
    assert probability["cross_validated"]["brier"] == pytest.approx(
        brier_score_loss(np.concatenate(y), np.concatenate(p)), abs=1e-6
    )


@pytest.mark.slow
@pytest.mark.xdist_group("beta_calibrated")  # its fixture computed once, on one worker
def test_duckscore_score_applies_the_beta_map(beta_calibrated, tmp_path: Path) -> None:
    """The policy file's map, applied by `duckscore score` to every SciFact query, is
    scikit-learn's fit on the decisions of fit `all`."""
    out, result = beta_calibrated
    fused = tmp_path / "fused"
    fuse = ["fuse", "--log", str(SCIFACT / "retrieval_log.parquet"), "--out", str(fused)]
    assert CliRunner().invoke(cli, [*fuse, "--recipe", "canonical_rrf"]).exit_code == 0
    score(fused / "parent_features.parquet", tmp_path / "scored", str(out / "policy.yaml"))
    queries = pd.read_parquet(tmp_path / "scored" / "queries.parquet")
    training = result.probability_training
    expected = _oracle_p_good(training[training.fit == "all"], queries)
    np.testing.assert_allclose(queries["p_good"], expected, atol=1e-6)
    contract = (tmp_path / "scored" / "contract.jsonl").read_text().splitlines()
    assert all("p_good" in json.loads(line) for line in contract)
