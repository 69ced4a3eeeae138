"""`duckscore calibrate`: labels → a new, versioned score policy (seed 000 §9, issue 4).

1. Reference quantiles (when the base policy normalises by `reference`): P_lo / P_hi of each
   feature's per-query best value over the labelled queries (sql/calibrate/reference_bounds.sql).
2. §9.3 ablation, cross-validated by query: α, β, then each weight of a sub-score the base policy
   uses, in turn, over a grid of 0, 0.1, …, 1 (setting one weight rescales the other tuned
   weights to keep the sum at 1), keeping the value of best AUC(good vs bad) on the training
   queries; `passes` rounds. Every candidate of a step, for every fold, is scored in one query
   (sql/calibrate/candidates.sql runs the policy's own SQL stages over (fit, candidate, query)).
3. §9.2 thresholds on the final parameters (sql/calibrate/thresholds.sql).
4. The same procedure on each fold's training queries scores the fold's held-out queries: the
   `cross_validated` figures are on queries the calibration never saw.

Folds are stratified by label: within each label, query ids sorted, shuffled by `seed`, dealt
round-robin. Everything is deterministic for given inputs, seed and settings.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .calibration_metrics import fetch_rows
from .contracts import LABELS, PARENT_FEATURES, QRELS
from .engine import EngineSettings, connect
from .errors import DuckscoreError, InputError
from .inputs import OpenedInput, open_input, schema_of
from .policy import Policy, load_policy, policy_from_parameters
from .progress import SILENT, Progress
from .render import ColumnParameter, RenderedSQL, ident, render
from .runner import execute, first_row
from .score import SCORE_POLICY, WEIGHTS, check_evidence_columns
from .sqlcheck import check_sql

GRID = tuple(i / 10 for i in range(11))
THRESHOLD_METHODS = ("quantile", "precision")
CLASSES = ("good", "ambiguous", "bad")
MIN_GAIN = 0.002  # AUROC gains below this are noise (about 15 of SciFact's 9,558 good-bad pairs)
CONFIDENCE = 0.05  # a class quantile needs n with (1 - tail)^n <= 0.05 (Wilks)


class CalibrationError(DuckscoreError):
    """The labels cannot support a calibration (too few, or thresholds that invert)."""


@dataclass(frozen=True)
class CalibrationSettings:
    folds: int = 5
    seed: int = 0
    passes: int = 2
    thresholds: str = "quantile"
    target_precision: float = 0.85
    bad_quantile: float = 0.9
    good_quantile: float = 0.1
    hitl_quantile: float = 0.7

    def check(self) -> None:
        if self.folds < 2:
            raise DuckscoreError(f"--folds must be at least 2, got {self.folds}")
        if self.passes < 1:
            raise DuckscoreError(f"--passes must be at least 1, got {self.passes}")
        if self.thresholds not in THRESHOLD_METHODS:
            raise DuckscoreError(f"--thresholds must be one of {', '.join(THRESHOLD_METHODS)}")
        if not 0.5 <= self.hitl_quantile <= 0.7:
            raise DuckscoreError(f"--hitl-quantile must be in the seed's P50–P70 band, got {self.hitl_quantile}")
        if not 0 < self.target_precision < 1:
            raise DuckscoreError(f"--target-precision must be in (0, 1), got {self.target_precision}")


@dataclass
class Fit:
    """One calibration: on every labelled query (`all`) or on the training queries of a fold."""

    name: str
    parameters: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    thresholds: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CalibrationResult:
    policy_path: Path
    document: dict[str, Any]
    fits: dict[str, Fit]
    predictions: pd.DataFrame  # held-out predictions of every fold, and in-sample of `all`
    ablation: list[dict[str, Any]]


def minimum_labels(quantile: float) -> int:
    """Labels needed before the sample's extreme bounds the quantile with 95% confidence."""
    tail = min(quantile, 1 - quantile)
    return math.ceil(math.log(CONFIDENCE) / math.log(1 - tail))


