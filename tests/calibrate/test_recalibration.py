"""The arithmetic of `duckscore recalibrate` against oracles written here: a simulated prior
shift with known class-conditional score densities, Saerens et al.'s posterior formula,
scikit-learn's logistic regression and a penalised log-loss minimised by scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats
from sklearn.linear_model import LogisticRegression

from duckscore.calibrate.recalibration import (
    LogitMap,
    compose,
    em_prior,
    fit_intercept,
    fit_logit_map,
    held_out,
    prior_shift,
    prior_with_labels,
    refit_on_labels,
    refit_within,
    stratified_folds,
)
from duckscore.calibrate.settings import CalibrationError

GOOD, BAD = stats.beta(5, 2), stats.beta(2, 5)  # the class-conditional densities of the score
TRAINING_PRIOR = 0.54


def calibrated_posterior(scores: np.ndarray, prior: float) -> np.ndarray:
    """P(good | score) by Bayes' rule under `prior`: a perfectly calibrated map."""
    good = prior * GOOD.pdf(scores)
    return good / (good + (1 - prior) * BAD.pdf(scores))


def draw(prior: float, n: int, seed: int) -> np.ndarray:
    """Scores of exactly round(n·prior) good queries and the rest bad: the prior is the one
    set, the scores random."""
    rng = np.random.default_rng(seed)
    good = round(n * prior)
    return np.concatenate([GOOD.rvs(good, random_state=rng), BAD.rvs(n - good, random_state=rng)])


@pytest.mark.parametrize("new_prior", [0.3, 0.75])
@pytest.mark.parametrize("seed", range(10))
def test_em_recovers_a_known_prior_shift(new_prior: float, seed: int) -> None:
    scores = draw(new_prior, 1000, seed)
    estimate = em_prior(calibrated_posterior(scores, TRAINING_PRIOR), TRAINING_PRIOR)
    assert abs(estimate.prior - new_prior) <= 0.03


def test_em_keeps_the_prior_when_nothing_moved() -> None:
    scores = draw(TRAINING_PRIOR, 20_000, 7)
    estimate = em_prior(calibrated_posterior(scores, TRAINING_PRIOR), TRAINING_PRIOR)
    assert abs(estimate.prior - TRAINING_PRIOR) <= 0.01


def test_prior_shift_is_saerens_posterior_adjustment() -> None:
    """p' = (π'/π)p / ((π'/π)p + ((1-π')/(1-π))(1-p)), Saerens et al. 2002, eq. 2.4."""
    p = np.linspace(0.01, 0.99, 25)
    old, new = 0.54, 0.21
    up, down = new / old, (1 - new) / (1 - old)
    expected = up * p / (up * p + down * (1 - p))
    shifted = LogitMap(prior_shift(old, new), 1.0).apply(p)
    np.testing.assert_allclose(shifted, expected, rtol=0, atol=1e-12)


def test_the_adjusted_posterior_is_the_posterior_under_the_new_prior() -> None:
    scores = np.linspace(0.05, 0.95, 19)
    shifted = LogitMap(prior_shift(TRAINING_PRIOR, 0.3), 1.0).apply(
        calibrated_posterior(scores, TRAINING_PRIOR)
    )
    np.testing.assert_allclose(shifted, calibrated_posterior(scores, 0.3), atol=1e-12)


def test_an_unpenalised_refit_is_scikit_learns_logistic_regression() -> None:
    rng = np.random.default_rng(3)
    z = rng.normal(0, 1.5, 300)
    y = (rng.random(300) < 1 / (1 + np.exp(-(0.4 + 0.7 * z)))).astype(float)
    fitted = fit_logit_map(z, y, LogitMap(0.0, 1.0), strength=0.0)
    reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(z[:, None], y)
    assert fitted.intercept == pytest.approx(reference.intercept_[0], abs=1e-6)
    assert fitted.slope == pytest.approx(reference.coef_[0, 0], abs=1e-6)


