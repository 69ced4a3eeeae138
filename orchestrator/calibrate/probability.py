"""P(good answer) for a calibrated policy (issue 24): Platt scaling, beta calibration or isotonic
regression of the label `good` on the policy's own decisions, fitted here and applied by the score
SQL (stage `probabilities` of sql/score/queries.sql).

A query without candidates counts as best score 0 and top-2 ratio 0, here as in the SQL.

- Platt: logistic regression on Platt's smoothed targets ((N+ + 1)/(N+ + 2) for a good query,
  1/(N- + 2) for the others), by Newton's method — scikit-learn's `_sigmoid_calibration`
  minimises the same loss. Features: the best OverallScore, and the top-2 ratio beside it when
  that lowers the held-out Brier score of the calibration's folds.
- beta (Kull, Silva Filho & Flach, AISTATS 2017): the same fit on ln s′ and ln(1 − s′), s′ the
  best score clipped by BETA_CLIP. Kull et al. keep the slope of ln s′ at or above 0 and that of
  ln(1 − s′) at or below 0 (a map that rises with the score): a slope of the wrong sign drops its
  feature and the rest is refitted, as the betacal package does (again if need be: with neither
  feature left, the map is a constant).
- isotonic: pool-adjacent-violators on the best score (equal scores pooled first), kept as the
  breakpoints scikit-learn's IsotonicRegression interpolates between (clipped beyond the ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..core.policy import at_written_precision
from ..scoring.policy import BETA_CLIP, BETA_FEATURES
from .settings import CalibrationError

PLATT_BELOW = 1000  # labels; with more, isotonic (scikit-learn: it overfits small sets)
FEATURES = ("best_overall_score", "top2_ratio")
BETA_SIGNS = (1.0, -1.0)  # the sign a beta slope may take, per BETA_FEATURES (0 allowed)


@dataclass(frozen=True)
class Variant:
    """One way to map decisions to P(good): a method and the features it reads."""

    method: str
    features: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.method}({', '.join(self.features)})"


def chosen_method(method: str, labels: int) -> str:
    """The method whose variants are compared: `auto` is isotonic from PLATT_BELOW labels, and
    below stays `auto` (Platt's variants and beta's)."""
    if method != "auto" or labels < PLATT_BELOW:
        return method
    return "isotonic"


def variants(method: str) -> list[Variant]:
    """The candidates a calibration compares under cross-validation, simplest first (a tie in
    held-out Brier keeps the earlier)."""
    if method == "isotonic":
        return [Variant("isotonic", FEATURES[:1])]
    platt = [Variant("platt", FEATURES[:1]), Variant("platt", FEATURES)]
    beta = [Variant("beta", FEATURES[:1])]
    return {"platt": platt, "beta": beta, "auto": platt + beta}[method]


def choose_variant(
    method: str, trained: dict[str, pd.DataFrame], held_out: dict[str, pd.DataFrame]
) -> tuple[Variant, dict[str, float]]:
    """The variant of `method` whose maps, each fitted on a fold's training decisions, give the
    folds' held-out decisions the lowest Brier score (a tie keeps the earlier), and that score of
    every variant by name."""
    outcomes = np.concatenate([outcome(frame) for frame in held_out.values()])
    held_out_brier = {
        v.name: brier(
            np.concatenate([apply_map(fit_map(v, trained[n]), f) for n, f in held_out.items()]),
            outcomes,
        )
        for v in variants(method)
    }
    return min(variants(method), key=lambda v: held_out_brier[v.name]), held_out_brier


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
    if variant.method == "beta":
        return {"method": "beta", "beta": fit_beta(x[:, 0], y)}
    xs, ys = fit_isotonic(x[:, 0], y)
    return {"method": "isotonic", "isotonic": {"x": xs, "y": ys}}


def apply_map(block: dict[str, Any], decisions: pd.DataFrame) -> np.ndarray:
    """The map applied in Python (the SQL applies it in the score run)."""
    method = block["method"]
    score = feature_matrix(decisions, FEATURES[:1])[:, 0]
    if method == "isotonic":
        return np.asarray(np.interp(score, block["isotonic"]["x"], block["isotonic"]["y"]))
    if method == "platt":
        keys, x = FEATURES, feature_matrix(decisions, FEATURES)
    else:
        keys, x = BETA_FEATURES, beta_features(score)
    c = block[method]
    return _sigmoid(c["intercept"] + x @ np.array([c[k] for k in keys]))


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
        raise CalibrationError("p_good: the logistic fit did not converge")
    return [float(v) for v in theta]


def beta_features(score: np.ndarray) -> np.ndarray:
    """The columns of BETA_FEATURES: ln s′ and ln(1 − s′), s′ the score clipped by BETA_CLIP."""
    clipped = np.clip(score, BETA_CLIP, 1.0 - BETA_CLIP)
    return np.column_stack([np.log(clipped), np.log(1.0 - clipped)])


def fit_beta(score: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """The beta map's coefficients: fit_platt on beta_features, a slope of the wrong sign (see
    BETA_SIGNS) dropping its feature (0) and the rest refitted until every sign holds."""
    x = beta_features(score)
    kept = list(range(len(BETA_FEATURES)))
    while True:
        intercept, *slopes = fit_platt(x[:, kept], y)
        wrong = [k for k, slope in zip(kept, slopes) if slope * BETA_SIGNS[k] < 0]
        if not wrong:
            break
        kept.remove(wrong[0])
    coefficients = dict.fromkeys(BETA_FEATURES, 0.0) | {
        BETA_FEATURES[k]: slope for k, slope in zip(kept, slopes)
    }
    return {"intercept": intercept, **coefficients}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))
    return np.asarray(np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))


def _platt_loss(design: np.ndarray, target: np.ndarray, theta: np.ndarray) -> float:
    z = design @ theta
    # -[t·log σ(z) + (1−t)·log(1−σ(z))] = log(1 + e^z) − t·z, written without overflow
    return float(np.sum(np.logaddexp(0.0, z) - target * z))


def fit_isotonic(x: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
    """Breakpoints (x strictly increasing, y non-decreasing) of the isotonic fit of y on x. The
    scores are pooled at the precision a policy file writes them: two that round to one number
    would otherwise be two breakpoints the file holds as one x twice, which no policy loads."""
    x = np.asarray(at_written_precision([float(v) for v in x]))
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