def label_set_sha256(labels: pd.DataFrame) -> str:
    lines = sorted(f"{q}\t{label}\n" for q, label in zip(labels["query_id"], labels["label"]))
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def assign_folds(labels: pd.DataFrame, folds: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    assigned: dict[str, int] = {}
    for label in CLASSES:
        ids = sorted(labels.loc[labels["label"] == label, "query_id"])
        rng.shuffle(ids)
        assigned.update({query_id: i % folds for i, query_id in enumerate(ids)})
    return assigned


def tuned_parameters(base: dict[str, Any]) -> list[str]:
    """§9.3: α, β and the weights of the sub-scores the base policy uses."""
    return ["alpha", "beta"] + [w for w in WEIGHTS if base[w] > 0]


def candidate_values(state: dict[str, Any], name: str, tuned: list[str]) -> list[dict[str, float]]:
    """The grid for one parameter; a weight set to v rescales the other tuned weights to 1 − v."""
    values = []
    for v in GRID:
        if name not in WEIGHTS:
            values.append({name: v})
            continue
        others = [w for w in tuned if w in WEIGHTS and w != name]
        rest = sum(state[w] for w in others)
        if (name == "w1" and v == 0) or (rest == 0 and v != 1) or (not others and v != 1):
            continue
        change = {name: v} | {w: round(state[w] * (1 - v) / rest, 6) for w in others} if rest else {name: v}
        drift = 1 - sum(change.values()) - sum(state[w] for w in tuned if w in WEIGHTS and w not in change)
        if others:
            change[others[0]] = round(change[others[0]] + drift, 12)
        if change.get("w1", state.get("w1", 1.0)) <= 0:  # strength always counts
            continue
        values.append(change)
    return values


def choose(options: list[dict[str, float]], aucs: list[float | None], name: str, current: float) -> int:
    """The option of best AUROC; options within MIN_GAIN of it count as tied, and a tie keeps
    the value closest to the current one (then the smaller): a step must earn its change."""
    best = max((a for a in aucs if a is not None), default=None)
    if best is None:
        return min(range(len(options)), key=lambda i: abs(options[i][name] - current))
    tied = [i for i, a in enumerate(aucs) if a is not None and a >= best - MIN_GAIN]
    return min(tied, key=lambda i: (abs(options[i][name] - current), options[i][name]))


class Calibrator:
    """Holds the connection, the labelled inputs and the rendered candidate SQL of one run."""

    def __init__(self, con: duckdb.DuckDBPyConnection, base: Policy, settings: CalibrationSettings,
                 has_qrels: bool) -> None:
        self.con = con
        self.base = base
        self.settings = settings
        self.has_qrels = has_qrels
        self.tuned = tuned_parameters(base.parameters)
        nz = base.parameters["normalization"]
        self.reference = nz["mode"] == "reference"
        by_quantile = nz["coverage"] == "quantile"
        self.reference_features = [base.parameters["strength_evidence"], "max_score"] + \
            (["coverage"] if by_quantile else []) + ["log_chunks"]
        self.rendered: list[RenderedSQL] = []
        self._candidates_sql: RenderedSQL | None = None

    # -- SQL ------------------------------------------------------------------------------
    def _render(self, template: str, schema_tables: list[str], **context: Any) -> tuple[RenderedSQL, dict[str, dict[str, str]]]:
        rendered = render(f"calibrate/{template}", **context)
        self.rendered.append(rendered)
        return rendered, {t: schema_of(self.con, t) for t in schema_tables}

    def _rows(self, template: str, schema_tables: list[str], **context: Any) -> list[dict[str, Any]]:
        return fetch_rows(self.con, *self._render(template, schema_tables, **context))

    def _materialise(self, template: str, target: str, schema_tables: list[str], **context: Any) -> None:
        rendered, schema = self._render(template, schema_tables, **context)
        check_sql(rendered, schema)
        execute(self.con, f"CREATE OR REPLACE TEMP TABLE {target} AS {rendered.text}", rendered)

    def reference_bounds(self) -> dict[str, dict[str, list[float]]]:
        rows = self._rows("reference_bounds.sql", ["parent_features", "cal_membership"],
                          inputs={"parent_features": "parent_features", "membership": "cal_membership"},
                          features=self.reference_features,
                          p_lo=self.base.parameters["normalization"]["p_lo"],
                          p_hi=self.base.parameters["normalization"]["p_hi"], final="bounds")
        bounds = {}
        for row in rows:
            per_feature = {}
            for f in self.reference_features:
                lo, hi = row[f"{f}_lo"], row[f"{f}_hi"]
                if lo is None or hi is None:
                    raise CalibrationError(f"no candidate parents for the labelled queries of fit {row['fit']}")
                per_feature[f] = [float(lo), float(hi)]
            bounds[row["fit"]] = per_feature
        return bounds

    def _policy_template(self) -> dict[str, Any]:
        """The base parameters with the tuned ones (and reference bounds) read from columns."""
        p = {k: v for k, v in self.base.parameters.items()}
        for name in self.tuned:
            p[name] = ColumnParameter(name)
        if self.reference:
            nz = dict(p["normalization"])
            nz["reference"] = dict(nz["reference"])
            for f in self.reference_features:
                nz["reference"][f] = [ColumnParameter(f"ref_{f}_lo"), ColumnParameter(f"ref_{f}_hi")]
            p["normalization"] = nz
        return p

    def parameter_columns(self) -> list[str]:
        refs = [f"ref_{f}_{e}" for f in self.reference_features for e in ("lo", "hi")] if self.reference else []
        return self.tuned + refs

    def score_candidates(self, rows: list[dict[str, Any]]) -> None:
        """Score candidate rows (fit, scope, candidate, parameters) into the temp table
        cal_predictions (one row per candidate and labelled query of its scope)."""
        table_from_frame(self.con, "cal_candidates",
                         pd.DataFrame(rows, columns=["fit", "scope", "candidate"] + self.parameter_columns()))
        inputs = {"raw_features": "parent_features", "parent_features": "candidate_features",
                  "membership": "cal_membership", "candidates": "cal_candidates"}
        if self._candidates_sql is None:
            self._candidates_sql = render("calibrate/candidates.sql", inputs=inputs,
                                          policy=self._policy_template(), final="best",
                                          parameter_columns=self.parameter_columns(),
                                          carry=["fit", "candidate", "label_query_id"] + self.parameter_columns())
            check_sql(self._candidates_sql, {t: schema_of(self.con, t) for t in
                                             ("parent_features", "cal_membership", "cal_candidates")})
            self.rendered.append(self._candidates_sql)
        execute(self.con, f"CREATE OR REPLACE TEMP TABLE cal_best AS {self._candidates_sql.text}",
                self._candidates_sql)
        self._materialise("predictions.sql", "cal_predictions",
                  ["cal_candidates", "cal_membership", "cal_labels", "cal_best"]
                  + (["cal_qrels"] if self.has_qrels else []),
                  inputs={"candidates": "cal_candidates", "membership": "cal_membership",
                          "labels": "cal_labels", "best": "cal_best",
                          "qrels": "cal_qrels" if self.has_qrels else None},
                  final="predictions")

    def aurocs(self, pooled: bool = False) -> dict[tuple[str, int], float | None]:
        """AUROC(good vs bad) per (fit, candidate); `pooled`: the folds' held-out predictions
        together as `cross_validated`, the `all` fit as `in_sample`."""
        fit = ("CASE WHEN fit = 'all' THEN 'in_sample' ELSE 'cross_validated' END AS fit"
               if pooled else "fit")
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW cal_good_bad AS SELECT {fit}, candidate, "
                         "query_id, score, outcome FROM cal_predictions WHERE outcome IS NOT NULL")
        rows = self._rows("grouped_auroc.sql", ["cal_good_bad"],
                          inputs={"predictions": "cal_good_bad"}, final="aurocs")
        return {(r["fit"], r["candidate"]): r["auroc"] for r in rows}

    def thresholds(self) -> dict[str, dict[str, Any]]:
        s = self.settings
        rows = self._rows("thresholds.sql", ["cal_predictions"],
                          inputs={"predictions": "cal_predictions"}, bad_quantile=s.bad_quantile,
                          good_quantile=s.good_quantile, hitl_quantile=s.hitl_quantile,
                          target_precision=s.target_precision, final="thresholds")
        return {r["fit"]: r for r in rows}

    # -- the procedure --------------------------------------------------------------------
    def row(self, fit: Fit, scope: str, candidate: int, change: dict[str, float],
            bounds: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
        values = {name: change.get(name, fit.parameters[name]) for name in self.tuned}
        row: dict[str, Any] = {"fit": fit.name, "scope": scope, "candidate": candidate, **values}
        if self.reference:
            for f in self.reference_features:
                row[f"ref_{f}_lo"], row[f"ref_{f}_hi"] = bounds[fit.name][f]
        return row

    def ablate(self, fits: dict[str, Fit], bounds: dict[str, dict[str, list[float]]],
               progress: Progress) -> list[dict[str, Any]]:
        """§9.3, coordinate by coordinate; returns the step table (in-sample and held-out AUC)."""
        table = [self._step_record(fits, bounds, "base", None)]
        for round_no in range(1, self.settings.passes + 1):
            for name in self.tuned:
                progress.step(f"ablation pass {round_no}: {name}")
                rows, options = [], {}
                for fit in fits.values():
                    changes = candidate_values(fit.parameters, name, self.tuned)
                    options[fit.name] = changes
                    rows += [self.row(fit, "train", i, c, bounds) for i, c in enumerate(changes)]
                self.score_candidates(rows)
                aucs = self.aurocs()
                for fit in fits.values():
                    index = choose(options[fit.name], [aucs.get((fit.name, i)) for i in range(len(options[fit.name]))],
                                   name, fit.parameters[name])
                    chosen = options[fit.name][index]
                    fit.parameters.update(chosen)
                    fit.steps.append({"pass": round_no, "parameter": name, "value": chosen[name],
                                      "train_auroc": aucs.get((fit.name, index))})
                table.append(self._step_record(fits, bounds, name, round_no))
        return table

    def _step_record(self, fits: dict[str, Fit], bounds: dict[str, dict[str, list[float]]],
                     name: str, round_no: int | None) -> dict[str, Any]:
        rows = [self.row(f, "train" if f.name == "all" else "test", 0, {}, bounds) for f in fits.values()]
        self.score_candidates(rows)
        per_fold = [a for (fit, _), a in self.aurocs().items() if fit != "all" and a is not None]
        pooled = self.aurocs(pooled=True)
        return {"pass": round_no, "parameter": name,
                "value": None if round_no is None else fits["all"].parameters[name],
                "parameters": {k: fits["all"].parameters[k] for k in self.tuned},
                "in_sample_auroc": pooled.get(("in_sample", 0)),
                "cross_validated_auroc": sum(per_fold) / len(per_fold) if per_fold else None,
                "pooled_held_out_auroc": pooled.get(("cross_validated", 0))}


def table_from_frame(con: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame) -> None:
    """Copy a DataFrame into the temp table `name`."""
    staged = f"{name}_frame"
    con.register(staged, frame)
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {ident(name)} AS SELECT * FROM {ident(staged)}")
    finally:
        con.unregister(staged)


def open_labels(con: duckdb.DuckDBPyConnection, given: str | pd.DataFrame) -> tuple[OpenedInput, pd.DataFrame]:
    opened = open_input(con, LABELS, given, "--labels")
    bad = first_row(
        con,
        "SELECT query_id, label FROM labels WHERE label NOT IN ('good', 'ambiguous', 'bad') "
        "ORDER BY query_id LIMIT 1")
    if bad is not None:
        raise InputError(f"--labels ({opened.given}, query_id={bad[0]!r}): column 'label' is "
                         f"{bad[1]!r}, expected good, ambiguous or bad")
    con.execute("CREATE OR REPLACE TEMP TABLE cal_labels AS SELECT query_id, label FROM labels")
    return opened, con.execute("SELECT query_id, label FROM cal_labels ORDER BY query_id").df()


def check_label_counts(counts: dict[str, int], settings: CalibrationSettings) -> None:
    needs = {"bad": minimum_labels(settings.bad_quantile),
             "good": minimum_labels(settings.good_quantile),
             "ambiguous": minimum_labels(settings.hitl_quantile)}
    for label, needed in needs.items():
        if counts.get(label, 0) < needed:
            raise CalibrationError(
                f"--labels: {counts.get(label, 0)} `{label}` labels; estimating their quantile needs "
                f"at least {needed} (the sample's extreme must bound it with 95% confidence)")


def build_membership(con: duckdb.DuckDBPyConnection, folds: dict[str, int], n_folds: int) -> None:
    rows = [("all", "train", q) for q in folds]
    for k in range(n_folds):
        name = f"fold{k}"
        rows += [(name, "train" if f != k else "test", q) for q, f in folds.items()]
    table_from_frame(con, "cal_membership", pd.DataFrame(rows, columns=["fit", "scope", "query_id"]))


def resolve_thresholds(fit: Fit, found: dict[str, Any], settings: CalibrationSettings) -> dict[str, Any]:
    t_low = found["bad_quantile_score"]
    if settings.thresholds == "quantile":
        t_high = found["good_quantile_score"]
    else:
        t_high = found["lowest_precise_score"]
        if t_high is None:
            raise CalibrationError(f"fit {fit.name}: no threshold reaches a `good` share of "
                                   f"{settings.target_precision:g} among the queries above it")
        t_low = min(t_low, t_high)
    r_hitl = found["ambiguous_ratio_quantile"]
    if r_hitl is None:
        raise CalibrationError(f"fit {fit.name}: no `ambiguous` query has a top-2 ratio (two candidates, a best score above 0)")
    return {"T_low": float(t_low), "T_high": float(t_high), "R_hitl": float(r_hitl),
            "inverted": settings.thresholds == "quantile" and bool(t_low >= t_high)}


def final_parameters(base: Policy, fit: Fit, bounds: dict[str, dict[str, list[float]]],
                     reference_features: list[str]) -> dict[str, Any]:
    parameters = {**base.parameters, **{k: v for k, v in fit.parameters.items()}}
    parameters.update({k: fit.thresholds[k] for k in ("T_low", "T_high", "R_hitl")})
    parameters["T_low"] = min(parameters["T_low"], parameters["T_high"])  # a fold's inversion: no medium band
    parameters["risk_flags"] = {**parameters["risk_flags"],
                                "ambiguous_candidate": {"ratio_at_least": fit.thresholds["R_hitl"]}}
    if fit.name in bounds:
        nz = dict(parameters["normalization"])
        nz["reference"] = {**nz["reference"], **{f: bounds[fit.name][f] for f in reference_features}}
        parameters["normalization"] = nz
    return parameters


def score_fit(con: duckdb.DuckDBPyConnection, policy: Policy, fit: str, scope: str) -> pd.DataFrame:
    """Decisions of `policy` on the fit's queries of `scope`, by the policy's own SQL (score)."""
    from .render import lit
    from .score import score_tables

    con.execute("CREATE OR REPLACE TEMP VIEW cal_fit_features AS SELECT f.* FROM parent_features AS f "
                "JOIN cal_membership AS m ON m.query_id = f.query_id "
                f"WHERE m.fit = {lit(fit)} AND m.scope = {lit(scope)}")
    con.execute("CREATE OR REPLACE TEMP VIEW query_ids AS SELECT query_id FROM cal_membership "
                f"WHERE fit = {lit(fit)} AND scope = {lit(scope)}")
    score_tables(con, policy, top_n=2, with_query_ids=True, features_table="cal_fit_features")
    frame = con.execute("SELECT query_id, best_parent_id, best_overall_score, confidence_level, "
                        "top2_ratio, need_hitl, web_fallback FROM score_contract ORDER BY query_id").df()
    frame.insert(0, "fit", fit)
    return frame


def calibrate(labels: str | Path | pd.DataFrame, out: str | Path, *,
              features: str | Path | pd.DataFrame | None = None,
              log: str | Path | pd.DataFrame | None = None, recipe: str = "canonical_rrf",
              qrels: str | Path | pd.DataFrame | None = None, base: str = "overall_v2",
              version: str | None = None, settings: CalibrationSettings = CalibrationSettings(),
              report_dir: str | Path | None = None, engine: EngineSettings | None = None,
              progress: Progress = SILENT) -> CalibrationResult:
    """Calibrate `base` on labelled queries and write the new policy YAML to `out`."""
    from .calibration_report import build_report, write_policy, write_report

    settings.check()
    if (features is None) == (log is None):
        raise DuckscoreError("give exactly one of --features or --log")
    base_policy = load_policy(SCORE_POLICY, base)
    con = connect(engine)
    progress.step(f"checking inputs (base policy {base_policy.version})")
    opened: dict[str, OpenedInput] = {}
    if features is not None:
        opened["features"] = open_input(con, PARENT_FEATURES, features, "--features")
        where = f"--features ({opened['features'].given})"
    else:
        from .fuse import FUSE_RECIPE, create_fuse_hits, create_parent_features, open_log

        loaded_recipe = load_policy(FUSE_RECIPE, recipe)
        opened["log"], plan = open_log(con, log, loaded_recipe)
        progress.step(f"parent features of {opened['log'].rows:,} hits (recipe {loaded_recipe.version})")
        create_fuse_hits(con, plan)
        create_parent_features(con, plan)
        where = f"--log ({opened['log'].given})"
    check_evidence_columns(con, base_policy, where)
    opened["labels"], label_frame = open_labels(con, labels)
    if qrels is not None:
        opened["qrels"] = open_input(con, QRELS, qrels, "--qrels")
        con.execute("CREATE OR REPLACE TEMP TABLE cal_qrels AS SELECT * FROM qrels")
    counts = {label: int((label_frame["label"] == label).sum()) for label in CLASSES}
    check_label_counts(counts, settings)
    build_membership(con, assign_folds(label_frame, settings.folds, settings.seed), settings.folds)

    calibrator = Calibrator(con, base_policy, settings, qrels is not None)
    names = ["all"] + [f"fold{k}" for k in range(settings.folds)]
    fits = {n: Fit(n, {k: base_policy.parameters[k] for k in calibrator.tuned}) for n in names}
    bounds = calibrator.reference_bounds() if calibrator.reference else {}
    progress.step(f"ablation of {', '.join(calibrator.tuned)} on {len(label_frame)} labelled queries, "
                  f"{settings.folds}-fold")
    ablation = calibrator.ablate(fits, bounds, progress)

    progress.step("thresholds (§9.2)")
    calibrator.score_candidates([calibrator.row(f, "train", 0, {}, bounds) for f in fits.values()])
    found = calibrator.thresholds()
    for fit in fits.values():
        fit.thresholds = resolve_thresholds(fit, found[fit.name], settings) | {
            k: found[fit.name][k] for k in ("n_good", "n_ambiguous", "n_bad", "n_ambiguous_ratios")}
    if fits["all"].thresholds["inverted"]:
        t = fits["all"].thresholds
        raise CalibrationError(
            f"T_low = P{settings.bad_quantile * 100:g} of bad ({t['T_low']:.6g}) is not below "
            f"T_high = P{settings.good_quantile * 100:g} of good ({t['T_high']:.6g}): the classes "
            f"overlap too much for §9.2's quantile thresholds (try --thresholds precision)")

    progress.step("validation on held-out queries")
    policies = {n: policy_from_parameters(
        SCORE_POLICY, version or "calibrated",
        final_parameters(base_policy, fit, bounds, calibrator.reference_features),
        f"calibrate fit {n}", base_policy.version) for n, fit in fits.items()}
    decisions = pd.concat(
        [score_fit(con, policies["all"], "all", "train")]
        + [score_fit(con, policies[n], n, "test") for n in names[1:]], ignore_index=True)
    decisions = decisions.merge(label_frame, on="query_id", how="left")
    if qrels is not None:
        relevant = con.execute("SELECT query_id, parent_id AS best_parent_id, TRUE AS best_parent_relevant "
                               "FROM cal_qrels WHERE relevance > 0").df()
        decisions = decisions.merge(relevant, on=["query_id", "best_parent_id"], how="left")
        decisions["best_parent_relevant"] = decisions["best_parent_relevant"].fillna(False).astype(bool)
    label_hash = label_set_sha256(label_frame)
    version = version or f"{base_policy.base_version}_cal_{label_hash[:8]}"
    report = build_report(con, decisions, ablation, fits, settings, counts, base_policy,
                          has_qrels=qrels is not None)
    document = write_policy(Path(out), version, base_policy, policies["all"].parameters, label_hash,
                            counts, settings, calibrator.tuned, report, opened)
    if report_dir is not None:
        progress.step(f"writing the report to {report_dir}")
        write_report(Path(report_dir), report, decisions, title=f"duckscore calibration: {version}")
    return CalibrationResult(Path(out), document, fits, decisions, ablation)
