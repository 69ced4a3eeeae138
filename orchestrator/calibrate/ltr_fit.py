"""The two models of learned fusion, fitted on the feature table that sql/fuse/fused.sql's
`ltr_features` stage exports (NULL, a source that did not return the item, arrives as NaN):

- `linear`: a pairwise logistic ranker (RankNet's loss on a linear score): for every pair of a
  query's candidates with different relevance, log(1 + exp(-(s_better - s_worse))), each query's
  pairs weighing 1 in all, plus l2/2 · |w|² on the standardised weights. A NaN counts 0, as the
  SQL's coalesce. Newton's method to machine precision (a strictly convex loss), so the fit does
  not depend on where an iterative solver stops; numpy only.
- `trees`: LightGBM's lambdarank, deterministic (one thread, `deterministic`, fixed seed).

Every fitted number is rounded to the written precision (core/precision.py: at_written_precision)
before anything reads it: the trees' thresholds and leaf values are rounded in LightGBM's own
model text and read back into a Booster, so the Booster returned (`Fitted.predict`) is exactly
the model the recipe holds, and the SQL must equal its predictions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..common.extras import needs_extra
from ..core.errors import DuckscoreError
from ..core.policy import at_written_precision
from ..fusion.ltr import TREE_ARRAYS

MAX_PAIRS = 50_000_000  # the linear model's pairs of one fit (16 bytes of indices each)
PAIR_CHUNK = 200_000  # pairs per block of the Hessian's sum (bounds its memory)
NEWTON_STEPS = 100


@dataclass(frozen=True)
class ModelSettings:
    """How a model is fitted (`duckscore learn`'s options)."""

    kind: str = "trees"
    trees: int = 100
    leaves: int = 15
    learning_rate: float = 0.05
    min_data_in_leaf: int = 20
    l2: float = 1.0
    seed: int = 42

    def recorded(self) -> dict[str, Any]:
        """The settings that shape this kind of model, as the recipe and report record them."""
        if self.kind == "linear":
            return {"loss": "pairwise logistic", "l2": self.l2}
        return {
            "objective": "lambdarank",
            "trees": self.trees,
            "leaves": self.leaves,
            "learning_rate": self.learning_rate,
            "min_data_in_leaf": self.min_data_in_leaf,
            "seed": self.seed,
        }


@dataclass(frozen=True)
class Fitted:
    model: dict[str, Any]  # the recipe's ltr.model
    importances: list[float]  # per feature, summing to 1 (all 0 for a model that learnt nothing)
    predict: Callable[[np.ndarray], np.ndarray]  # the library's scores of `model` (NaN: missing)
    pairs: int  # the ordered pairs of candidates the fit learnt from


def fit(
    features: np.ndarray, relevance: np.ndarray, sizes: list[int], settings: ModelSettings
) -> Fitted:
    """`features` (rows grouped by query, `sizes` rows per query, in order) and their relevance
    grades (whole numbers >= 0 for trees)."""
    pairs = count_pairs(relevance, sizes)
    if settings.kind == "linear":
        return _fit_linear(features, relevance, sizes, settings.l2, pairs)
    return _fit_trees(features, relevance, sizes, settings, pairs)


def count_pairs(relevance: np.ndarray, sizes: list[int]) -> int:
    total, start = 0, 0
    for size in sizes:
        grades = np.sort(relevance[start : start + size])
        start += size
        # pairs (i, j) with grade_i > grade_j: for each row, the rows of a lower grade
        total += int(np.searchsorted(grades, grades, side="left").sum())
    return total


def lightgbm_module() -> Any:
    try:
        import lightgbm
    except ImportError:
        raise DuckscoreError(needs_extra("duckscore learn --model trees", "ltr")) from None
    return lightgbm


def _fit_trees(
    features: np.ndarray, relevance: np.ndarray, sizes: list[int], s: ModelSettings, pairs: int
) -> Fitted:
    lgb = lightgbm_module()
    params = {
        "objective": "lambdarank",
        "num_leaves": s.leaves,
        "learning_rate": s.learning_rate,
        "min_data_in_leaf": s.min_data_in_leaf,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": 1,
        "seed": s.seed,
        "verbosity": -1,
    }
    data = lgb.Dataset(features, label=relevance, group=sizes, params={"verbosity": -1})
    booster = lgb.train(params, data, num_boost_round=s.trees)
    gains = booster.feature_importance(importance_type="gain").astype(float)
    model, stored = compile_booster(booster)
    return Fitted(
        model,
        _shares(gains),
        lambda x: np.asarray(stored.predict(x, num_threads=1), dtype=float),
        pairs,
    )


def compile_booster(booster: Any) -> tuple[dict[str, Any], Any]:
    """A LightGBM Booster as the recipe's `ltr.model`, at the written precision, and the Booster
    of exactly that model (its thresholds and leaf values rounded in LightGBM's model text, read
    back): what the recipe's SQL must reproduce."""
    lgb = lightgbm_module()
    stored = lgb.Booster(model_str=rounded_model_text(booster.model_to_string()))
    trees = [_flat_tree(info["tree_structure"]) for info in stored.dump_model()["tree_info"]]
    return {"kind": "trees", "trees": trees}, stored


def rounded_model_text(text: str) -> str:
    """LightGBM's model text with every threshold and leaf value at the written precision. The
    `tree_sizes` line (byte offsets of the trees) is dropped: LightGBM then reads the trees in
    order, as their lengths have changed."""
    lines = []
    for line in text.splitlines():
        key, sep, values = line.partition("=")
        if sep and key == "tree_sizes":
            continue
        if sep and key in ("threshold", "leaf_value"):
            rounded = (repr(at_written_precision(float(v))) for v in values.split())
            lines.append(f"{key}=" + " ".join(rounded))
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def _flat_tree(structure: dict[str, Any]) -> dict[str, Any]:
    """A tree of LightGBM's dump_model() as the recipe holds it: its arrays by split index, a
    negative child ~leaf (LightGBM's own text format)."""
    splits = _count_splits(structure)
    tree: dict[str, Any] = {name: [None] * splits for name in TREE_ARRAYS}
    tree["leaf_value"] = [None] * (splits + 1)

    def visit(node: dict[str, Any]) -> int:
        if "split_index" not in node:
            leaf = int(node.get("leaf_index", 0))
            tree["leaf_value"][leaf] = float(node["leaf_value"])
            return ~leaf
        if node["decision_type"] != "<=":
            raise DuckscoreError(f"LightGBM split {node['decision_type']!r}: only <= is compiled")
        i = node["split_index"]
        tree["split_feature"][i] = node["split_feature"]
        tree["threshold"][i] = float(node["threshold"])
        tree["default_left"][i] = bool(node["default_left"])
        tree["missing"][i] = str(node["missing_type"]).lower()
        tree["left_child"][i] = visit(node["left_child"])
        tree["right_child"][i] = visit(node["right_child"])
        return int(i)

    visit(structure)
    return tree


def _count_splits(node: dict[str, Any]) -> int:
    if "split_index" not in node:
        return 0
    return 1 + _count_splits(node["left_child"]) + _count_splits(node["right_child"])


def _shares(values: np.ndarray) -> list[float]:
    total = math.fsum(values)
    return [float(v) / total if total > 0 else 0.0 for v in values]


def _pairs(relevance: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (better, worse) pair of rows of one query, and its weight: 1 / the query's pairs."""
    better, worse, weight = [], [], []
    start = 0
    for size in sizes:
        grades = relevance[start : start + size]
        i, j = np.nonzero(grades[:, None] > grades[None, :])
        if len(i):
            better.append(i + start)
            worse.append(j + start)
            weight.append(np.full(len(i), 1.0 / len(i)))
        start += size
    if not better:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    return np.concatenate(better), np.concatenate(worse), np.concatenate(weight)


def _fit_linear(
    features: np.ndarray, relevance: np.ndarray, sizes: list[int], l2: float, pairs: int
) -> Fitted:
    if pairs > MAX_PAIRS:
        raise DuckscoreError(
            f"--model linear: {pairs:,} pairs of judged candidates, more than {MAX_PAIRS:,}; "
            "judge fewer queries or use --model trees"
        )
    x = np.nan_to_num(features.astype(float), nan=0.0)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    better, worse, weight = _pairs(relevance, sizes)
    queries = max(1, sum(1 for _ in _queries_with_pairs(relevance, sizes)))
    weight = weight / queries  # the loss is a mean over the queries that have pairs
    w = _newton(z, better, worse, weight, l2)
    weights = w / scale
    intercept = -math.fsum(weights * mean)
    model = {
        "kind": "linear",
        "intercept": at_written_precision(float(intercept)),
        "weights": [at_written_precision(float(v)) for v in weights],
    }
    stored_weights = np.array(model["weights"], dtype=float)
    stored_intercept = float(model["intercept"])

    def predict(rows: np.ndarray) -> np.ndarray:
        scores: np.ndarray = np.nan_to_num(rows.astype(float), nan=0.0) @ stored_weights
        return scores + stored_intercept

    return Fitted(model, _shares(np.abs(w)), predict, pairs)


def _queries_with_pairs(relevance: np.ndarray, sizes: list[int]) -> Any:
    start = 0
    for size in sizes:
        grades = relevance[start : start + size]
        start += size
        if len(grades) and grades.max() > grades.min():
            yield size


def _newton(
    z: np.ndarray, better: np.ndarray, worse: np.ndarray, weight: np.ndarray, l2: float
) -> np.ndarray:
    """argmin of Σ weight · log(1 + exp(-(z_b - z_w)·w)) + l2/2 |w|² by damped Newton steps."""
    n = z.shape[1]
    w = np.zeros(n)

    def loss(v: np.ndarray) -> float:
        margin = z[better] @ v - z[worse] @ v
        return float(np.sum(weight * np.logaddexp(0.0, -margin)) + 0.5 * l2 * (v @ v))

    current = loss(w)
    for _ in range(NEWTON_STEPS):
        gradient = l2 * w
        hessian = l2 * np.eye(n)
        for start in range(0, len(better), PAIR_CHUNK):
            b, v = better[start : start + PAIR_CHUNK], worse[start : start + PAIR_CHUNK]
            d = z[b] - z[v]
            p = 1.0 / (1.0 + np.exp(d @ w))  # sigmoid(-margin)
            c = weight[start : start + PAIR_CHUNK]
            gradient -= d.T @ (c * p)
            hessian += d.T @ (d * (c * p * (1.0 - p))[:, None])
        if not np.any(hessian) or np.max(np.abs(gradient)) < 1e-13:
            break
        step = np.linalg.solve(hessian + 1e-12 * np.eye(n), gradient)
        found = halving_step(loss, w, step, current)
        if found is None:
            break
        candidate, value = found
        if np.max(np.abs(candidate - w)) <= 1e-15 * max(1.0, float(np.max(np.abs(w)))):
            w = candidate
            break
        w, current = candidate, value
    return w


def halving_step(
    loss: Callable[[np.ndarray], float], x: np.ndarray, step: np.ndarray, current: float
) -> tuple[np.ndarray, float] | None:
    """x - t · step and its loss for the largest t of 1, 1/2, 1/4, … (above 1e-12) whose loss
    is not above `current`; None when there is none."""
    t = 1.0
    while t > 1e-12:
        candidate = x - t * step
        value = loss(candidate)
        if value <= current:
            return candidate, value
        t /= 2
    return None
