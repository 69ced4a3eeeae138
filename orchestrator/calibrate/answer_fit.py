"""The numbers `duckscore calibrate-answers` fits (seed 001's future improvement 3, issue 50):
non-negative logistic weights of the four answer factors, the precision-targeted level cuts, and
the held-out figures that decide whether the fitted weights are adopted.

The logistic fit minimises Σ log-loss + L2/2 · |β|² (the intercept unpenalised, as
scikit-learn's LogisticRegression with C = 1 / L2) subject to β ≥ 0. The loss is strictly convex,
so the constrained optimum is the unconstrained optimum over its own support: every support (the
2⁴ subsets of the factors) is fitted by Newton's method and the feasible fit of least loss is the
answer. Exact and deterministic, with no solver tolerance to tune; numpy only.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .ltr_fit import halving_step
from .settings import CalibrationError

L2 = 1.0  # scikit-learn's default C = 1: keeps the fit finite when the labels separate
NEWTON_STEPS = 100
WEIGHT_DECIMALS = 4  # the weights as written in the policy
CUT_DECIMALS = 6  # the cuts: the answers SQL compares round(percentage, 6) with them
EPSILON = 1e-15  # a probability's floor in the log-loss


@dataclass(frozen=True)
class Logistic:
    """sigmoid(intercept + x · coefficients)."""

    intercept: float
    coefficients: tuple[float, ...]

    def probability(self, x: np.ndarray) -> np.ndarray:
        return _sigmoid(self.intercept + x @ np.array(self.coefficients, dtype=float))


def fit_non_negative(x: np.ndarray, y: np.ndarray, l2: float = L2) -> Logistic:
    """The L2-penalised logistic regression of `y` (0/1) on the columns of `x`, every
    coefficient ≥ 0 (see the module doc)."""
    if len(y) == 0 or y.min() == y.max():
        raise CalibrationError(
            "the labels to fit are all correct or all incorrect: a fit needs both"
        )
    best: tuple[float, Logistic] | None = None
    columns = range(x.shape[1])
    for size in range(len(columns) + 1):
        for support in itertools.combinations(columns, size):
            theta = _newton(x[:, list(support)], y, l2)
            if np.any(theta[1:] < 0):
                continue
            coefficients = np.zeros(x.shape[1])
            coefficients[list(support)] = theta[1:]
            loss = _penalised_loss(x, y, theta[0], coefficients, l2)
            if best is None or loss < best[0]:
                best = (loss, Logistic(float(theta[0]), tuple(float(c) for c in coefficients)))
    assert best is not None  # the empty support is always feasible
    return best[1]


def rescaled(coefficients: tuple[float, ...], total: float) -> tuple[float, ...] | None:
    """The coefficients scaled to sum to `total` (the base policy's weight sum, so the
    percentage keeps its scale), at WEIGHT_DECIMALS; None when every coefficient is 0."""
    whole = math.fsum(coefficients)
    if whole <= 0:
        return None
    return tuple(round(total * c / whole, WEIGHT_DECIMALS) for c in coefficients)


def precision_cut(percentage: np.ndarray, correct: np.ndarray, target: float) -> float | None:
    """The lowest percentage (as the SQL compares it, at CUT_DECIMALS) at which the share of
    correct answers at or above it is at least `target`; None when none is."""
    rounded = np.round(percentage, CUT_DECIMALS)
    order = np.argsort(-rounded, kind="stable")
    values = rounded[order]
    share = np.cumsum(correct[order].astype(float)) / np.arange(1, len(values) + 1)
    last = np.append(values[1:] != values[:-1], True)  # the last answer at each percentage
    meets = share[last] >= target
    return float(values[last][meets].min()) if meets.any() else None


def level_cuts(
    percentage: np.ndarray,
    correct: np.ndarray,
    targets: tuple[float, float],
    base: tuple[float, float],
) -> tuple[tuple[float, float], list[str]]:
    """(high_at_least, medium_at_least) by their precision targets; a cut no percentage reaches
    keeps the base's, and says so; medium is never above high."""
    notes = []
    found = []
    for level, target, kept in zip(("high", "medium"), targets, base, strict=True):
        cut = precision_cut(percentage, correct, target)
        if cut is None:
            notes.append(
                f"{level}: no percentage has a share of {target:g} correct answers at or above "
                f"it; the base cut {kept:g} is kept"
            )
        found.append(kept if cut is None else cut)
    high, medium = found
    if medium > high:
        notes.append(f"medium: its cut {medium:g} is above high's; lowered to {high:g}")
        medium = high
    return (high, medium), notes


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, EPSILON, 1 - EPSILON)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)))


def _penalised_loss(
    x: np.ndarray, y: np.ndarray, intercept: float, coefficients: np.ndarray, l2: float
) -> float:
    z = intercept + x @ coefficients
    return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * (coefficients @ coefficients))


def _newton(x: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """argmin over [intercept, β] of the penalised loss (β unconstrained), by damped Newton
    steps from 0; a step is halved until the loss does not rise."""
    design = np.column_stack([np.ones(len(y)), x])
    penalty = l2 * np.eye(design.shape[1])
    penalty[0, 0] = 0.0

    def loss(theta: np.ndarray) -> float:
        return _penalised_loss(x, y, theta[0], theta[1:], l2)

    theta = np.zeros(design.shape[1])
    current = loss(theta)
    for _ in range(NEWTON_STEPS):
        p = _sigmoid(design @ theta)
        gradient = design.T @ (p - y) + penalty @ theta
        if np.max(np.abs(gradient)) < 1e-12:
            break
        hessian = (design * (p * (1 - p))[:, None]).T @ design + penalty
        step = np.linalg.solve(hessian + 1e-12 * np.eye(len(theta)), gradient)
        found = halving_step(loss, theta, step, current)
        if found is None:
            break
        theta, current = found
    return theta
