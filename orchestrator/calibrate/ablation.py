"""§9.3 ablation, cross-validated by query: α, β, then each weight of a sub-score the base policy
uses, in turn, over a grid of 0, 0.1, …, 1 (setting one weight rescales the other tuned weights to
keep the sum at 1), keeping the value of best AUC(good vs bad) on the training queries; `passes`
rounds. Every candidate of a step, for every fold, is scored in one query: sql/calibrate/
candidates.sql runs the policy's own SQL stages over (fit, candidate, query), the tuned parameters
read from columns. Also the reference bounds and the §9.2 thresholds of each fit.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core.render import ColumnParameter, RenderedSQL, render
from ..core.reporting import module_logger
from ..core.session import Session
from ..scoring.policy import WEIGHTS
from ..scoring.policy_view import ScorePolicy
from .settings import CalibrationError, CalibrationSettings, Fit

logger = module_logger(__name__)

GRID = tuple(i / 10 for i in range(11))
MIN_GAIN = 0.002  # AUROC gains below this are noise (about 19 of SciFact's 9,558 good-bad pairs)


def tuned_parameters(base: ScorePolicy) -> list[str]:
    """§9.3: α, β and the weights of the sub-scores the base policy uses."""
    return ["alpha", "beta"] + [w for w, value in base.weights.items() if value > 0]


def candidate_values(state: dict[str, Any], name: str, tuned: list[str]) -> list[dict[str, float]]:
    """The grid for one parameter; a weight set to v rescales the other tuned weights to 1 − v
    (when they are all 0, only v = 1 keeps the sum), and `w1` (strength) never reaches 0."""
    if name not in WEIGHTS:
        return [{name: v} for v in GRID]
    others = [w for w in tuned if w in WEIGHTS and w != name]
    rest = sum(state[w] for w in others)
    values = []
    for v in GRID:
        if rest == 0 and v != 1:
            continue
        change = {name: v} | {
            w: round(state[w] * (1 - v) / rest, 6) if rest else 0.0 for w in others
        }
        if others:  # the rounding's drift, so that the weights sum to 1 exactly
            change[others[0]] = round(change[others[0]] + 1 - sum(change.values()), 12)
        if change.get("w1", state.get("w1", 1.0)) > 0:
            values.append(change)
    return values


def choose(
    options: list[dict[str, float]], aucs: list[float | None], name: str, current: float
) -> int:
    """The option of best AUROC; options within MIN_GAIN of it count as tied, and a tie keeps
    the value closest to the current one (then the smaller): a step must earn its change."""
    best = max((a for a in aucs if a is not None), default=None)
    if best is None:
        return min(range(len(options)), key=lambda i: abs(options[i][name] - current))
    tied = [i for i, a in enumerate(aucs) if a is not None and a >= best - MIN_GAIN]
    return min(tied, key=lambda i: (abs(options[i][name] - current), options[i][name]))


def usable_candidates(
    fit: str, name: str, options: list[dict[str, float]], constant: set[tuple[str, int]]
) -> list[int]:
    """The options of a step that do not make the fit's score constant: a constant score has an
    AUROC of exactly 0.5, which can win when every other option ranks worse, and leaves a policy
    that rates every query alike."""
    usable = [i for i in range(len(options)) if (fit, i) not in constant]
    if not usable:
        values = [option[name] for option in options]
        raise CalibrationError(
            f"fit {fit}: every value of {name} tried ({min(values):g} to {max(values):g}) gives "
            "every labelled query of the fit the same score: the features do not tell them apart"
        )
    return usable


class Calibrator:
    """The labelled inputs of one run on a Session, and the rendered candidate SQL."""

    def __init__(
        self, session: Session, base: ScorePolicy, settings: CalibrationSettings, has_qrels: bool
    ) -> None:
        self.session = session
        self.base = base
        self.settings = settings
        self.has_qrels = has_qrels
        self.tuned = tuned_parameters(base)
        nz = base.normalization
        self.reference = nz.mode == "reference"
        by_quantile = nz.coverage == "quantile"
        self.reference_features = (
            [base.strength_evidence, "max_score"]
            + (["coverage"] if by_quantile else [])
            + ["log_chunks"]
        )
        self._candidates_sql: RenderedSQL | None = None

    def _rows(self, template: str, **context: Any) -> list[dict[str, Any]]:
        return self.session.rows(render(f"calibrate/{template}", **context))

    def reference_bounds(self, fits: list[str]) -> dict[str, dict[str, list[float]]]:
        """Each fit's reference bounds (P_lo, P_hi of each feature's per-query best value over
        its training queries); refused for a fit whose training queries have no candidates."""
        rows = self._rows(
            "reference_bounds.sql",
            inputs={"parent_features": "parent_features", "membership": "cal_membership"},
            features=self.reference_features,
            p_lo=self.base.normalization.p_lo,
            p_hi=self.base.normalization.p_hi,
            final="bounds",
        )
        found = {row["fit"]: row for row in rows}
        bounds = {}
        for fit in fits:
            row = found.get(fit, {})
            if any(
                row.get(f"{f}_{end}") is None
                for f in self.reference_features
                for end in ("lo", "hi")
            ):
                raise CalibrationError(
                    f"no candidate parents for the labelled queries of fit {fit}"
                )
            bounds[fit] = {
                f: [float(row[f"{f}_lo"]), float(row[f"{f}_hi"])] for f in self.reference_features
            }
        return bounds

    def _policy_template(self) -> dict[str, Any]:
        """The base parameters with the tuned ones (and reference bounds) read from columns."""
        p = self.base.parameters.thawed()
        for name in self.tuned:
            p[name] = ColumnParameter(name)
        if self.reference:
            nz = dict(p["normalization"])
            nz["reference"] = dict(nz["reference"])
            for f in self.reference_features:
                nz["reference"][f] = [
                    ColumnParameter(f"ref_{f}_lo"),
                    ColumnParameter(f"ref_{f}_hi"),
                ]
            p["normalization"] = nz
        return p

    def parameter_columns(self) -> list[str]:
        refs = (
            [f"ref_{f}_{e}" for f in self.reference_features for e in ("lo", "hi")]
            if self.reference
            else []
        )
        return self.tuned + refs

    def score_candidates(self, rows: list[dict[str, Any]]) -> None:
        """Score candidate rows (fit, scope, candidate, parameters) into the temp table
        cal_predictions (one row per candidate and labelled query of its scope)."""
        self.session.register(
            "cal_candidates",
            pd.DataFrame(rows, columns=["fit", "scope", "candidate"] + self.parameter_columns()),
        )
        if self._candidates_sql is None:
            inputs = {
                "raw_features": "parent_features",
                "parent_features": "candidate_features",
                "membership": "cal_membership",
                "candidates": "cal_candidates",
            }
            self._candidates_sql = render(
                "calibrate/candidates.sql",
                inputs=inputs,
                policy=self._policy_template(),
                final="best",
                parameter_columns=self.parameter_columns(),
                carry=["fit", "candidate", "label_query_id"] + self.parameter_columns(),
            )
        self.session.create("cal_best", self._candidates_sql)
        self.session.create(
            "cal_predictions",
            render(
                "calibrate/predictions.sql",
                inputs={
                    "candidates": "cal_candidates",
                    "membership": "cal_membership",
                    "labels": "cal_labels",
                    "best": "cal_best",
                    "qrels": "cal_qrels" if self.has_qrels else None,
                },
                final="predictions",
            ),
        )

    def aurocs(self, pooled: bool = False) -> dict[tuple[str, int], float | None]:
        """AUROC(good vs bad) per (fit, candidate); `pooled`: the folds' held-out predictions
        together as `cross_validated`, the `all` fit as `in_sample`."""
        fit = (
            "CASE WHEN fit = 'all' THEN 'in_sample' ELSE 'cross_validated' END AS fit"
            if pooled
            else "fit"
        )
        self.session.execute(
            f"CREATE OR REPLACE TEMP VIEW cal_good_bad AS SELECT {fit}, candidate, "
            "query_id, score, outcome FROM cal_predictions WHERE outcome IS NOT NULL"
        )
        rows = self._rows(
            "grouped_auroc.sql", inputs={"predictions": "cal_good_bad"}, final="aurocs"
        )
        return {(r["fit"], r["candidate"]): r["auroc"] for r in rows}

    def constant_candidates(self) -> set[tuple[str, int]]:
        """The (fit, candidate) pairs of cal_predictions that give every labelled query of their
        scope the same score (e.g. all 0): no ranking, and no top-2 ratio when 0."""
        frame = self.session.frame(
            "SELECT fit, candidate FROM cal_predictions GROUP BY fit, candidate "
            "HAVING min(score) = max(score)"
        )
        return {(fit, int(candidate)) for fit, candidate in frame.itertuples(index=False)}

    def thresholds(self) -> dict[str, dict[str, Any]]:
        s = self.settings
        rows = self._rows(
            "thresholds.sql",
            inputs={"predictions": "cal_predictions"},
            bad_quantile=s.bad_quantile,
            good_quantile=s.good_quantile,
            hitl_quantile=s.hitl_quantile,
            target_precision=s.target_precision,
            final="thresholds",
        )
        return {r["fit"]: r for r in rows}

    # -- the procedure --------------------------------------------------------------------
    def row(
        self,
        fit: Fit,
        scope: str,
        candidate: int,
        change: dict[str, float],
        bounds: dict[str, dict[str, list[float]]],
    ) -> dict[str, Any]:
        values = {name: change.get(name, fit.parameters[name]) for name in self.tuned}
        row: dict[str, Any] = {"fit": fit.name, "scope": scope, "candidate": candidate, **values}
        if self.reference:
            for f in self.reference_features:
                row[f"ref_{f}_lo"], row[f"ref_{f}_hi"] = bounds[fit.name][f]
        return row

    def ablate(
        self, fits: dict[str, Fit], bounds: dict[str, dict[str, list[float]]]
    ) -> list[dict[str, Any]]:
        """§9.3, coordinate by coordinate; returns the step table (in-sample and held-out AUC)."""
        table = [self._step_record(fits, bounds, "base", None)]
        for round_no in range(1, self.settings.passes + 1):
            for name in self.tuned:
                logger.info(f"ablation pass {round_no}: {name}")
                rows, options = [], {}
                for fit in fits.values():
                    changes = candidate_values(fit.parameters, name, self.tuned)
                    options[fit.name] = changes
                    rows += [self.row(fit, "train", i, c, bounds) for i, c in enumerate(changes)]
                self.score_candidates(rows)
                aucs, constant = self.aurocs(), self.constant_candidates()
                for fit in fits.values():
                    usable = usable_candidates(fit.name, name, options[fit.name], constant)
                    index = usable[
                        choose(
                            [options[fit.name][i] for i in usable],
                            [aucs.get((fit.name, i)) for i in usable],
                            name,
                            fit.parameters[name],
                        )
                    ]
                    chosen = options[fit.name][index]
                    fit.parameters.update(chosen)
                    fit.steps.append(
                        {
                            "pass": round_no,
                            "parameter": name,
                            "value": chosen[name],
                            "train_auroc": aucs.get((fit.name, index)),
                        }
                    )
                table.append(self._step_record(fits, bounds, name, round_no))
        return table

    def _step_record(
        self,
        fits: dict[str, Fit],
        bounds: dict[str, dict[str, list[float]]],
        name: str,
        round_no: int | None,
    ) -> dict[str, Any]:
        rows = [
            self.row(f, "train" if f.name == "all" else "test", 0, {}, bounds)
            for f in fits.values()
        ]
        self.score_candidates(rows)
        per_fold = [a for (fit, _), a in self.aurocs().items() if fit != "all" and a is not None]
        pooled = self.aurocs(pooled=True)
        return {
            "pass": round_no,
            "parameter": name,
            "value": None if round_no is None else fits["all"].parameters[name],
            "parameters": {k: fits["all"].parameters[k] for k in self.tuned},
            "in_sample_auroc": pooled.get(("in_sample", 0)),
            "cross_validated_auroc": sum(per_fold) / len(per_fold) if per_fold else None,
            "pooled_held_out_auroc": pooled.get(("cross_validated", 0)),
        }
