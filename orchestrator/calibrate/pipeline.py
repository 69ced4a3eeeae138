"""`calibrate()`: labels → a new, versioned score policy (seed 000 §9, issue 4).

0. Inputs (open_inputs): the label floors before anything else is read, then the labelled
   queries the features or log hold (the others left out, with a warning), the floors again on
   those, and only then the log fused.
1. Reference quantiles (when the base policy normalises by `reference`): P_lo / P_hi of each
   feature's per-query best value over the labelled queries (sql/calibrate/reference_bounds.sql).
2. §9.3 ablation, cross-validated by query (calibrate/ablation.py).
3. §9.2 thresholds on the final parameters (sql/calibrate/thresholds.sql).
4. P(good) (issue 24): Platt scaling or isotonic regression of the label `good` on each fit's
   decisions on its own training queries (calibrate/probability.py), stored in the policy's
   `probability` block; the score SQL applies it.
5. The same procedure on each fold's training queries scores the fold's held-out queries: the
   `cross_validated` figures are on queries the calibration never saw.

Folds are stratified by label (calibrate/folds.py). Everything is deterministic for given inputs,
seed and settings. The default version is `<base>_cal_<8 hex of the final parameters' sha256>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.connection import EngineSettings
from ..core.errors import DuckscoreError
from ..core.inputs import Table
from ..core.policy import at_written_precision
from ..core.render import lit
from ..core.reporting import module_logger
from ..core.session import Session
from ..fusion.log import open_log
from ..fusion.recipe import load_recipe, recipe_record, recipe_record_from_manifest
from ..fusion.recipe_view import Recipe
from ..fusion.stages import fuse_graph
from ..metrics.tables import QRELS
from ..scoring.policy_view import ScorePolicy, load_score_policy, score_policy_from_parameters
from ..scoring.scale import RATIO_QUANTILES_KEY
from ..scoring.stages import (
    FEATURES,
    QUERY_LIST,
    SCORE_CONTRACT,
    check_evidence_columns,
    query_columns,
    score_graph,
)
from ..scoring.tables import PARENT_FEATURES
from .ablation import Calibrator
from .folds import assign_folds, build_membership, check_label_counts, label_set_sha256
from .policy_file import write_policy
from .probability import choose_variant, chosen_method, fit_map, outcome
from .recalibration import QUANTILE_LEVELS, QUANTILES_KEY
from .report import build_report, write_report
from .settings import CLASSES, DEFAULT_SETTINGS, CalibrationError, CalibrationSettings, Fit
from .tables import keep_labels_in, kind_counts, open_labels

logger = module_logger(__name__)


@dataclass(frozen=True)
class CalibrationResult:
    policy_path: Path
    document: dict[str, Any]
    fits: dict[str, Fit]
    predictions: pd.DataFrame  # held-out predictions of every fold, and in-sample of `all`
    ablation: list[dict[str, Any]]
    # each fit's decisions on its training queries, which its probability map was fitted on
    probability_training: pd.DataFrame | None = None


def calibrate(
    labels: Table,
    out: str | Path,
    *,
    features: Table | None = None,
    log: Table | None = None,
    recipe: str = "canonical_rrf",
    recipe_overrides: list[str] | None = None,
    qrels: Table | None = None,
    base: str = "overall_v2",
    version: str | None = None,
    settings: CalibrationSettings = DEFAULT_SETTINGS,
    report_dir: str | Path | None = None,
    engine: EngineSettings | None = None,
) -> CalibrationResult:
    """Calibrate `base` on labelled queries and write the new policy YAML to `out`."""
    if (features is None) == (log is None):
        raise DuckscoreError("give exactly one of --features or --log")
    if features is not None and recipe_overrides:
        raise DuckscoreError(
            "--set-recipe applies to --log (the log is fused first), not to --features"
        )
    base_policy = load_score_policy(base)
    loaded_recipe = None if log is None else load_recipe(recipe, recipe_overrides)
    with Session(engine) as session:
        logger.info(f"checking inputs (base policy {base_policy.version})")
        inputs = open_inputs(
            session, labels, features, log, loaded_recipe, qrels, base_policy, settings
        )
        label_frame, counts = inputs.labels, inputs.counts
        build_membership(
            session, assign_folds(label_frame, settings.folds, settings.seed), settings.folds
        )

        calibrator = Calibrator(session, base_policy, settings, qrels is not None)
        names = ["all"] + [f"fold{k}" for k in range(settings.folds)]
        fits = {n: Fit(n, {k: base_policy.combination[k] for k in calibrator.tuned}) for n in names}
        bounds = calibrator.reference_bounds(names) if calibrator.reference else {}
        logger.info(
            f"ablation of {', '.join(calibrator.tuned)} on {len(label_frame)} labelled queries, "
            f"{settings.folds}-fold"
        )
        ablation = calibrator.ablate(fits, bounds)

        logger.info("thresholds (§9.2)")
        calibrator.score_candidates(
            [calibrator.row(f, "train", 0, {}, bounds) for f in fits.values()]
        )
        found = calibrator.thresholds()
        for fit in fits.values():
            fit.thresholds = resolve_thresholds(fit, found[fit.name], settings) | {
                k: found[fit.name][k]
                for k in ("n_good", "n_ambiguous", "n_bad", "n_ambiguous_ratios")
            }
        if fits["all"].thresholds["inverted"]:
            t = fits["all"].thresholds
            raise CalibrationError(
                f"T_low = P{settings.bad_quantile * 100:g} of bad ({t['T_low']:.6g}) is not below "
                f"T_high = P{settings.good_quantile * 100:g} of good ({t['T_high']:.6g}): the classes "
                f"overlap too much for §9.2's quantile thresholds (try --thresholds precision)"
            )

        logger.info("validation on held-out queries")
        policies = {
            n: score_policy_from_parameters(
                "calibrated",  # the version follows from the final parameters, below
                final_parameters(base_policy, fit, bounds, calibrator.reference_features),
                f"calibrate fit {n}",
                base_policy.version,
            )
            for n, fit in fits.items()
        }
        probability: dict[str, Any] | None = None
        training: pd.DataFrame | None = None
        if settings.probability != "none":
            logger.info("probability of a good answer (issue 24)")
            policies, probability, training = with_probability(
                session, policies, label_frame, settings
            )
        decisions = pd.concat(
            [score_fit(session, policies["all"], "all", "train")]
            + [score_fit(session, policies[n], n, "test") for n in names[1:]],
            ignore_index=True,
        )
        decisions = decisions.merge(label_frame, on="query_id", how="left")
        if qrels is not None:
            relevant = session.frame(
                "SELECT query_id, parent_id AS best_parent_id, "
                "TRUE AS best_parent_relevant FROM cal_qrels WHERE relevance > 0"
            )
            decisions = decisions.merge(relevant, on=["query_id", "best_parent_id"], how="left")
            decisions["best_parent_relevant"] = (
                decisions["best_parent_relevant"].fillna(False).astype(bool)
            )
        # parameters that differ give versions that differ; equal parameters, equal versions
        version = version or (
            f"{base_policy.policy.base_version}_cal_{policies['all'].parameters_sha256[:8]}"
        )
        report = build_report(
            session,
            decisions,
            ablation,
            fits,
            settings,
            counts,
            base_policy,
            probability,
            has_qrels=qrels is not None,
        )
    parameters = policies["all"].parameters.thawed()
    document = write_policy(
        Path(out),
        version,
        base_policy,
        parameters,
        label_set_sha256(label_frame),
        counts,
        settings,
        calibrator.tuned,
        report,
        session.inputs,
        {"labels_not_in_log": inputs.labels_not_in_input}
        | ({"label_kinds": inputs.kinds} if inputs.kinds is not None else {})
        | ({"recipe": inputs.recipe} if inputs.recipe is not None else {}),
        score_distribution(decisions[decisions["fit"] == "all"], policies["all"]),
    )
    if report_dir is not None:
        logger.info(f"writing the report to {report_dir}")
        write_report(Path(report_dir), report, decisions, title=f"duckscore calibration: {version}")
    return CalibrationResult(Path(out), document, fits, decisions, ablation, training)


@dataclass(frozen=True)
class CalibrationInputs:
    labels: pd.DataFrame  # the labelled queries that occur in the input
    counts: dict[str, int]
    labels_not_in_input: int
    kinds: dict[str, int] | None  # labels per query kind, when the labels have a kind column
    recipe: dict[str, str] | None  # the fusion recipe of the parent features, when known


def open_inputs(
    session: Session,
    labels: Table,
    features: Table | None,
    log: Table | None,
    recipe: Recipe | None,
    qrels: Table | None,
    base_policy: ScorePolicy,
    settings: CalibrationSettings,
) -> CalibrationInputs:
    """The labels, their floors checked before anything else is read; the candidate parents (a
    log fused, once the floors hold on the labelled queries it has); the optional qrels."""
    opened_labels, label_frame = open_labels(session, labels)
    where = f"--labels ({opened_labels.given})"
    labelled = class_counts(label_frame)
    check_label_counts(labelled, settings, where)
    plan = None
    if features is not None:
        opened = session.open("features", PARENT_FEATURES, features, "--features")
        option, table = "--features", FEATURES
        record = recipe_record_from_manifest(features) if isinstance(features, str | Path) else None
    else:
        assert log is not None and recipe is not None  # the log's recipe, loaded by calibrate
        opened, plan = open_log(session, log, recipe)
        option, table, record = "--log", "retrieval_log", recipe_record(recipe)
    kept, missing = keep_labels_in(session, where, table, option, opened.given)
    counts = class_counts(kept)
    if missing:
        check_label_counts(counts, settings, where, labelled, option)
    if plan is not None:
        logger.info(f"parent features of {opened.rows:,} hits (recipe {plan.recipe.version})")
        session.materialise(fuse_graph(plan).subgraph([FEATURES]))
    check_evidence_columns(session, base_policy, f"{option} ({opened.given})")
    if qrels is not None:
        session.open("qrels", QRELS, qrels, "--qrels")
        session.execute("CREATE OR REPLACE TEMP TABLE cal_qrels AS SELECT * FROM qrels")
    return CalibrationInputs(kept, counts, missing, kind_counts(session, opened_labels), record)


def class_counts(labels: pd.DataFrame) -> dict[str, int]:
    return {label: int((labels["label"] == label).sum()) for label in CLASSES}


def score_distribution(in_sample: pd.DataFrame, policy: ScorePolicy) -> dict[str, Any]:
    """How the policy rates its labelled queries in-sample (the `all` fit's decisions): the
    reference a recalibration without labels compares a new domain's scores with. A query
    without candidates scores 0 and has no top-2 ratio."""
    score = in_sample["best_overall_score"].fillna(0.0)
    ratio = in_sample["top2_ratio"].fillna(0.0)
    return {
        "queries": len(in_sample),
        "base_rate": float((in_sample["label"] == "good").mean()),
        "below_T_low": float((score < policy.t_low).mean()),
        "below_T_high": float((score < policy.t_high).mean()),
        "hitl": float((in_sample["top2_ratio"] >= policy.r_hitl).mean()),
        # continuous quantiles (as quantile_cont): what --adapt quantile pairs a new domain's with
        QUANTILES_KEY: [float(v) for v in np.quantile(score.to_numpy(), QUANTILE_LEVELS)],
        # the same of the top-2 ratio (0 without two candidates): what a recalibration's
        # diagnosis compares the new domain's with
        RATIO_QUANTILES_KEY: [float(v) for v in np.quantile(ratio.to_numpy(), QUANTILE_LEVELS)],
    }


def resolve_thresholds(
    fit: Fit, found: dict[str, Any], settings: CalibrationSettings
) -> dict[str, Any]:
    """T_low, T_high and R_hitl of one fit from its class quantiles (§9.2), or by precision."""
    t_low = found["bad_quantile_score"]
    if settings.thresholds == "quantile":
        t_high = found["good_quantile_score"]
    else:
        t_high = found["lowest_precise_score"]
        if t_high is None:
            raise CalibrationError(
                f"fit {fit.name}: no threshold reaches a `good` share of "
                f"{settings.target_precision:g} among the queries above it"
            )
        t_low = min(t_low, t_high)
    r_hitl = found["ambiguous_ratio_quantile"]
    if r_hitl is None:
        raise CalibrationError(
            f"fit {fit.name}: no `ambiguous` query has a top-2 ratio (two candidates, a best score above 0)"
        )
    return {
        "T_low": float(t_low),
        "T_high": float(t_high),
        "R_hitl": float(r_hitl),
        "inverted": settings.thresholds == "quantile" and bool(t_low >= t_high),
    }


def final_parameters(
    base: ScorePolicy,
    fit: Fit,
    bounds: dict[str, dict[str, list[float]]],
    reference_features: list[str],
) -> dict[str, Any]:
    parameters = {**base.parameters.thawed(), **fit.parameters}
    parameters.update({k: fit.thresholds[k] for k in ("T_low", "T_high", "R_hitl")})
    parameters["T_low"] = min(
        parameters["T_low"], parameters["T_high"]
    )  # a fold's inversion: no medium band
    parameters["risk_flags"] = {
        **parameters["risk_flags"],
        "ambiguous_candidate": {"ratio_at_least": fit.thresholds["R_hitl"]},
    }
    if fit.name in bounds:
        nz = dict(parameters["normalization"])
        nz["reference"] = {
            **nz["reference"],
            **{f: bounds[fit.name][f] for f in reference_features},
        }
        parameters["normalization"] = nz
    rounded: dict[str, Any] = at_written_precision(parameters)
    return rounded


def with_probability(
    session: Session,
    policies: dict[str, ScorePolicy],
    labels: pd.DataFrame,
    settings: CalibrationSettings,
) -> tuple[dict[str, ScorePolicy], dict[str, Any], pd.DataFrame]:
    """Each fit's policy with a probability map fitted on its own training queries, the map (its
    method and features) chosen by the Brier score of the folds' held-out queries (a tie keeps
    the earlier, simpler variant)."""
    method = chosen_method(settings.probability, len(labels))
    trained = {
        n: score_fit(session, policy, n, "train").merge(labels, on="query_id")
        for n, policy in policies.items()
    }
    held_out = {
        n: score_fit(session, policy, n, "test").merge(labels, on="query_id")
        for n, policy in policies.items()
        if n != "all"
    }
    chosen, held_out_brier = choose_variant(method, trained, held_out)
    levels = {"levels_by": settings.levels, "p_low": settings.p_low, "p_high": settings.p_high}
    with_maps = {
        n: score_policy_from_parameters(
            policy.version,
            {
                **policy.parameters.thawed(),
                "probability": at_written_precision(fit_map(chosen, trained[n])) | levels,
            },
            policy.source,
            policy.policy.parent_version,
        )
        for n, policy in policies.items()
    }
    record = {
        "method": chosen.method,
        "features": list(chosen.features),
        "held_out_brier": held_out_brier,
        "training_base_rate": {n: float(outcome(frame).mean()) for n, frame in trained.items()},
    }
    return with_maps, record, pd.concat(trained.values(), ignore_index=True)


def score_fit(session: Session, policy: ScorePolicy, fit: str, scope: str) -> pd.DataFrame:
    """Decisions of `policy` on the fit's queries of `scope`, by the policy's own SQL (score)."""
    session.execute(
        f"CREATE OR REPLACE TEMP VIEW cal_fit_features AS SELECT f.* FROM {FEATURES} AS f "
        "JOIN cal_membership AS m ON m.query_id = f.query_id "
        f"WHERE m.fit = {lit(fit)} AND m.scope = {lit(scope)}"
    )
    session.execute(
        f"CREATE OR REPLACE TEMP VIEW {QUERY_LIST} AS SELECT query_id FROM cal_membership "
        f"WHERE fit = {lit(fit)} AND scope = {lit(scope)}"
    )
    graph = score_graph(policy, top_n=2, with_query_ids=True)
    session.materialise(graph, relations={FEATURES: "cal_fit_features"})
    frame = session.frame(
        f"SELECT {', '.join(query_columns(policy))} FROM {SCORE_CONTRACT} ORDER BY query_id"
    )
    frame.insert(0, "fit", fit)
    return frame
