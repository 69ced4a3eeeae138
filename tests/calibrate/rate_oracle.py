"""A rate of good answers from labels and unlabelled posteriors together, by direct maximum
likelihood (scipy) — the oracle of the semi-supervised EM rate (issue 51)."""

from __future__ import annotations

import numpy as np
from scipy import optimize


def likelihood_rate(p_unlabelled: np.ndarray, y: np.ndarray, fitted: float) -> float:
    """argmax over π of Σ ln π^y (1 − π)^(1−y) + Σ ln(π·p/π₀ + (1 − π)(1 − p)/(1 − π₀)): an
    unlabelled query's density under the mixture at π, up to a factor free of π (p its
    posterior at the fitted π₀)."""

    def loss(rate: float) -> float:
        mixed = rate * p_unlabelled / fitted + (1 - rate) * (1 - p_unlabelled) / (1 - fitted)
        return -float(y.sum() * np.log(rate) + (len(y) - y.sum()) * np.log1p(-rate)
                      + np.sum(np.log(mixed)))  # fmt: skip

    found = optimize.minimize_scalar(loss, bounds=(1e-9, 1 - 1e-9), method="bounded",
                                     options={"xatol": 1e-12})  # fmt: skip
    return float(found.x)
