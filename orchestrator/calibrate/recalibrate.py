"""`recalibrate()`: a calibrated score policy adapted to a new domain (issues 32 and 51).

The policy scores the new domain's log as it is (the same recipe, weights and reference bounds:
what ranks queries carries over); what does not carry over is moved, as far as the log shows:

1. p_good. Without labels (calibrate/adaptation.py): `--adapt auto` diagnoses the shift of the
   log's best scores against the calibration's (calibrate/shift.py) and keeps the map, moves its
   prior or moves it by quantile, as the diagnosis supports; `quantile` and `prior` do as
   asked. With labels (calibrate/label_choice.py), the shipped map, the label-free ones, the
   prior moved to the rate of the labels and the log together, and two refits on the labels
   compete by cross-validated Brier score — where the log is evidence, its rate picks among
   the maps the labels cannot tell apart.
2. The score thresholds. Kept, unless the scale moved (p_good carried over by quantile): then
   T_low, T_high and R_hitl move to the quantiles of the new domain's best scores and top-2
   ratios at which the calibration queries held them (metadata.score_distribution;
   sql/calibrate/domain_thresholds.sql). With labels and a policy whose T_high was set by
   precision, T_high is set again by that precision on the labels, when they reach it.

The new policy records what was done (metadata.recalibration), its own score distribution on
the new domain (so it can be recalibrated again) and the recipe it belongs with.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.connection import EngineSettings
from ..core.errors import DuckscoreError
from ..core.inputs import Table
from ..core.outputs import check_output_file
from ..core.policy import at_written_precision
from ..core.render import RenderedSQL, render
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.setting import check_setting
from ..core.version import __version__
from ..fusion.log import open_log
from ..fusion.policy_recipe import recipe_for_policy
from ..fusion.recipe import recipe_record
from ..fusion.recipe_view import Recipe
from ..fusion.stages import fuse_graph
from ..scoring.policy_view import ScorePolicy, load_score_policy, score_policy_from_parameters
from ..scoring.scale import RATIO_QUANTILES_KEY
from ..scoring.stages import FEATURES, SCORE_CONTRACT, query_columns, score_graph
from .adaptation import ADAPT_METHODS, alternatives, carry_over, log_evidence
from .label_choice import choose_by_labels
from .policy_file import write_policy_document
from .probability_report import ece_consistency
from .recalibration import QUANTILE_LEVELS, QUANTILES_KEY, em_prior
from .recalibration_summary import (
    LabelRefit,
    Recalibration,
    band_collapses,
    collapsed_band,
    decision_mix,
    medians,
)
from .settings import CalibrationError, CalibrationSettings
from .tables import keep_labels_in, open_labels

logger = module_logger(__name__)

DISTRIBUTION_KEYS = ("base_rate", "below_T_low", "below_T_high", "hitl")
MIN_LABELS = 10  # fewer: no cross-validated choice among the maps is possible


@dataclass(frozen=True)
class RecalibrationResult:
    policy_path: Path
    document: dict[str, Any]
    decisions: pd.DataFrame  # the new domain's queries under the new policy (p_good, levels …)
    report: Recalibration  # what metadata.recalibration records (its as_record())


def recalibrate(
    policy: str,
    log: Table,
    out: str | Path,
    *,
    recipe: str | None = None,
    recipe_overrides: list[str] | None = None,
    labels: Table | None = None,
    adapt: str = "auto",
    folds: int = 5,
    seed: int = 0,
    version: str | None = None,
    allow_recipe_mismatch: bool = False,
    engine: EngineSettings | None = None,
) -> RecalibrationResult:
    """Adapt the calibrated `policy` to the domain of `log` and write the new policy to `out`."""
    check_setting(CalibrationSettings, "folds", folds)
    check_setting(CalibrationSettings, "seed", seed)
    if adapt not in ADAPT_METHODS:
        raise DuckscoreError(f"--adapt must be one of {', '.join(ADAPT_METHODS)}, got {adapt!r}")
    inputs = {"--log": log, "--labels": labels}
    if Path(policy).is_file():  # a policy file, not a packaged name
        inputs["--policy"] = policy
    check_output_file(out, "--out", inputs, "yaml")  # before any work
    old = load_score_policy(policy)
    block, recorded = _calibration_of(old, adapt)
    loaded_recipe = recipe_for_policy(old.policy, recipe, recipe_overrides, allow_recipe_mismatch)
    with Session(engine) as session:
        opened, plan = open_log(session, log, loaded_recipe)
        where = f"--log ({opened.given})"
        logger.info(
            f"scoring {opened.rows:,} hits with {old.version} (recipe {loaded_recipe.version})"
        )
        session.materialise(fuse_graph(plan).subgraph([FEATURES]))
        decisions = _decisions(session, old, where)
        new_quantiles, new_ratios = _log_quantiles(session, recorded)
        estimate = em_prior(decisions["p_good"].to_numpy(), float(recorded["base_rate"]))
        label_free = carry_over(adapt, block, recorded, decisions, new_quantiles, estimate.prior)
        adapted, moves_thresholds = label_free.block, label_free.moves_thresholds
        labelled: pd.DataFrame | None = None
        refit: LabelRefit | None = None
        if labels is not None:
            labelled = _labelled(session, labels, decisions, opened.given)
            others, evidence = (  # an explicit --adapt is an assumption the labels only refit
                (
                    alternatives(label_free, block, recorded, new_quantiles, estimate.prior),
                    log_evidence(label_free, decisions, labelled, recorded, estimate.prior),
                )
                if adapt == "auto"
                else ({}, None)
            )
            by_labels = choose_by_labels(
                session, labelled, block, label_free, others, evidence, folds, seed
            )
            adapted, refit = by_labels.chosen.block, by_labels.report
            moves_thresholds = by_labels.chosen.moves_thresholds
        thresholds, moves = _thresholds(session, old, recorded, labelled, moves_thresholds)
        parameters = at_written_precision(_new_parameters(old, adapted, thresholds))
        candidate = score_policy_from_parameters(
            "recalibrated", parameters, "recalibrate", old.version
        )
        new_version = version or f"{old.version}_recal_{candidate.parameters_sha256[:8]}"
        new_policy = score_policy_from_parameters(
            new_version, parameters, "recalibrate", old.version
        )
        new_decisions = _decisions(session, new_policy, where)
        mix = decision_mix(session, new_policy, new_decisions, labelled)
        collapsed = collapsed_band(new_policy, new_decisions, moves)
        if collapsed is not None:
            logger.warning(collapsed)
        p_good_mean = float(new_decisions["p_good"].mean())
        report = Recalibration(
            parent={"version": old.version, "parameters_sha256": old.parameters_sha256},
            log=opened.given,
            queries=len(decisions),
            adapt=adapt,
            diagnosis=label_free.diagnosis,
            chosen={"adapt": label_free.adapt, "reason": label_free.chosen.reason},
            fitted_base_rate=recorded["base_rate"],
            best_score_median=medians(recorded, new_quantiles),
            em_base_rate=estimate.prior,
            em_iterations=estimate.iterations,
            prior_shift=label_free.prior_shift,
            labels=refit,
            thresholds=moves | {"band_collapsed": band_collapses(new_policy, moves)},
            decisions=mix,
            p_good_mean=p_good_mean,
            base_rate=p_good_mean if refit is None else refit.good / refit.n,
            ece_of_perfect_calibration=ece_consistency(session, new_decisions, seed),
        )
        distribution = {
            "queries": len(new_decisions),
            "base_rate": report.base_rate,
            **{key: thresholds["levels"][key] for key in DISTRIBUTION_KEYS[1:]},
            QUANTILES_KEY: new_quantiles,
            RATIO_QUANTILES_KEY: new_ratios,
        }
    document = _write(
        Path(out), new_policy, old, loaded_recipe, report, distribution, session.inputs
    )
    return RecalibrationResult(Path(out), document, new_decisions, report)


def _calibration_of(policy: ScorePolicy, adapt: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy's p_good map and the score distribution it was calibrated on."""
    probability = policy.probability
    if probability is None:
        raise CalibrationError(
            f"--policy: {policy.version} has no p_good map to recalibrate "
            "(`duckscore calibrate` fits one)"
        )
    recorded = policy.policy.metadata.get("score_distribution")
    needed = DISTRIBUTION_KEYS + ((QUANTILES_KEY,) if adapt != "prior" else ())
    if not isinstance(recorded, dict) or any(
        not isinstance(recorded.get(k), int | float | list) for k in needed
    ):
        raise CalibrationError(
            f"--policy: {policy.version} does not record the score distribution it was "
            f"calibrated on (metadata.score_distribution: {', '.join(needed)}); "
            "calibrate it again with this duckscore"
        )
    base_rate = float(recorded["base_rate"])
    if not 0.0 < base_rate < 1.0:
        raise CalibrationError(
            f"--policy: {policy.version} records a base rate of {base_rate:g}; "
            "a map fitted on one class only cannot be moved to another domain"
        )
    return probability.block.thawed(), recorded


