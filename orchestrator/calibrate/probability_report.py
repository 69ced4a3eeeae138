"""The report's part on p_good (issue 24): its figures on held-out and in-sample queries, the
base rate's Brier score, the ECE a perfectly calibrated map would show, and the rows of its
HTML section (templates/calibrate/probability.html).
Every number comes from SQL (frame_metrics, sql/calibrate/ece_consistency.sql)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core.render import render
from ..core.session import Session
from .calibration_metrics import frame_metrics

PROBABILITY_ECE_TARGET = 0.05
ECE_SIMULATIONS = 1000


def ece_consistency(session: Session, held_out: pd.DataFrame, seed: int) -> dict[str, Any]:
    """The ECE a perfectly calibrated p_good would show on these queries: mean and P95 over
    redrawn outcomes (sql/calibrate/ece_consistency.sql)."""
    session.con.register("report_probabilities", held_out.assign(score=held_out["p_good"]))
    try:
        [row] = session.rows(
            render(
                "calibrate/ece_consistency.sql",
                inputs={"predictions": "report_probabilities"},
                bins=10,
                simulations=ECE_SIMULATIONS,
                seed=seed,
                final="consistency",
            )
        )
    finally:
        session.con.unregister("report_probabilities")
    return row


def probability_figures(
    session: Session, decisions: pd.DataFrame, fitted: dict[str, Any], seed: int
) -> dict[str, Any]:
    """p_good against the label `good`: Brier, ECE, reliability bins and AUROC, in-sample and on
    held-out queries, beside the Brier score of each fold's training base rate (a constant) and
    the ECE sampling alone gives a perfectly calibrated map on as many queries."""
    frame = decisions.assign(
        outcome=(decisions["label"] == "good").astype(int), level=decisions["confidence_level"]
    )
    held_out = frame[frame["fit"] != "all"]

    def figures(scored: pd.DataFrame, score: pd.Series) -> dict[str, Any]:
        found = frame_metrics(session, scored.assign(score=score))
        keys = ("n", "auroc", "brier", "ece", "bins")
        return {k: found[k] for k in keys} | {"base_rate": found["accuracy"]["value"]}

    cross_validated = figures(held_out, held_out["p_good"])
    base_rate = figures(held_out, held_out["fit"].map(fitted["training_base_rate"]))
    consistency = ece_consistency(session, held_out, seed)
    checks = {  # name: value, target
        "ece_at_most": (cross_validated["ece"], PROBABILITY_ECE_TARGET),
        "brier_below_base_rate": (cross_validated["brier"], base_rate["brier"]),
        "ece_within_perfect_calibration_p95": (cross_validated["ece"], consistency["ece_p95"]),
    }
    targets = {
        name: {
            "value": value,
            "target": target,
            "met": value <= target if name.endswith("at_most") else value < target,
        }
        for name, (value, target) in checks.items()
    }
    in_sample = frame[frame["fit"] == "all"]
    return fitted | {
        "outcome": "label good",
        "cross_validated": cross_validated,
        "cross_validated_base_rate_brier": base_rate["brier"],
        "ece_of_perfect_calibration": consistency,
        "in_sample": figures(in_sample, in_sample["p_good"]),
        "targets": targets,
    }


def probability_rows(probability: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """The rows of the p_good part's tables (calibrate/probability.html gives their headers)."""
    cv, ins = probability["cross_validated"], probability["in_sample"]
    return {
        "targets": [
            [name, t["value"], t["target"], "met" if t["met"] else "not met"]
            for name, t in probability["targets"].items()
        ],
        "scopes": [
            [scope, f["n"], f["base_rate"], f["brier"], f["ece"], f["auroc"]]
            for scope, f in (("cross-validated", cv), ("in-sample", ins))
        ],
        "variants": [[name, value] for name, value in probability["held_out_brier"].items()],
    }