@pytest.mark.parametrize("strength", [0.5, 5.0, 50.0])
def test_a_penalised_refit_minimises_the_penalised_log_loss(strength: float) -> None:
    rng = np.random.default_rng(11)
    z = rng.normal(0, 1.0, 40)
    y = (rng.random(40) < 0.35).astype(float)
    prior = LogitMap(-0.6, 1.0)

    def loss(theta: np.ndarray) -> float:
        eta = theta[0] + theta[1] * z
        return float(
            np.sum(np.logaddexp(0, eta) - y * eta)
            + strength / 2 * ((theta[0] - prior.intercept) ** 2 + (theta[1] - prior.slope) ** 2)
        )

    reference = optimize.minimize(loss, np.zeros(2), method="BFGS", options={"gtol": 1e-10}).x
    fitted = fit_logit_map(z, y, prior, strength)
    assert [fitted.intercept, fitted.slope] == pytest.approx(list(reference), abs=1e-5)


def test_a_strong_prior_keeps_the_prior_map() -> None:
    rng = np.random.default_rng(5)
    z, y = rng.normal(size=30), (rng.random(30) < 0.5).astype(float)
    fitted = fit_logit_map(z, y, LogitMap(-1.2, 1.0), strength=1e9)
    assert (fitted.intercept, fitted.slope) == pytest.approx((-1.2, 1.0), abs=1e-6)


def test_the_prior_strength_is_chosen_by_cross_validated_brier() -> None:
    """Labels drawn from the prior map itself: the strongest prior wins; labels far from it: a
    weak one."""
    rng = np.random.default_rng(2)
    p = rng.uniform(0.05, 0.95, 60)
    faithful = (rng.random(60) < p).astype(float)
    refit = refit_on_labels(p, faithful, LogitMap(0.0, 1.0), folds=5, seed=0)
    assert refit.cv_brier[refit.strength] == min(refit.cv_brier.values())
    flipped = (rng.random(60) < 1 / (1 + np.exp(-(2.5 + 3 * np.log(p / (1 - p)))))).astype(float)
    weak = refit_on_labels(p, flipped, LogitMap(0.0, 1.0), folds=5, seed=0)
    assert weak.strength < 100
    assert weak.fitted.slope > 1.5


def test_compose_a_logistic_map() -> None:
    block = {
        "method": "platt",
        "platt": {"intercept": -3.0, "best_overall_score": 5.0, "top2_ratio": 0.5},
        "levels_by": "score",
        "p_low": 0.5,
        "p_high": 0.85,
    }
    correction = LogitMap(0.7, 1.3)
    composed = compose(block, correction)
    x, t = np.array([0.1, 0.6, 0.9]), np.array([0.2, 0.9, 0.0])
    old = 1 / (1 + np.exp(-(-3.0 + 5.0 * x + 0.5 * t)))
    c = composed["platt"]
    new = 1 / (1 + np.exp(-(c["intercept"] + c["best_overall_score"] * x + c["top2_ratio"] * t)))
    expected = 1 / (1 + np.exp(-(0.7 + 1.3 * np.log(old / (1 - old)))))
    np.testing.assert_allclose(new, expected, atol=1e-12)
    assert composed["levels_by"] == "score"
    assert block["platt"]["intercept"] == -3.0  # the old block is left as it was


def test_compose_an_isotonic_map_moves_its_breakpoints() -> None:
    block = {"method": "isotonic", "isotonic": {"x": [0.1, 0.5, 0.9], "y": [0.0, 0.4, 1.0]}}
    composed = compose(block, LogitMap(-0.5, 1.0))
    y = composed["isotonic"]["y"]
    assert y[0] == 0.0 and y[2] == 1.0
    assert y[1] == pytest.approx(1 / (1 + np.exp(-(np.log(0.4 / 0.6) - 0.5))), abs=1e-12)
    assert composed["isotonic"]["x"] == [0.1, 0.5, 0.9]


