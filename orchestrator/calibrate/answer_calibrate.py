"""`calibrate_answers()`: labels of correct answers → an answer policy's weights and level cuts
(`duckscore calibrate-answers`; seed 001's future improvement 3, issue 50).

1. The answers are scored with the base policy by `score_answers` into this run's connection
   (Relations): the four factors, the percentage and the level of every answer.
2. The labelled queries are dealt into K folds (tune_grid.assign_folds: sorted, shuffled by the
   seed, round-robin), so the answers of one query are in one fold.
3. Each fit (`all`, and fold k on the other folds' answers) fits non-negative logistic weights
   of the four factors (answer_fit.py), rescaled to the base policy's weight sum, and the level
   cuts by precision targets on its training answers' percentages under those weights.
   Percentages and levels are always the answers SQL's, run with the fit's policy.
4. On each fold's held-out answers the base policy and the fold's fit are compared: AUC of the
   percentage, Brier score and log-loss of a logistic map of the percentage (fitted on the
   fold's training answers), and the accuracy of the level. The fitted weights are adopted only
   when their mean held-out log-loss is not worse than the base weights'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..answering.pipeline import score_answers
from ..answering.policy import ANSWER_POLICY, AnswerPolicy, load_answer_policy
from ..answering.stages import render_answers
from ..core.connection import EngineSettings
from ..core.inputs import Table
from ..core.outputs import atomic_output_dir, check_output_dir, write_json
from ..core.policy import policy_from_parameters
from ..core.render import ident
from ..core.reporting import module_logger
from ..core.session import Relations, Session
from ..core.tables import Column, TableContract
from ..core.validate import check_rows, typed_column
from .answer_fit import fit_non_negative, level_cuts, rescaled
from .answer_report import (
    AnswerCalibrationReport,
    AnswerFit,
    HeldOutFold,
    fold_figures,
    mean_figures,
    render_markdown,
)
from .folds import label_set_sha256
from .policy_file import write_policy_document
from .settings import CalibrationError
from .tune_grid import assign_folds

logger = module_logger(__name__)

FACTORS = ("citation_quality", "answer_quality", "retrieval", "certainty")
ANSWER_LABELS = TableContract(
    name="answer_labels",
    columns=(
        Column("answer_id", "id"),
        Column("correct", "flag"),
    ),
    key=("answer_id",),
)
BASE_TABLE = "acal_base_answers"  # Relations("acal_base")'s answers.parquet


@dataclass(frozen=True)
class AnswerCalibrationSettings:
    folds: int = 5
    seed: int = 42
    high_precision: float = 0.9  # the share of correct answers at or above high_at_least
    medium_precision: float = 0.6  # … at or above medium_at_least


@dataclass(frozen=True)
class AnswerCalibrationResult:
    out_dir: Path
    document: dict[str, Any]  # the policy written
    report: AnswerCalibrationReport


def calibrate_answers(
    answers: Table,
    citations: Table,
    chunks: Table,
    labels: Table,
    out_dir: str | Path,
    *,
    events: Table | None = None,
    base: str = "answer_v1",
    settings: AnswerCalibrationSettings = AnswerCalibrationSettings(),
    engine: EngineSettings | None = None,
) -> AnswerCalibrationResult:
    """Fit `base`'s weights and level cuts to labelled answers; write policy.yaml, report.json,
    report.md and predictions.csv to `out_dir`, all at once or nothing."""
    given = {"--answers": answers, "--citations": citations, "--chunks": chunks}
    given |= {"--events": events, "--labels": labels}
    given["--policy"] = base if Path(base).is_file() else None  # never replaced by --out
    inputs = {option: table for option, table in given.items() if table is not None}
    check_output_dir(out_dir, "--out", inputs)
    base_policy = load_answer_policy(base)
    with Session(engine) as session:
        opened = session.open("labels", ANSWER_LABELS, labels, "--labels")
        logger.info(f"scoring the answers with the base policy {base_policy.version}")
        score_answers(
            answers, citations, chunks, Relations("acal_base"), base, events,
            settings=engine, connection=session.con,
        )  # fmt: skip
        value = typed_column(opened, "answer_id")
        check_rows(
            session.con, opened, f"{value} NOT IN (SELECT answer_id FROM {BASE_TABLE})",
            "answer_id {value} is not in --answers", shown=value,
        )  # fmt: skip
        labelled = _labelled(session)
        folds = _folds(labelled, settings)
        fitter = _Fitter(session, base_policy, events is not None, labelled, settings)
        logger.info(f"fitting on {len(labelled)} labelled answers, {settings.folds}-fold")
        fits = [fitter.fold(k, folds) for k in range(settings.folds)]
        chosen, mean, reason = fitter.final(fits)
        predictions = fitter.predictions(folds, fits, chosen)
    version = f"{base_policy.version}_cal_{chosen.policy.parameters_sha256[:8]}"
    report = _report(version, base_policy, labelled, settings, chosen, fits, mean, reason)
    paths = {option: str(t) for option, t in inputs.items() if isinstance(t, str | Path)}
    document = {
        "answer_policy_version": version,
        "parent_version": base_policy.version,
        "description": f"Weights and level cuts of {base_policy.version} fitted to "
        f"{len(labelled)} labelled answers (duckscore calibrate-answers).",
        "metadata": {
            "label_set_sha256": report.label_set_sha256,
            "label_counts": report.label_counts,
            "inputs": {option[2:]: path for option, path in paths.items()},
            "method": report.method,
            "adopted": report.adopted,
            "reason": report.reason,
            "levels": report.levels,
            "cross_validated": report.mean,
        },
        "parameters": chosen.policy.parameters.thawed(),
    }
    with atomic_output_dir(out_dir, "--out", list(paths.values())) as stage:
        written = write_policy_document(stage / "policy.yaml", document, inputs)
        write_json(stage / "report.json", report.as_record())
        (stage / "report.md").write_text(render_markdown(report), encoding="utf-8")
        predictions.to_csv(stage / "predictions.csv", index=False)
    return AnswerCalibrationResult(Path(out_dir), written, report)


def _labelled(session: Session) -> pd.DataFrame:
    """The labelled answers: their query, factors, base percentage and level, and `correct`."""
    frame = session.frame(
        f"SELECT s.answer_id, s.query_id, {', '.join(f's.{f}' for f in FACTORS)}, "
        "s.percentage, s.level, l.correct "
        f"FROM {BASE_TABLE} AS s JOIN answer_labels AS l ON l.answer_id = s.answer_id "
        "ORDER BY s.answer_id"
    )
    frame["correct"] = frame["correct"].astype(float)
    return frame


def _folds(labelled: pd.DataFrame, settings: AnswerCalibrationSettings) -> pd.Series:
    """Each labelled answer's fold, by its query."""
    queries = sorted(set(labelled["query_id"]))
    if not 2 <= settings.folds <= len(queries):
        raise CalibrationError(
            f"--folds {settings.folds}: needs at least 2 and at most the {len(queries)} "
            "labelled queries (the answers of one query share a fold)"
        )
    fold_of = assign_folds(queries, settings.folds, settings.seed)
    return labelled["query_id"].map(fold_of)


