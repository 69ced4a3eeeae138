"""The arithmetic of `duckscore recalibrate` (issue 32): a calibrated p_good map carried to a new
domain.

- Without labels, label shift: the new domain's base rate π′ is estimated from the map's
  p_good on the unlabelled queries by the EM of Saerens, Latinne & Decaestecker ("Adjusting the
  outputs of a classifier to new a priori probabilities", Neural Computation 14, 2002), and the
  map's prior is corrected: logit p′ = logit p + logit π′ − logit π, π the base rate the map
  was fitted at.
- With labels, a logistic recalibration of the map's logit, p′ = σ(a + b·logit p), with a
  Gaussian prior centred on the label-free correction (a = that shift, b = 1): its strength λ
  (in pseudo-observations) is chosen by cross-validated Brier score on the labels, so a few
  labels move the map a little and many move it as far as they show; beside it σ(a + logit p),
  the intercept alone (issue 51: with 10 labels it is the steadier of the two). Each is judged
  by its held-out p_good (held_out), the refit's choice of strength made inside each fold.

Both corrections are maps of the logit, so they compose into the policy's own block: a logistic
map's intercept and coefficients (`platt`, `beta`), or an isotonic map's breakpoints.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..scoring.scale import QUANTILE_LEVELS, QUANTILES_KEY, off_scale, share_below
from .settings import CalibrationError

__all__ = ["QUANTILES_KEY", "QUANTILE_LEVELS", "off_scale", "share_below"]  # read from here too

PROBABILITY_CLIP = 1e-12  # a probability of exactly 0 or 1 has no logit
PRIOR_STRENGTHS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1e4)  # λ: 1e4 keeps the prior map
LOGISTIC_MAPS = ("platt", "beta")  # a logit that is a linear form: intercept + coefficients
INTERCEPT_BOUND = 30.0  # |a| of an intercept-only refit: σ(±30) is 0 or 1 to 1e-13


def logit(p: np.ndarray | float) -> np.ndarray:
    clipped = np.clip(np.asarray(p, dtype=float), PROBABILITY_CLIP, 1.0 - PROBABILITY_CLIP)
    return np.asarray(np.log(clipped) - np.log1p(-clipped))


def sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))
    return np.asarray(np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))


@dataclass(frozen=True)
class PriorEstimate:
    prior: float
    iterations: int


def em_prior(
    p_good: np.ndarray, fitted_prior: float, tolerance: float = 1e-10, max_iterations: int = 10_000
) -> PriorEstimate:
    """The base rate of the queries whose posteriors (under `fitted_prior`) are `p_good`: each
    posterior re-weighted by the ratio of the new prior to the old, the prior re-estimated as
    their mean, until it moves less than `tolerance`."""
    if len(p_good) == 0:
        raise CalibrationError("--log: no query to estimate the base rate from")
    if not 0.0 < fitted_prior < 1.0:
        raise CalibrationError(
            f"the map's base rate must lie strictly between 0 and 1, got {fitted_prior:g}"
        )
    p = np.clip(np.asarray(p_good, dtype=float), 0.0, 1.0)
    prior = fitted_prior
    for iteration in range(1, max_iterations + 1):
        up, down = prior / fitted_prior, (1.0 - prior) / (1.0 - fitted_prior)
        posterior = up * p / np.maximum(up * p + down * (1.0 - p), np.finfo(float).tiny)
        updated = float(posterior.mean())
        if abs(updated - prior) < tolerance:
            return PriorEstimate(updated, iteration)
        prior = updated
    return PriorEstimate(prior, max_iterations)


def semi_supervised_rate(p_unlabelled: np.ndarray, y: np.ndarray, fitted_prior: float) -> float:
    """The semi-supervised EM rate of the labelled queries and the unlabelled ones (issue 51):
    a labelled query's posterior is fixed at its outcome — which Saerens' re-weighting leaves as
    it is (0 and 1 stay) — the unlabelled ones re-weighted, the rate their mean over all."""
    return em_prior(np.concatenate([p_unlabelled, y]), fitted_prior).prior


def prior_with_labels(p_unlabelled: np.ndarray, fitted_prior: float, margin: float) -> Fitter:
    """The map's prior moved to the semi-supervised rate of the labels it is fitted on and the
    unlabelled queries; None for a rate within `margin` of 0 or 1."""

    def fit(_: np.ndarray, y: np.ndarray) -> LogitMap | None:
        rate = semi_supervised_rate(p_unlabelled, y, fitted_prior)
        if not margin <= rate <= 1.0 - margin:
            return None
        return LogitMap(prior_shift(fitted_prior, rate), 1.0)

    return fit


def prior_shift(fitted_prior: float, new_prior: float) -> float:
    """The logit offset that moves a map fitted at `fitted_prior` to `new_prior`."""
    return float(logit(new_prior) - logit(fitted_prior))


@dataclass(frozen=True)
class LogitMap:
    """p′ = σ(intercept + slope·logit p)."""

    intercept: float
    slope: float

    def apply(self, p: np.ndarray) -> np.ndarray:
        return sigmoid(self.intercept + self.slope * logit(p))


def fit_logit_map(z: np.ndarray, y: np.ndarray, prior: LogitMap, strength: float) -> LogitMap:
    """The maximum a posteriori σ(a + b·z), b ≥ 0, for outcomes y under a Gaussian prior of
    precision `strength` centred on `prior`. A negative b (labels that reverse the map's order)
    is refitted with b = 0: p_good then no longer depends on the score."""
    fitted = _newton(np.column_stack([np.ones(len(z)), z]), y, prior, strength)
    if fitted[1] >= 0:
        return LogitMap(fitted[0], fitted[1])
    [intercept] = _newton(np.ones((len(z), 1)), y, prior, strength)
    return LogitMap(intercept, 0.0)


def _newton(
    design: np.ndarray, y: np.ndarray, prior: LogitMap, strength: float, iterations: int = 100
) -> list[float]:
    """Newton's method on the penalised log-loss of a logistic model with these columns (the
    prior's intercept, then its slope), halving a step that does not lower it."""
    centre = np.array([prior.intercept, prior.slope][: design.shape[1]])

    def loss(theta: np.ndarray) -> float:
        eta = design @ theta
        penalty = strength / 2 * float(np.sum((theta - centre) ** 2))
        return float(np.sum(np.logaddexp(0.0, eta) - y * eta)) + penalty

    theta, current = centre.copy(), loss(centre)
    for _ in range(iterations):
        p = sigmoid(design @ theta)
        gradient = design.T @ (p - y) + strength * (theta - centre)
        hessian = (design * (p * (1 - p))[:, None]).T @ design + strength * np.eye(len(theta))
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        size = 1.0
        while size > 1e-10 and loss(theta - size * step) > current:
            size /= 2
        if size <= 1e-10:
            break
        theta = theta - size * step
        previous, current = current, loss(theta)
        if previous - current <= 1e-15 * max(1.0, current):
            break
    if not np.all(np.isfinite(theta)):
        raise CalibrationError("--labels: the recalibration of p_good did not converge")
    return [float(v) for v in theta]


def stratified_folds(y: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Each position's fold: within each outcome the positions shuffled by `seed`, dealt
    round-robin (as calibrate's folds are)."""
    rng = random.Random(seed)
    assigned = np.empty(len(y), dtype=int)
    for value in (1.0, 0.0):
        positions = [int(i) for i in np.flatnonzero(y == value)]
        rng.shuffle(positions)
        for k, position in enumerate(positions):
            assigned[position] = k % folds
    return assigned


@dataclass(frozen=True)
class LabelledRefit:
    fitted: LogitMap
    strength: float
    held_out: np.ndarray  # each labelled query's p_good from the fold that did not see it
    cv_brier: dict[float, float]  # per prior strength


def refit_on_labels(
    p_good: np.ndarray, y: np.ndarray, prior: LogitMap, folds: int, seed: int
) -> LabelledRefit:
    """The prior strength of lowest cross-validated Brier score (a tie keeps the stronger
    prior, the map closer to the one calibrated), then the refit on every label."""
    z = logit(p_good)
    fold_of = stratified_folds(y, folds, seed)
    held_out: dict[float, np.ndarray] = {}
    for strength in PRIOR_STRENGTHS:
        predicted = np.empty(len(y))
        for k in range(folds):
            test = fold_of == k
            fitted = fit_logit_map(z[~test], y[~test], prior, strength)
            predicted[test] = sigmoid(fitted.intercept + fitted.slope * z[test])
        held_out[strength] = predicted
    cv_brier = {s: float(np.mean((p - y) ** 2)) for s, p in held_out.items()}
    best = min(cv_brier.values())
    chosen = max(s for s, b in cv_brier.items() if b <= best + 1e-12)
    return LabelledRefit(fit_logit_map(z, y, prior, chosen), chosen, held_out[chosen], cv_brier)


def compose(block: dict[str, Any], correction: LogitMap) -> dict[str, Any]:
    """The probability block whose p_good is σ(a + b·logit(old p_good)).

    A logistic map composes exactly: its intercept becomes a + b·intercept and every other
    coefficient is multiplied by b. An isotonic map's breakpoints are mapped (0 and 1 stay),
    and p_good stays linear between them."""
    if correction.slope < 0:
        raise CalibrationError(
            f"a recalibration must keep the map's order, got slope {correction.slope:.3g}"
        )
    method = block["method"]
    if method in LOGISTIC_MAPS:
        old = block[method]
        new = {
            key: correction.intercept + correction.slope * value
            if key == "intercept"
            else correction.slope * value
            for key, value in old.items()
        }
        return {**block, method: new}
    y = np.asarray(block["isotonic"]["y"], dtype=float)
    kept = ((y <= 0.0) | (y >= 1.0)) & (correction.slope > 0)
    moved = np.where(kept, y, correction.apply(y))
    return {**block, "isotonic": {**block["isotonic"], "y": [float(v) for v in moved]}}


Fitter = Callable[[np.ndarray, np.ndarray], LogitMap | None]


def held_out(p_good: np.ndarray, y: np.ndarray, folds: int, seed: int, fit: Fitter) -> np.ndarray:
    """Each label's p_good from the map `fit` finds on the other folds (stratified_folds); a
    part `fit` finds nothing on (None) keeps p_good."""
    fold_of = stratified_folds(y, folds, seed)
    predicted = np.asarray(p_good, dtype=float).copy()
    for k in range(folds):
        test = fold_of == k
        found = fit(p_good[~test], y[~test])
        if found is not None:
            predicted[test] = found.apply(p_good[test])
    return predicted


def refit_within(folds: int, seed: int) -> Fitter:
    """refit_on_labels as a whole, its choice of prior strength made by the part's own folds:
    what held_out judges the refit by. A part with fewer than 2 of an outcome finds nothing."""

    def fit(p_good: np.ndarray, y: np.ndarray) -> LogitMap | None:
        inner = min(folds, int(min(y.sum(), len(y) - y.sum())))
        if inner < 2:
            return None
        return refit_on_labels(p_good, y, LogitMap(0.0, 1.0), inner, seed).fitted

    return fit


def fit_intercept(p_good: np.ndarray, y: np.ndarray, iterations: int = 200) -> LogitMap:
    """σ(a + logit p), the slope held at 1, a by maximum likelihood: the root of
    Σ σ(a + logit p) = Σ y, by bisection (the sum rises with a)."""
    z = logit(p_good)
    low, high = -INTERCEPT_BOUND, INTERCEPT_BOUND
    for _ in range(iterations):
        middle = (low + high) / 2
        low, high = (middle, high) if sigmoid(middle + z).sum() < y.sum() else (low, middle)
    return LogitMap((low + high) / 2, 1.0)


def fit_rate(p_good: np.ndarray, y: np.ndarray) -> LogitMap:
    """σ(a), the slope 0: every query's p_good is the labels' rate — the map where the score
    is no evidence (its rate kept off 0 and 1 by the labels of both outcomes)."""
    rate = float(np.clip(np.mean(y), 1.0 / (len(y) + 1), len(y) / (len(y) + 1)))
    return LogitMap(float(logit(rate)), 0.0)