def _shares_of(recorded: dict[str, Any]) -> dict[str, float]:
    return {k: float(recorded[k]) for k in ("below_T_low", "below_T_high", "hitl")}


def _log_quantiles(session: Session, recorded: dict[str, Any]) -> tuple[list[float], list[float]]:
    """The log's best scores and top-2 ratios (0 without candidates) at QUANTILE_LEVELS."""
    rows = session.rows(
        _domain_sql("quantiles", thresholds=None, levels=QUANTILE_LEVELS, **_shares_of(recorded))
    )
    return [float(r["best_score"]) for r in rows], [float(r["top2_ratio"]) for r in rows]


def _decisions(session: Session, policy: ScorePolicy, where: str) -> pd.DataFrame:
    session.materialise(score_graph(policy, top_n=2, where=where))
    return session.frame(
        f"SELECT {', '.join(query_columns(policy))} FROM {SCORE_CONTRACT} ORDER BY query_id"
    )


def _labelled(
    session: Session, labels: Table, decisions: pd.DataFrame, log_given: str
) -> pd.DataFrame:
    """The labelled queries of the log (score_contract holds its decisions), with outcomes, in
    query_id order (the order the folds are dealt in)."""
    opened, _ = open_labels(session, labels)
    kept, _ = keep_labels_in(
        session, f"--labels ({opened.given})", SCORE_CONTRACT, "--log", log_given,
        doing="recalibrating",
    )  # fmt: skip
    joined = kept.merge(decisions, on="query_id", how="inner")
    outcome = (joined["label"] == "good").to_numpy()
    if len(joined) < MIN_LABELS or outcome.all() or not outcome.any():
        raise CalibrationError(
            f"--labels ({opened.given}): {len(joined)} labelled queries in the log, "
            f"{int(outcome.sum())} of them good; recalibrating p_good needs at least "
            f"{MIN_LABELS}, with good and other labels both present (or leave --labels out: "
            "the base rate is then estimated from the log)"
        )
    ordered = joined.assign(outcome=outcome.astype(float)).sort_values("query_id")
    return ordered.reset_index(drop=True)


