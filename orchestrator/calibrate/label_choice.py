"""With labels (issue 51): the p_good map a recalibration writes, chosen by cross-validated Brier
score on the labels among

- `shipped`: the old policy's map;
- `label_free`: the map carried over without labels (calibrate/adaptation.py), when it moved;
- `prior`, `quantile`: the label-free maps it did not carry over (adaptation.alternatives) —
  the explanations of a shift a diagnosis cannot tell apart, labels can;
- `prior_labels`: the shipped map's prior moved to the rate of the labels and the unlabelled
  log together (semi-supervised EM, adaptation.log_evidence), where the log is evidence;
- `refit`: σ(a + b·logit p) of the label-free map's p, shrunk toward it (refit_on_labels);
- `intercept`: σ(a + logit p), the intercept alone;
- `rate`: σ(a), the labels' rate for every query (the score no evidence).

The shipped and label-free maps (and the alternatives) were not fitted on the labels: their
Brier score on them is already out of sample. A fitted map is cross-validated whole
(recalibration.held_out): the refit's prior strength, `prior_labels`' rate made inside each
fold. The lowest wins; a tie keeps the earlier candidate, so the shipped map first. Where the
log is evidence (nearest_the_log), the labels only narrow the candidates to those they cannot
tell from the lowest, and the log's rate picks among them. Where it is not, `rate` is written
unless the lowest beats it at the 95 % level: a map that reads the score is fitted to a few
labels only where they show the score to be evidence on this domain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..core.session import Session
from .adaptation import LabelFree, LogEvidence
from .calibration_metrics import frame_metrics
from .probability import apply_map, brier
from .probability_report import ece_consistency
from .recalibration import (
    LogitMap,
    compose,
    fit_intercept,
    fit_rate,
    held_out,
    refit_on_labels,
    refit_within,
)
from .recalibration_summary import LabelRefit
from .settings import CalibrationError

TIE = 1e-12  # Brier scores this close are equal (a tie keeps the earlier candidate)
# Standard errors of the paired difference in held-out Brier score: a map is told from the best
# when above it by more than one (Breiman's one-standard-error rule); the score is evidence on a
# domain the log cannot speak for only when a map of it beats the labels' rate at the 95 % level.
ONE_STANDARD_ERROR = 1.0
EVIDENCE = 1.96


@dataclass(frozen=True)
class Candidate:
    name: str
    block: dict[str, Any]  # the probability block it would write
    held_out: np.ndarray  # each label's p_good from a map that did not see it
    moves_thresholds: bool  # a map moved by quantile: the scale moved, so do the thresholds


@dataclass(frozen=True)
class LabelChoice:
    chosen: Candidate
    report: LabelRefit


def choose_by_labels(
    session: Session,
    labelled: pd.DataFrame,
    shipped: dict[str, Any],
    label_free: LabelFree,
    alternatives: dict[str, dict[str, Any]],
    log: LogEvidence | None,
    folds: int,
    seed: int,
) -> LabelChoice:
    """The candidate of lowest cross-validated Brier score on `labelled` (its `outcome`), and
    what the report records of the choice."""
    y = labelled["outcome"].to_numpy()
    minority = int(min(y.sum(), len(y) - y.sum()))
    used_folds = min(folds, minority)
    if used_folds < 2:
        raise CalibrationError(
            f"--labels: {minority} query of one outcome (good / not good); cross-validation "
            "needs at least 2 of each"
        )
    carried, moves = label_free.block, label_free.moves_thresholds
    p_good = apply_map(carried, labelled)
    refit = refit_on_labels(p_good, y, LogitMap(0.0, 1.0), used_folds, seed)
    intercept = fit_intercept(p_good, y)
    candidates = [Candidate("shipped", shipped, apply_map(shipped, labelled), False)]
    if carried != shipped:
        candidates.append(Candidate("label_free", carried, p_good, moves))
    candidates += [
        Candidate(name, block, apply_map(block, labelled), name == "quantile")
        for name, block in alternatives.items()
    ]
    p_shipped = candidates[0].held_out
    for name, fit in ({} if log is None else log.fitted).items():
        found = fit(p_shipped, y)
        if found is not None:
            held = held_out(p_shipped, y, used_folds, seed, fit)
            candidates.append(Candidate(name, compose(shipped, found), held, False))
    by_rate = Candidate(
        "rate",
        compose(carried, fit_rate(p_good, y)),
        held_out(p_good, y, used_folds, seed, fit_rate),
        moves,
    )
    candidates += [
        Candidate(
            "refit",
            compose(carried, refit.fitted),
            held_out(p_good, y, used_folds, seed, refit_within(used_folds, seed)),
            moves,
        ),
        Candidate(
            "intercept",
            compose(carried, intercept),
            held_out(p_good, y, used_folds, seed, fit_intercept),
            moves,
        ),
        by_rate,
    ]
    cv_brier = {c.name: brier(c.held_out, y) for c in candidates}
    best = min(cv_brier.values())
    chosen = next(c for c in candidates if cv_brier[c.name] <= best + TIE)
    if log is not None:
        chosen = nearest_the_log(candidates, chosen, y, log)
    elif within(by_rate, chosen, y, EVIDENCE):
        # neither the log nor the labels show the score to be evidence: the labels' rate
        chosen = by_rate
    frame = labelled.assign(score=chosen.held_out)[["query_id", "score", "outcome"]]
    figures = frame_metrics(session, frame)
    base_rate = float(y.mean())
    report = LabelRefit(
        n=len(y),
        good=int(y.sum()),
        rate_interval_95=[figures["accuracy"]["wilson_lower"], figures["accuracy"]["wilson_upper"]],
        rate_with_the_log=None if log is None else log.rate,
        folds=used_folds,
        cv_brier_by_candidate=cv_brier,
        chosen=chosen.name,
        prior_strength=refit.strength,
        cv_brier_by_prior_strength={str(k): v for k, v in refit.cv_brier.items()},
        cross_validated={
            "brier": figures["brier"],
            "ece": figures["ece"],
            "auroc": figures["auroc"],
            "constant_brier": base_rate * (1.0 - base_rate),
            "ece_of_perfect_calibration": ece_consistency(
                session, labelled.assign(p_good=chosen.held_out), seed
            ),
        },
        map={"intercept": refit.fitted.intercept, "slope": refit.fitted.slope},
        intercept_map={"intercept": intercept.intercept, "slope": intercept.slope},
    )
    return LabelChoice(chosen, report)


def nearest_the_log(
    candidates: list[Candidate], best: Candidate, y: np.ndarray, log: LogEvidence
) -> Candidate:
    """Among the candidates the labels cannot tell from the best (a held-out Brier score above
    its by no more than one standard error of the paired difference), the one whose mean p_good
    on the whole log is nearest the rate of the labels and the log together; a tie keeps the
    earlier. A few labels drawn with a rate off the log's pull every map fitted to them along."""

    def distance(candidate: Candidate) -> float:
        return abs(float(apply_map(candidate.block, log.decisions).mean()) - log.rate)

    return min((c for c in candidates if within(c, best, y, ONE_STANDARD_ERROR)), key=distance)


def within(candidate: Candidate, best: Candidate, y: np.ndarray, errors: float) -> bool:
    """The held-out Brier score of `candidate` above `best`'s by no more than `errors` standard
    errors of the paired difference: the labels cannot tell the two apart at that level."""
    gap = (candidate.held_out - y) ** 2 - (best.held_out - y) ** 2
    return float(gap.mean()) <= errors * float(gap.std(ddof=1)) / math.sqrt(len(y))