class _Fitter:
    """The fits of one run: each a policy scored by the answers SQL on this session."""

    def __init__(
        self,
        session: Session,
        base: AnswerPolicy,
        with_events: bool,
        labelled: pd.DataFrame,
        settings: AnswerCalibrationSettings,
    ) -> None:
        self.session = session
        self.base = base
        self.with_events = with_events
        self.labelled = labelled
        self.settings = settings
        self.total = math.fsum(base.weights[f] for f in FACTORS)
        self.base_scores = labelled[["percentage", "level"]]

    def fit(self, name: str, train: np.ndarray, adopt: bool = True) -> AnswerFit:
        """Weights (fitted, or the base's when `adopt` is False or the fit gives every factor
        0) and cuts fitted on the `train` answers."""
        rows = self.labelled[train]
        x, y = rows[list(FACTORS)].to_numpy(dtype=float), rows["correct"].to_numpy()
        if y.min() == y.max():
            raise CalibrationError(
                f"fit {name}: its training answers are all "
                f"{'correct' if y[0] else 'incorrect'}; label answers of both kinds, or use "
                "fewer --folds"
            )
        model = fit_non_negative(x, y)
        fitted = rescaled(model.coefficients, self.total)
        weights = fitted if adopt and fitted is not None else None
        policy = self.policy(weights, None)
        scores = self.base_scores if weights is None else self.score(policy, f"acal_{name}")
        targets = (self.settings.high_precision, self.settings.medium_precision)
        cuts, notes = level_cuts(scores["percentage"].to_numpy()[train], y, targets, self.base_cuts)
        final = self.policy(weights, cuts)
        if weights is not None or cuts != self.base_cuts:
            scores = self.score(final, f"acal_{name}")
        return AnswerFit(name, model, fitted, weights is not None, cuts, notes, final, scores)

    @property
    def base_cuts(self) -> tuple[float, float]:
        levels = self.base.parameters["levels"]
        return (levels["high_at_least"], levels["medium_at_least"])

    def policy(
        self, weights: tuple[float, ...] | None, cuts: tuple[float, float] | None
    ) -> AnswerPolicy:
        parameters = self.base.parameters.thawed()
        if weights is not None:
            parameters["weights"] = dict(zip(FACTORS, weights, strict=True))
        if cuts is not None:
            parameters["levels"] = {"high_at_least": cuts[0], "medium_at_least": cuts[1]}
        return AnswerPolicy.of(
            policy_from_parameters(
                ANSWER_POLICY, "calibrated", parameters, "calibrate-answers", self.base.version
            )
        )

    def score(self, policy: AnswerPolicy, table: str) -> pd.DataFrame:
        """The labelled answers' percentage and level under `policy`, by the answers SQL."""
        self.session.create(table, render_answers(policy, self.with_events, ordered=False))
        frame = self.session.frame(
            f"SELECT s.percentage, s.level FROM {ident(table)} AS s "
            "JOIN answer_labels AS l ON l.answer_id = s.answer_id ORDER BY s.answer_id"
        )
        self.session.execute(f"DROP TABLE {ident(table)}")
        return frame

    def fold(self, k: int, folds: pd.Series) -> HeldOutFold:
        test = (folds == k).to_numpy()
        fit = self.fit(f"fold{k}", ~test)
        y = self.labelled["correct"].to_numpy()
        figures = {
            name: fold_figures(self.session, self.labelled, scores, ~test, y)
            for name, scores in (("base", self.base_scores), ("fitted", fit.scores))
        }
        return HeldOutFold(k, test, fit, figures)

    def final(self, folds: list[HeldOutFold]) -> tuple[AnswerFit, dict[str, Any], str]:
        """The `all` fit, its fitted weights adopted only when the folds' mean held-out log-loss
        is not worse than the base weights'; the mean figures and why."""
        mean = mean_figures(folds)
        fitted, base = mean["fitted"]["log_loss"], mean["base"]["log_loss"]
        assert fitted is not None and base is not None  # every fold holds answers out
        adopt = fitted <= base
        chosen = self.fit("all", np.ones(len(self.labelled), dtype=bool), adopt)
        compared = f"the fitted weights' mean held-out log-loss {fitted:.4f} is"
        if not adopt:
            reason = f"{compared} worse than the base weights' {base:.4f}: base weights kept"
        elif not chosen.adopted:
            reason = "the fit gives every factor 0: base weights kept"
        else:
            reason = f"{compared} not worse than the base weights' {base:.4f}: adopted"
        return chosen, mean, reason

    def predictions(
        self, folds: pd.Series, fits: list[HeldOutFold], chosen: AnswerFit
    ) -> pd.DataFrame:
        """Every labelled answer's fold and label; its percentage and level under the base
        policy, its fold's fit (held out) and the policy written."""
        held_out = pd.concat([f.fit.scores[f.test] for f in fits]).sort_index()
        return self.labelled[["answer_id", "query_id"]].assign(
            correct=self.labelled["correct"] > 0,
            fold=folds,
            base_percentage=self.base_scores["percentage"],
            base_level=self.base_scores["level"],
            held_out_percentage=held_out["percentage"],
            held_out_level=held_out["level"],
            percentage=chosen.scores["percentage"],
            level=chosen.scores["level"],
        )


