"""What `duckscore calibrate-answers` reports: each fit, the held-out figures of a fold (base
policy against the fold's fit), their means, and the report as JSON and Markdown."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..answering.policy import AnswerPolicy
from ..core.records import Report
from ..core.session import Session
from .answer_fit import Logistic, fit_non_negative, log_loss
from .calibration_metrics import frame_metrics
from .probability import brier

FIGURES = ("auc", "brier", "log_loss", "level_accuracy")


@dataclass(frozen=True)
class AnswerFit:
    name: str  # `all`, or fold<k>
    model: Logistic  # the non-negative logistic fit of `correct` on the factors
    fitted: tuple[float, ...] | None  # its coefficients rescaled; None when all are 0
    adopted: bool  # whether `policy` has the fitted weights (else the base's)
    cuts: tuple[float, float]  # high_at_least, medium_at_least
    notes: list[str]  # the cuts that kept the base's, and why
    policy: AnswerPolicy
    scores: pd.DataFrame  # percentage, level of every labelled answer under `policy`


@dataclass(frozen=True)
class HeldOutFold:
    fold: int
    test: np.ndarray  # which labelled answers the fold holds out
    fit: AnswerFit  # fitted on the others
    figures: dict[str, dict[str, float | None]]  # base, fitted: fold_figures on `test`

    def record(self) -> dict[str, Any]:
        return {
            "fold": self.fold,
            "answers": int(self.test.sum()),
            "weights": dict(self.fit.policy.weights),
            "levels": dict(self.fit.policy.parameters["levels"]),
            "notes": self.fit.notes,
            **self.figures,
        }


@dataclass(frozen=True)
class AnswerCalibrationReport(Report):
    version: str  # the policy written
    base_version: str
    method: dict[str, Any]
    label_counts: dict[str, int]  # correct, incorrect
    label_set_sha256: str
    adopted: bool  # the fitted weights are the policy's
    reason: str
    weights: dict[str, Any]  # base, fitted (None: every factor 0), written
    levels: dict[str, Any]  # written, base, notes
    folds: list[dict[str, Any]]  # per fold: answers, the fit's weights and levels, base, fitted
    mean: dict[str, dict[str, float | None]]  # base, fitted: the folds' mean figures


def fold_figures(
    session: Session, labelled: pd.DataFrame, scores: pd.DataFrame, train: np.ndarray, y: np.ndarray
) -> dict[str, float | None]:
    """Held-out (not `train`) figures of one policy's scores: AUC of the percentage (None when
    the held-out answers are of one kind), Brier score and log-loss of the logistic map of the
    percentage fitted on the training answers, and the share of answers whose level agrees with
    `correct` (high: predicted correct; medium and low: not)."""
    share = scores["percentage"].to_numpy(dtype=float) / 100.0
    test = ~train
    mapping = fit_non_negative(share[train][:, None], y[train])
    p = mapping.probability(share[test][:, None])
    held_out = pd.DataFrame(
        {"query_id": labelled["answer_id"][test], "score": share[test], "outcome": y[test]}
    )
    high = scores["level"].to_numpy()[test] == "high"
    return {
        "auc": frame_metrics(session, held_out)["auroc"],
        "brier": brier(p, y[test]),
        "log_loss": log_loss(p, y[test]),
        "level_accuracy": float(np.mean(high == (y[test] > 0))),
    }


def mean_figures(folds: list[HeldOutFold]) -> dict[str, dict[str, float | None]]:
    """Per policy (base, fitted), each figure's mean over the folds that have it."""
    return {
        name: {figure: _mean([f.figures[name][figure] for f in folds]) for figure in FIGURES}
        for name in ("base", "fitted")
    }


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def render_markdown(report: AnswerCalibrationReport) -> str:
    """report.md: the decision, the weights and cuts, and the folds table."""
    r = report
    lines = [
        f"# Answer calibration: {r.version}",
        "",
        f"Base policy {r.base_version}; {r.label_counts['correct']} correct and "
        f"{r.label_counts['incorrect']} incorrect labelled answers; "
        f"{r.method['folds']} folds by query (seed {r.method['seed']}).",
        "",
        f"**Weights {'adopted' if r.adopted else 'not adopted'}**: {r.reason}.",
        "",
        "| factor | base | fitted | written |",
        "| --- | --- | --- | --- |",
    ]
    fitted = r.weights["fitted"] or {}
    for factor, base in r.weights["base"].items():
        lines.append(
            f"| {factor} | {base:g} | {_cell(fitted.get(factor))} | {r.weights['written'][factor]:g} |"
        )
    levels = r.levels
    lines += [
        "",
        f"Level cuts (precision targets {r.method['high_precision']:g} and "
        f"{r.method['medium_precision']:g}): high_at_least "
        f"{levels['written']['high_at_least']:g}, medium_at_least "
        f"{levels['written']['medium_at_least']:g} (base {levels['base']['high_at_least']:g}, "
        f"{levels['base']['medium_at_least']:g}).",
        *(f"- {note}" for note in levels["notes"]),
        "",
        "## Held-out folds",
        "",
        "| fold | answers | " + " | ".join(f"{f} base | {f} fitted" for f in FIGURES) + " |",
        "| --- | --- | " + " | ".join("--- | ---" for _ in FIGURES) + " |",
    ]
    rows = [(str(f["fold"]), str(f["answers"]), f) for f in r.folds]
    rows.append(("mean", "", r.mean))
    for fold, answers, figures in rows:
        cells = [f"{_cell(figures['base'][f])} | {_cell(figures['fitted'][f])}" for f in FIGURES]
        lines.append(f"| {fold} | {answers} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
