"""P(good answer) for a calibrated policy (issue 24): Platt scaling or isotonic regression of the
label `good` on the policy's own decisions, fitted here and applied by the score SQL (stage
`probabilities` of sql/score/queries.sql).

A query without candidates counts as best score 0 and top-2 ratio 0, here as in the SQL.

- Platt: logistic regression on Platt's smoothed targets ((N+ + 1)/(N+ + 2) for a good query,
  1/(N- + 2) for the others), by Newton's method — scikit-learn's `_sigmoid_calibration`
  minimises the same loss. Features: the best OverallScore, and the top-2 ratio beside it when
  that lowers the held-out Brier score of the calibration's folds.
- isotonic: pool-adjacent-violators on the best score (equal scores pooled first), kept as the
  breakpoints scikit-learn's IsotonicRegression interpolates between (clipped beyond the ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .settings import CalibrationError

PLATT_BELOW = 1000  # labels; with more, isotonic (scikit-learn: it overfits small sets)
FEATURES = ("best_overall_score", "top2_ratio")


@dataclass(frozen=True)
class Variant:
    """One way to map decisions to P(good): a method and the features it reads."""

    method: str
    features: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.method}({', '.join(self.features)})"


def chosen_method(method: str, labels: int) -> str:
    """`auto` resolved by the number of labels."""
    if method != "auto":
        return method
    return "platt" if labels < PLATT_BELOW else "isotonic"


def variants(method: str) -> list[Variant]:
    """The candidates a calibration compares under cross-validation (the first is the default)."""
    if method == "platt":
        return [Variant("platt", FEATURES[:1]), Variant("platt", FEATURES)]
    return [Variant("isotonic", FEATURES[:1])]


def feature_matrix(decisions: pd.DataFrame, features: tuple[str, ...]) -> np.ndarray:
    """The decisions' features, a missing value (no candidate, one candidate) as 0."""
    return decisions[list(features)].astype(float).fillna(0.0).to_numpy()


def outcome(decisions: pd.DataFrame) -> np.ndarray:
    return (decisions["label"] == "good").to_numpy(dtype=float)


def fit_map(variant: Variant, decisions: pd.DataFrame) -> dict[str, Any]:
    """The policy's probability map (without its level settings) fitted on `decisions`."""
    x, y = feature_matrix(decisions, variant.features), outcome(decisions)
    if variant.method == "platt":
        intercept, *slopes = fit_platt(x, y)
        coefficients = dict.fromkeys(FEATURES, 0.0) | dict(zip(variant.features, slopes))
        return {"method": "platt", "platt": {"intercept": intercept, **coefficients}}
    xs, ys = fit_isotonic(x[:, 0], y)
    return {"method": "isotonic", "isotonic": {"x": xs, "y": ys}}


def apply_map(block: dict[str, Any], decisions: pd.DataFrame) -> np.ndarray:
    """The map applied in Python (the SQL applies it in the score run)."""
    if block["method"] == "platt":
        c = block["platt"]
        x = feature_matrix(decisions, FEATURES)
        logit = c["intercept"] + x @ np.array([c[f] for f in FEATURES])
        return np.asarray(1.0 / (1.0 + np.exp(-logit)))
    x = feature_matrix(decisions, FEATURES[:1])[:, 0]
    return np.asarray(np.interp(x, block["isotonic"]["x"], block["isotonic"]["y"]))


def brier(p: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((p - y) ** 2))


def fit_platt(x: np.ndarray, y: np.ndarray, iterations: int = 100) -> list[float]:
    """[intercept, slope per column of x]: Newton's method on the log-loss of Platt's targets,
    halving a step that does not lower it."""
    positives = float(y.sum())
    negatives = len(y) - positives
    target = np.where(y > 0, (positives + 1.0) / (positives + 2.0), 1.0 / (negatives + 2.0))
    design = np.column_stack([np.ones(len(y)), x])
    theta = np.zeros(design.shape[1])
    loss = _platt_loss(design, target, theta)
    for _ in range(iterations):
        p = _sigmoid(design @ theta)
        gradient = design.T @ (p - target)
        hessian = (design * (p * (1 - p))[:, None]).T @ design
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        size = 1.0
        while size > 1e-10:
            candidate = theta - size * step
            candidate_loss = _platt_loss(design, target, candidate)
            if candidate_loss <= loss:
                break
            size /= 2
        else:
            break
        theta, improvement, loss = candidate, loss - candidate_loss, candidate_loss
        if improvement <= 1e-15 * max(1.0, loss):
            break
    if not np.all(np.isfinite(theta)):
        raise CalibrationError("--probability platt: the fit did not converge")
    return [float(v) for v in theta]


def _sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))
    return np.asarray(np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))


def _platt_loss(design: np.ndarray, target: np.ndarray, theta: np.ndarray) -> float:
    z = design @ theta
    # -[t·log σ(z) + (1−t)·log(1−σ(z))] = log(1 + e^z) − t·z, written without overflow
    return float(np.sum(np.logaddexp(0.0, z) - target * z))


def fit_isotonic(x: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
    """Breakpoints (x strictly increasing, y non-decreasing) of the isotonic fit of y on x."""
    order = np.argsort(x, kind="stable")
    xs, first, counts = np.unique(x[order], return_index=True, return_counts=True)
    sums = np.add.reduceat(y[order], first)
    blocks: list[list[float]] = []  # [sum, weight, index of the block's first x]
    for i, (total, weight) in enumerate(zip(sums, counts)):
        blocks.append([float(total), float(weight), i])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            total_last, weight_last, _ = blocks.pop()
            blocks[-1][0] += total_last
            blocks[-1][1] += weight_last
    fitted = np.empty(len(xs))
    starts = [int(b[2]) for b in blocks] + [len(xs)]
    for block, start, end in zip(blocks, starts, starts[1:]):
        fitted[start:end] = block[0] / block[1]
    if len(xs) == 1:  # one distinct score: a constant, drawn over [x, x + 1]
        return [float(xs[0]), float(xs[0]) + 1.0], [float(fitted[0])] * 2
    # a point inside a run of equal values changes nothing between its neighbours
    keep = np.ones(len(xs), dtype=bool)
    keep[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    return [float(v) for v in xs[keep]], [float(v) for v in fitted[keep]]