def _report(
    version: str,
    base: AnswerPolicy,
    labelled: pd.DataFrame,
    settings: AnswerCalibrationSettings,
    chosen: AnswerFit,
    folds: list[HeldOutFold],
    mean: dict[str, Any],
    reason: str,
) -> AnswerCalibrationReport:
    correct = labelled["correct"] > 0
    hashed = pd.DataFrame(
        {"query_id": labelled["answer_id"], "label": correct.map({True: "true", False: "false"})}
    )
    return AnswerCalibrationReport(
        version=version,
        base_version=base.version,
        method=_method(settings),
        label_counts={"correct": int(correct.sum()), "incorrect": int((~correct).sum())},
        label_set_sha256=label_set_sha256(hashed),
        adopted=chosen.adopted,
        reason=reason,
        weights={
            "base": dict(base.weights),
            "fitted": _named(chosen.fitted),
            "written": dict(chosen.policy.weights),
        },
        levels={
            "written": dict(chosen.policy.parameters["levels"]),
            "base": dict(base.parameters["levels"]),
            "notes": chosen.notes,
        },
        folds=[f.record() for f in folds],
        mean=mean,
    )


def _named(weights: tuple[float, ...] | None) -> dict[str, float] | None:
    return None if weights is None else dict(zip(FACTORS, weights, strict=True))


def _method(settings: AnswerCalibrationSettings) -> dict[str, Any]:
    from .answer_fit import CUT_DECIMALS, L2, WEIGHT_DECIMALS

    return {
        "weights": "non-negative L2-penalised logistic regression of `correct` on the four "
        "factors, rescaled to the base weight sum",
        "l2": L2,
        "weight_decimals": WEIGHT_DECIMALS,
        "cut_decimals": CUT_DECIMALS,
        "folds": settings.folds,
        "seed": settings.seed,
        "high_precision": settings.high_precision,
        "medium_precision": settings.medium_precision,
    }
