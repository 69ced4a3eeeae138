"""`recalibrate()`: a calibrated score policy adapted to a new domain (issue 32).

The policy scores the new domain's log as it is (the same recipe, weights and reference bounds:
what ranks queries carries over); what does not carry over is moved:

1. p_good. Without labels, the map's prior is corrected to the base rate EM estimates from the
   unlabelled queries' p_good (calibrate/recalibration.py). With labels, σ(a + b·logit p_good)
   is fitted on them with a prior centred on that correction, its strength chosen by
   cross-validated Brier score.
2. The score thresholds. T_low, T_high and R_hitl move to the quantiles of the new domain's
   best scores and top-2 ratios at which the calibration queries held them
   (metadata.score_distribution; sql/calibrate/domain_thresholds.sql). With labels and a policy
   whose T_high was set by precision, T_high is set again by that precision on the labels,
   when they reach it.

The new policy records what was done (metadata.recalibration), its own score distribution on
the new domain (so it can be recalibrated again) and the recipe it belongs with.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
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
from ..scoring.stages import FEATURES, SCORE_CONTRACT, query_columns, score_graph
from .calibration_metrics import frame_metrics
from .policy_file import write_policy_document
from .probability import apply_map
from .probability_report import ece_consistency
from .recalibration import (
    QUANTILE_LEVELS,
    QUANTILES_KEY,
    LogitMap,
    compose,
    em_prior,
    prior_shift,
    refit_on_labels,
)
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
ADAPT_METHODS = ("quantile", "prior")
MIN_LABELS = 10  # fewer: no cross-validated choice of the prior's strength is possible
EM_BOUNDARY = 0.01  # an EM base rate this close to 0 or 1 has collapsed


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
    adapt: str = "quantile",
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
        new_quantiles = [
            float(row["best_score"])
            for row in session.rows(
                _domain_sql(
                    "quantiles", thresholds=None, levels=QUANTILE_LEVELS, **_shares_of(recorded)
                )
            )
        ]
        fitted_base_rate = float(recorded["base_rate"])
        estimate = em_prior(decisions["p_good"].to_numpy(), fitted_base_rate)
        shift = prior_shift(fitted_base_rate, estimate.prior) if adapt == "prior" else None
        adapted = _label_free(block, recorded, new_quantiles, estimate.prior, shift)
        labelled: pd.DataFrame | None = None
        refit: LabelRefit | None = None
        if labels is not None:
            labelled = _labelled(session, labels, decisions, opened.given)
            correction, refit = _refit(session, labelled, adapted, folds, seed)
            adapted = compose(adapted, correction)
        thresholds, moves = _thresholds(session, old, recorded, labelled)
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
            fitted_base_rate=recorded["base_rate"],
            best_score_median=medians(recorded, new_quantiles),
            em_base_rate=estimate.prior,
            em_iterations=estimate.iterations,
            prior_shift=shift,
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
            QUANTILES_KEY: [float(v) for v in new_quantiles],
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
    needed = DISTRIBUTION_KEYS + ((QUANTILES_KEY,) if adapt == "quantile" else ())
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


def _label_free(
    block: dict[str, Any],
    recorded: dict[str, Any],
    new_quantiles: list[float],
    em_base_rate: float,
    shift: float | None,
) -> dict[str, Any]:
    """The map carried over without labels: by quantile (the score scale moved, the base rate
    kept) or, given the `shift` of --adapt prior, by prior (the base rate moved to EM's
    estimate)."""
    if shift is None:
        return transported(block, recorded[QUANTILES_KEY], new_quantiles)
    if not EM_BOUNDARY < em_base_rate < 1.0 - EM_BOUNDARY:
        raise CalibrationError(_collapsed_em(block, recorded, new_quantiles, em_base_rate))
    return compose(block, LogitMap(shift, 1.0))


def _collapsed_em(
    block: dict[str, Any], recorded: dict[str, Any], new_quantiles: list[float], prior: float
) -> str:
    """Why --adapt prior cannot carry this map over, and what can: one line."""
    found = medians(recorded, new_quantiles)
    where = (
        ""
        if found is None
        else f" (median {found['log']:.4g}, at the calibration's "
        f"{percentile(found['calibration_share_below'])}; its median {found['calibration']:.4g})"
    )
    reads_ratio = block["method"] == "platt" and block["platt"].get("top2_ratio", 0.0) != 0.0
    remedy = (
        "label 30 or more of its queries and fit a policy on them (`duckscore calibrate`)"
        if reads_ratio
        else "use --adapt quantile (the default: the scale moved, the rate held), with --labels "
        "to check it"
    )
    return (
        f"--adapt prior: EM's base rate on this log's p_good ran to {prior:.3f} (the "
        f"calibration's: {float(recorded['base_rate']):.3f}), so every query would get p_good "
        f"{round(prior):.0f}: its best scores are on another scale than the calibration's"
        f"{where}, not at another base rate; nothing written — {remedy}"
    )


def percentile(share: float) -> str:
    """0.187 -> '19th percentile'; the ends said as what they are."""
    if share <= 0.0:
        return "lowest score or below"
    if share >= 1.0:
        return "highest score or above"
    n = min(max(round(100 * share), 1), 99)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix} percentile"


def transported(
    block: dict[str, Any], old_quantiles: list[float], new_quantiles: list[float]
) -> dict[str, Any]:
    """The isotonic map giving a new-domain score at quantile q the old map's p_good at the
    calibration's score at q: breakpoints at the new domain's quantiles (ties at the written
    precision merged, their p_good averaged), kept non-decreasing."""
    if block["method"] == "platt" and block["platt"].get("top2_ratio", 0.0) != 0.0:
        raise CalibrationError(
            "--adapt quantile: this policy's p_good reads the top-2 ratio beside the score; "
            "carry it over with --adapt prior, or with --labels"
        )
    frame = pd.DataFrame({"best_overall_score": old_quantiles, "top2_ratio": 0.0})
    # quantiles equal at the written precision are one breakpoint of the written map
    written = at_written_precision([float(q) for q in new_quantiles])
    p_good = pd.Series(apply_map(block, frame)).groupby(np.asarray(written)).mean()
    x, y = [float(v) for v in p_good.index], np.maximum.accumulate(p_good.to_numpy())
    if len(x) == 1:  # one distinct score in the new domain: a constant
        x, y = [x[0], x[0] + 1.0], np.repeat(y, 2)
    levels = {k: block[k] for k in ("levels_by", "p_low", "p_high")}
    return {
        "method": "isotonic",
        "isotonic": {"x": x, "y": [float(v) for v in np.clip(y, 0, 1)]},
    } | levels


def _decisions(session: Session, policy: ScorePolicy, where: str) -> pd.DataFrame:
    session.materialise(score_graph(policy, top_n=2, where=where))
    return session.frame(
        f"SELECT {', '.join(query_columns(policy))} FROM {SCORE_CONTRACT} ORDER BY query_id"
    )


def _labelled(
    session: Session, labels: Table, decisions: pd.DataFrame, log_given: str
) -> pd.DataFrame:
    """The labelled queries of the log (score_contract holds its decisions), with outcomes."""
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
    return joined.assign(outcome=outcome.astype(float))


def _refit(
    session: Session,
    labelled: pd.DataFrame,
    adapted: dict[str, Any],
    folds: int,
    seed: int,
) -> tuple[LogitMap, LabelRefit]:
    """σ(a + b·logit p) on the labels, p the label-free map's p_good, shrunk toward p itself
    (a = 0, b = 1), and what the report records of it (its cross-validated figures)."""
    y = labelled["outcome"].to_numpy()
    minority = int(min(y.sum(), len(y) - y.sum()))
    used_folds = min(folds, minority)
    if used_folds < 2:
        raise CalibrationError(
            f"--labels: {minority} query of one outcome (good / not good); cross-validation "
            "needs at least 2 of each"
        )
    p_good = apply_map(adapted, labelled)
    refit = refit_on_labels(p_good, y, LogitMap(0.0, 1.0), used_folds, seed)
    held_out = labelled.assign(score=refit.held_out)
    figures = frame_metrics(session, held_out[["query_id", "score", "outcome"]])
    base_rate = float(y.mean())
    recorded = LabelRefit(
        n=len(y),
        good=int(y.sum()),
        folds=used_folds,
        prior_strength=refit.strength,
        cv_brier_by_prior_strength={str(k): v for k, v in refit.cv_brier.items()},
        cross_validated={
            "brier": figures["brier"],
            "ece": figures["ece"],
            "auroc": figures["auroc"],
            "constant_brier": base_rate * (1.0 - base_rate),
            "ece_of_perfect_calibration": ece_consistency(
                session, held_out.assign(p_good=refit.held_out), seed
            ),
        },
        map={"intercept": refit.fitted.intercept, "slope": refit.fitted.slope},
    )
    return refit.fitted, recorded


def _thresholds(
    session: Session,
    old: ScorePolicy,
    recorded: dict[str, float],
    labelled: pd.DataFrame | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """T_low, T_high, R_hitl at the recorded quantiles of the new domain; T_high by the
    calibration's target precision on the labels where they reach it. Also the quantile levels
    at which the new thresholds sit in the new domain (what the new policy records: the same
    levels, unless the labels set T_high); and, for the report, each threshold's move and the
    shares of the log's queries they give."""
    quantiles = _shares_of(recorded)
    moved = _domain_thresholds(session, "moved", thresholds=None, levels=[0.5], **quantiles)
    chosen = {"T_low": moved["T_low"], "T_high": moved["T_high"], "R_hitl": moved["R_hitl"]}
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
    levels = dict(quantiles)
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