def _thresholds(
    session: Session,
    old: ScorePolicy,
    recorded: dict[str, float],
    labelled: pd.DataFrame | None,
    move: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """T_low, T_high, R_hitl: kept, or (`move`) at the recorded quantiles of the new domain;
    T_high by the calibration's target precision on the labels where they reach it. Also the
    quantile levels at which the new thresholds sit in the new domain (what the new policy
    records: moved, the same levels unless the labels set T_high; kept, the log's shares below
    them); and, for the report, each threshold's move and the shares of the log's queries they
    give."""
    quantiles = _shares_of(recorded)
    moved = _domain_thresholds(session, "moved", thresholds=None, levels=[0.5], **quantiles)
    names = ("T_low", "T_high", "R_hitl")
    chosen = {name: moved[name] if move else old.thresholds[name] for name in names}
    if recorded["hitl"] <= 0.0:
        chosen["R_hitl"] = old.r_hitl  # no query was sent to a human: keep it so
    method = old.policy.metadata.get("method", {})
    target = method.get("target_precision") if method.get("thresholds") == "precision" else None
    by_precision = None
    if labelled is not None and target is not None:
        by_precision = _precise_threshold(session, labelled, float(target))
        if by_precision is not None:
            chosen["T_high"] = by_precision
            chosen["T_low"] = min(chosen["T_low"], by_precision)
    chosen["T_low"] = min(chosen["T_low"], chosen["T_high"])
    shares = _domain_thresholds(session, "shares", thresholds=chosen, levels=[0.5], **quantiles)
    levels = dict(quantiles) if move else {k: shares[k] for k in quantiles}
    if by_precision is not None:
        levels["below_T_high"] = shares["below_T_high"]
    if chosen["T_low"] == chosen["T_high"]:
        levels["below_T_low"] = levels["below_T_high"]
    moves = {
        name: {"from": old.thresholds[name], "to": chosen[name], "at_quantile": moved[name]}
        for name in chosen
    } | {
        "by_target_precision": None
        if target is None or labelled is None
        else {"target": target, "reached": by_precision is not None},
        "shares_of_the_log": {k: shares[k] for k in ("below_T_low", "below_T_high", "hitl")},
        "shares_of_the_calibration": quantiles,
        "moved_by_quantile": move,
    }
    return chosen | {"levels": levels}, moves


def _precise_threshold(session: Session, labelled: pd.DataFrame, target: float) -> float | None:
    """calibrate's precision method on the labels (sql/calibrate/thresholds.sql): the lowest
    best score at which the share of good among the labelled queries at or above it reaches
    `target`."""
    predictions = labelled.assign(
        fit="recalibrate", score=labelled["best_overall_score"].fillna(0.0)
    )
    session.register(
        "recal_predictions", predictions[["fit", "query_id", "score", "top2_ratio", "label"]]
    )
    [row] = session.rows(
        render(
            "calibrate/thresholds.sql",
            inputs={"predictions": "recal_predictions"},
            bad_quantile=0.9,
            good_quantile=0.1,
            hitl_quantile=0.7,
            target_precision=target,
            final="thresholds",
        )
    )
    found = row["lowest_precise_score"]
    return None if found is None else float(found)


def _domain_sql(final: str, **context: Any) -> RenderedSQL:
    """sql/calibrate/domain_thresholds.sql over the decisions in score_contract."""
    return render(
        "calibrate/domain_thresholds.sql",
        inputs={"decisions": SCORE_CONTRACT},
        final=final,
        **context,
    )


def _domain_thresholds(session: Session, final: str, **context: Any) -> dict[str, Any]:
    [row] = session.rows(_domain_sql(final, **context))
    return row


def _new_parameters(
    old: ScorePolicy, block: dict[str, Any], thresholds: dict[str, Any]
) -> dict[str, Any]:
    parameters = {**old.parameters.thawed(), "probability": block}
    parameters.update({k: float(thresholds[k]) for k in ("T_low", "T_high", "R_hitl")})
    if thresholds["R_hitl"] != old.r_hitl:  # kept, the policy stays as it was
        parameters["risk_flags"] = {
            **parameters["risk_flags"],
            "ambiguous_candidate": {"ratio_at_least": float(thresholds["R_hitl"])},
        }
    return parameters


def _write(
    out: Path,
    policy: ScorePolicy,
    old: ScorePolicy,
    recipe: Recipe,
    report: Recalibration,
    distribution: dict[str, Any],
    inputs: dict[str, Any],
) -> dict[str, Any]:
    document = {
        "score_policy_version": policy.version,
        "parent_version": old.version,
        "description": f"{old.version} recalibrated to the domain of {report.log} "
        f"({report.queries} queries"
        + (f", {report.labels.n} labelled" if report.labels else ", no labels")
        + ") by duckscore recalibrate.",
        "metadata": {
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "duckscore_version": __version__,
            "recipe": recipe_record(recipe),
            "inputs": {name: opened.given for name, opened in inputs.items()},
            "method": old.policy.metadata.get("method"),
            "recalibration": report.as_record(),
            "score_distribution": distribution,
        },
        "parameters": policy.parameters.thawed(),
    }
    return write_policy_document(out, document)