def test_labels_that_reverse_the_map_give_a_constant() -> None:
    """The MAP slope is held at 0 when the labels reverse the map: p_good is then the prior-
    shrunk base rate of the labels, the same for every score."""
    z = np.linspace(-2, 2, 40)
    y = (z < 0).astype(float)
    fitted = fit_logit_map(z, y, LogitMap(0.0, 1.0), strength=0.1)
    assert fitted.slope == 0.0
    penalised = optimize.minimize_scalar(
        lambda a: np.sum(np.logaddexp(0, a) - y * a) + 0.1 / 2 * a**2
    ).x
    assert fitted.intercept == pytest.approx(penalised, abs=1e-6)
    composed = compose({"method": "platt", "platt": {"intercept": 1.0, "top2_ratio": 2.0}}, fitted)
    assert composed["platt"]["top2_ratio"] == 0.0
    with pytest.raises(CalibrationError, match="keep the map's order"):
        compose({"method": "platt", "platt": {"intercept": 0.0}}, LogitMap(0.0, -0.2))


def test_em_refuses_a_map_fitted_on_one_class() -> None:
    with pytest.raises(CalibrationError, match="strictly between 0 and 1"):
        em_prior(np.array([0.2, 0.4]), 1.0)


@pytest.mark.parametrize("seed", range(3))
def test_the_intercept_only_refit_is_the_root_of_its_score_equation(seed: int) -> None:
    """σ(a + logit p) by maximum likelihood: Σ σ(a + logit p) = Σ y, found by scipy."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.05, 0.95, 40)
    y = (rng.uniform(size=40) < 0.3).astype(float)
    z = np.log(p / (1 - p))
    expected = optimize.brentq(
        lambda a: float(np.sum(1 / (1 + np.exp(-(a + z)))) - y.sum()), -30, 30
    )
    fitted = fit_intercept(p, y)
    assert fitted.slope == 1.0 and fitted.intercept == pytest.approx(expected, abs=1e-9)


def test_held_out_predictions_are_each_folds_fit_on_the_others() -> None:
    """Each label's p_good from the fit on the other folds; a fold the fitter finds nothing on
    keeps p_good."""
    y = np.array([1.0, 0.0] * 10)
    p = np.linspace(0.2, 0.8, 20)
    seen: list[int] = []

    def fit(p_train: np.ndarray, y_train: np.ndarray) -> LogitMap | None:
        seen.append(len(y_train))
        return None if len(seen) == 1 else LogitMap(float(len(seen)), 1.0)

    predicted = held_out(p, y, 4, 0, fit)
    fold_of = stratified_folds(y, 4, 0)
    assert seen == [int((fold_of != k).sum()) for k in range(4)]
    z = np.log(p / (1 - p))
    for k in range(4):
        expected = p[fold_of == k] if k == 0 else 1 / (1 + np.exp(-(k + 1 + z[fold_of == k])))
        np.testing.assert_allclose(predicted[fold_of == k], expected)


def test_the_refit_within_a_fold_chooses_its_strength_there() -> None:
    """refit_within is refit_on_labels on the part, its folds capped by the part's rarer
    outcome; with fewer than 2 of one outcome it finds nothing."""
    rng = np.random.default_rng(4)
    p = rng.uniform(0.05, 0.95, 30)
    y = (rng.uniform(size=30) < p).astype(float)
    found = refit_within(5, 0)(p, y)
    expected = refit_on_labels(p, y, LogitMap(0.0, 1.0), 5, 0).fitted
    assert found == expected
    assert refit_within(5, 0)(p[:5], np.array([1.0, 0.0, 0.0, 0.0, 0.0])) is None


def rate_of(fitted: LogitMap | None) -> float:
    """The rate a prior-moved map was moved to: σ(logit π + shift), π the training prior."""
    assert fitted is not None and fitted.slope == 1.0
    z = np.log(TRAINING_PRIOR / (1 - TRAINING_PRIOR)) + fitted.intercept
    return float(1 / (1 + np.exp(-z)))


def mixture_mle(unlabelled: np.ndarray, y: np.ndarray) -> float:
    """The rate maximising the likelihood of labelled outcomes y and unlabelled scores under
    the known class densities: Σ ln π^y (1 − π)^(1−y) + Σ ln(π·good + (1 − π)·bad), by scipy."""
    good, bad = GOOD.pdf(unlabelled), BAD.pdf(unlabelled)

    def loss(rate: float) -> float:
        labelled = y.sum() * np.log(rate) + (len(y) - y.sum()) * np.log1p(-rate)
        return -float(labelled + np.sum(np.log(rate * good + (1 - rate) * bad)))

    found = optimize.minimize_scalar(loss, bounds=(1e-9, 1 - 1e-9), method="bounded",
                                     options={"xatol": 1e-12})  # fmt: skip
    return float(found.x)


def labelled_draw(seed: int, n: int = 200, labels: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """A log of n queries at rate 0.3 (scores from the class densities), `labels` of them drawn
    at random and labelled: the others' scores, and the labelled ones' outcomes."""
    rng = np.random.default_rng(seed)
    y_all = (rng.uniform(size=n) < 0.3).astype(float)
    scores = np.where(y_all == 1, GOOD.rvs(n, random_state=rng), BAD.rvs(n, random_state=rng))
    labelled = rng.choice(n, labels, replace=False)
    return np.delete(scores, labelled), y_all[labelled]


def rate_with_labels(unlabelled: np.ndarray, y: np.ndarray) -> float:
    """The code's rate for these unlabelled scores' calibrated posteriors and these outcomes."""
    fit = prior_with_labels(calibrated_posterior(unlabelled, TRAINING_PRIOR), TRAINING_PRIOR, 0.02)
    return rate_of(fit(np.full(len(y), 0.5), y))


@pytest.mark.parametrize("seed", range(5))
def test_the_rate_with_labels_is_the_mixtures_maximum_likelihood(seed: int) -> None:
    unlabelled, y = labelled_draw(seed)
    assert rate_with_labels(unlabelled, y) == pytest.approx(mixture_mle(unlabelled, y), abs=1e-6)


def test_the_rate_with_labels_beats_the_labels_alone() -> None:
    """Over 40 logs at rate 0.3, 40 of 200 queries labelled: the rate of the labels and the log
    together lies nearer the truth than the labels' own rate, on average."""
    with_log, alone = [], []
    for seed in range(40):
        unlabelled, y = labelled_draw(seed)
        with_log.append(abs(rate_with_labels(unlabelled, y) - 0.3))
        alone.append(abs(y.mean() - 0.3))
    assert np.mean(with_log) < 0.7 * np.mean(alone)


def test_without_labels_the_rate_is_saerens_em() -> None:
    unlabelled, _ = labelled_draw(11)
    p = calibrated_posterior(unlabelled, TRAINING_PRIOR)
    expected = TRAINING_PRIOR
    for _ in range(100_000):  # eq. 2.9 by hand
        up, down = expected / TRAINING_PRIOR, (1 - expected) / (1 - TRAINING_PRIOR)
        updated = float(np.mean(up * p / (up * p + down * (1 - p))))
        if abs(updated - expected) < 1e-13:
            break
        expected = updated
    assert rate_with_labels(unlabelled, np.empty(0)) == pytest.approx(expected, abs=1e-8)


def test_a_degenerate_rate_with_labels_moves_nothing() -> None:
    fit = prior_with_labels(np.full(50, 1e-6), TRAINING_PRIOR, 0.02)
    assert fit(np.full(2, 0.5), np.array([1.0, 0.0])) is None  # 1 good of 52: rate 0.019
    assert rate_of(fit(np.full(3, 0.5), np.array([1.0, 1.0, 0.0]))) == pytest.approx(
        2 / 53, abs=1e-4
    )
