"""The calibration report (issue 4): figures as JSON, and a self-contained HTML page with plots.

Every number comes from SQL (calibration_metrics.compute_metrics over DuckDB views of the
decisions the policy's own SQL made); matplotlib only draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..common.report_html import cell, figure_png, pyplot, render_page
from ..core.outputs import atomic_output_dir, write_json
from ..core.records import OMITTED_WHEN_NONE, Report
from ..core.session import Session
from ..scoring.policy_view import ScorePolicy
from .calibration_metrics import frame_metrics
from .probability_report import probability_figures, probability_rows
from .settings import CalibrationSettings, Fit

TARGETS = {
    "auroc_good_vs_bad": 0.86,
    "auroc_best_parent_relevant": 0.80,
    "precision_high": 0.85,
    "hitl_rate_at_most": 0.25,
}
LEVELS = ("high", "medium", "low")


@dataclass(frozen=True, kw_only=True)
class CalibrationReport(Report):
    """What a calibration found (report.json, docs/calibrate.md#the-report); the policy file
    carries a summary of it."""

    base_policy: str
    label_counts: dict[str, int]
    settings: dict[str, Any]
    thresholds: dict[str, dict[str, Any]]  # per fit
    ablation: list[dict[str, Any]]  # per step
    cross_validated: dict[str, Any]  # evaluate_decisions of the held-out folds
    in_sample: dict[str, Any]  # … of the fit on every labelled query
    targets: dict[str, dict[str, Any]]
    probability: dict[str, Any] | None = field(default=None, metadata=OMITTED_WHEN_NONE)


def evaluate_decisions(
    session: Session,
    decisions: pd.DataFrame,
    *,
    has_qrels: bool,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Figures of one set of decisions (query_id, best_overall_score, confidence_level,
    need_hitl, web_fallback, label[, best_parent_relevant])."""
    frame = decisions.assign(
        score=decisions["best_overall_score"].fillna(0.0), level=decisions["confidence_level"]
    )
    frame = frame.sort_values(["fit", "query_id"], kind="stable")
    good_bad = frame[frame["label"] != "ambiguous"].assign(
        outcome=lambda f: (f["label"] == "good").astype(int)
    )
    outcomes = {
        "good_vs_bad": good_bad,
        "good_vs_rest": frame.assign(outcome=(frame["label"] == "good").astype(int)),
    } | (
        {"best_parent_relevant": frame.assign(outcome=frame["best_parent_relevant"].astype(int))}
        if has_qrels
        else {}
    )
    # held-out folds: the textbook estimate is the mean of per-fold AUROCs
    folds = (
        [per_fold(session, group, has_qrels) for _, group in frame.groupby("fit")]
        if frame["fit"].nunique() > 1
        else []
    )
    return (
        {"n": len(frame)}
        | {
            name: frame_metrics(session, scored, bootstrap=bootstrap, seed=seed)
            | _mean_per_fold(folds, name)
            for name, scored in outcomes.items()
        }
        | {"routing": routing(session, frame)}
        | ({"per_fold": folds} if folds else {})
    )


def _mean_per_fold(folds: list[dict[str, Any]], outcome: str) -> dict[str, float]:
    """auroc_mean_per_fold of an outcome the folds have an AUROC of."""
    values = [f[outcome] for f in folds if f.get(outcome) is not None]
    return {"auroc_mean_per_fold": sum(values) / len(values)} if values else {}


def per_fold(session: Session, group: pd.DataFrame, has_qrels: bool) -> dict[str, Any]:
    good_bad = group[group["label"] != "ambiguous"].assign(
        outcome=lambda f: (f["label"] == "good").astype(int)
    )
    relevant = (
        group.assign(outcome=group["best_parent_relevant"].astype(int)) if has_qrels else None
    )
    return {
        "fit": group["fit"].iloc[0],
        "n": len(group),
        "good_vs_bad": frame_metrics(session, good_bad)["auroc"],
    } | (
        {}
        if relevant is None
        else {"best_parent_relevant": frame_metrics(session, relevant)["auroc"]}
    )


def routing(session: Session, frame: pd.DataFrame) -> dict[str, Any]:
    """Rates of auto (neither HITL nor web fallback), HITL and web fallback, overall and per label."""
    session.con.register(
        "report_routing", frame[["query_id", "label", "need_hitl", "web_fallback", "level"]]
    )
    try:
        rows = session.frame("""
            SELECT coalesce(label, 'all') AS label, count(*) AS n,
                   avg(CAST(NOT need_hitl AND NOT web_fallback AS DOUBLE)) AS auto_rate,
                   avg(CAST(need_hitl AS DOUBLE)) AS hitl_rate,
                   avg(CAST(web_fallback AS DOUBLE)) AS web_fallback_rate,
                   avg(CAST(level = 'high' AS DOUBLE)) AS high_rate
            FROM report_routing GROUP BY ROLLUP (label) ORDER BY label NULLS FIRST""")
    finally:
        session.con.unregister("report_routing")
    return {
        r["label"]: {k: (int(v) if k == "n" else float(v)) for k, v in r.items() if k != "label"}
        for r in rows.to_dict("records")
    }


def build_report(
    session: Session,
    decisions: pd.DataFrame,
    ablation: list[dict[str, Any]],
    fits: dict[str, Fit],
    settings: CalibrationSettings,
    counts: dict[str, int],
    base: ScorePolicy,
    probability: dict[str, Any] | None,
    *,
    has_qrels: bool,
) -> CalibrationReport:
    held_out = decisions[decisions["fit"] != "all"]
    in_sample = decisions[decisions["fit"] == "all"]
    cross_validated = evaluate_decisions(session, held_out, has_qrels=has_qrels, seed=settings.seed)
    return CalibrationReport(
        base_policy=base.version,
        label_counts=counts,
        settings=settings.record(),
        thresholds={name: fit.thresholds for name, fit in fits.items()},
        ablation=ablation,
        cross_validated=cross_validated,
        in_sample=evaluate_decisions(session, in_sample, has_qrels=has_qrels, seed=settings.seed),
        targets=target_check(cross_validated),
        probability=None
        if probability is None
        else probability_figures(session, decisions, probability, settings.seed),
    )


def target_check(figures: dict[str, Any]) -> dict[str, Any]:
    high = _level(figures["good_vs_rest"], "high")
    checks = {
        "auroc_good_vs_bad": figures["good_vs_bad"].get("auroc_mean_per_fold"),
        "auroc_best_parent_relevant": (figures.get("best_parent_relevant") or {}).get(
            "auroc_mean_per_fold"
        ),
        "precision_high": high["precision"] if high else None,
        "hitl_rate_at_most": figures["routing"]["all"]["hitl_rate"],
    }
    pooled = {
        "auroc_good_vs_bad": figures["good_vs_bad"]["auroc"],
        "auroc_best_parent_relevant": (figures.get("best_parent_relevant") or {}).get("auroc"),
    }
    return {
        name: {
            "value": value,
            "target": TARGETS[name],
            "pooled_held_out": pooled.get(name),
            "met": None
            if value is None
            else (value <= TARGETS[name] if name.endswith("at_most") else value >= TARGETS[name]),
        }
        for name, value in checks.items()
    }


def _level(figures: dict[str, Any], level: str) -> dict[str, Any] | None:
    return next((row for row in figures.get("levels") or [] if row["level"] == level), None)


# -- HTML -----------------------------------------------------------------------------------


def write_report(
    out_dir: Path, report: CalibrationReport, decisions: pd.DataFrame, title: str
) -> None:
    figures = draw_figures(report, decisions)
    record = report.as_record()
    with atomic_output_dir(out_dir) as stage:
        write_json(stage / "report.json", record)
        for name, png in figures.items():
            (stage / f"{name}.png").write_bytes(png)
        (stage / "report.html").write_text(render_html(record, figures, title), encoding="utf-8")


def draw_figures(report: CalibrationReport, decisions: pd.DataFrame) -> dict[str, bytes]:
    plt = pyplot()
    held_out = decisions[decisions["fit"] != "all"]
    thresholds = report.thresholds["all"]
    cv = report.cross_validated
    calibrated = cv.get("best_parent_relevant") or cv["good_vs_rest"]
    target_name = "best parent relevant" if "best_parent_relevant" in cv else "label good"
    out: dict[str, bytes] = {}

    fig, ax = plt.subplots(figsize=(7, 4))
    scores = held_out["best_overall_score"].fillna(0.0)
    edges = [i / 40 for i in range(41)]
    for label, colour in (("good", "#2a9d8f"), ("ambiguous", "#e9c46a"), ("bad", "#e76f51")):
        values = scores[held_out["label"] == label]
        ax.hist(values, bins=edges, alpha=0.6, color=colour, label=f"{label} (n={len(values)})")
    for name, style in (("T_low", ":"), ("T_high", "--")):
        ax.axvline(
            thresholds[name],
            color="black",
            linestyle=style,
            label=f"{name} = {thresholds[name]:.3f}",
        )
    ax.set(
        xlabel="best overall score (held-out folds)",
        ylabel="queries",
        title="Score distribution per label",
    )
    ax.legend(fontsize=8)
    out["score_distributions"] = figure_png(fig, plt)

    out["reliability"] = reliability_png(
        plt,
        calibrated,
        xlabel="mean best overall score in bin",
        ylabel=f"share with {target_name}",
        curve="policy",
    )
    if report.probability is not None:
        out["probability_reliability"] = reliability_png(
            plt,
            report.probability["cross_validated"],
            xlabel="mean p_good in bin (held-out folds)",
            ylabel="share labelled good",
            curve=f"p_good ({report.probability['method']})",
        )

    fig, ax = plt.subplots(figsize=(5.5, 4))
    curve = calibrated["risk_coverage"]
    ax.plot([p["coverage"] for p in curve], [p["risk"] for p in curve], label="policy score")
    base_risk = 1 - calibrated["accuracy"]["value"]
    ax.axhline(base_risk, color="grey", linestyle=":", label=f"no abstention ({base_risk:.2f})")
    ax.set(
        xlabel="coverage (share of queries answered automatically)",
        ylabel=f"risk (share without {target_name})",
        xlim=(0, 1),
        ylim=(0, 1),
        title="Risk–coverage (held-out folds)",
    )
    ax.legend(fontsize=8)
    out["risk_coverage"] = figure_png(fig, plt)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    steps = report.ablation
    labels = ["base"] + [f"{s['parameter']}={s['value']:g}" for s in steps[1:]]
    ax.plot(
        range(len(steps)),
        [s["cross_validated_auroc"] for s in steps],
        marker="o",
        label="cross-validated (mean per fold)",
    )
    ax.plot(
        range(len(steps)),
        [s["pooled_held_out_auroc"] for s in steps],
        marker="x",
        linestyle=":",
        label="pooled held-out",
    )
    ax.plot(
        range(len(steps)),
        [s["in_sample_auroc"] for s in steps],
        marker=".",
        linestyle="--",
        label="in-sample",
    )
    ax.set_xticks(range(len(steps)), labels, rotation=60, ha="right", fontsize=7)
    ax.set(ylabel="AUROC good vs bad", title="§9.3 ablation, step by step")
    ax.legend(fontsize=8)
    out["ablation"] = figure_png(fig, plt)
    return out


def reliability_png(
    plt: Any, figures: dict[str, Any], xlabel: str, ylabel: str, curve: str
) -> bytes:
    """A reliability diagram: each bin's mean prediction against its observed share."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    bins = [b for b in figures["bins"] or [] if b["n"]]
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", label="perfect calibration")
    ax.plot([b["mean_score"] for b in bins], [b["accuracy"] for b in bins], marker="o", label=curve)
    for b in bins:
        ax.annotate(
            f"n={b['n']}",
            (b["mean_score"], b["accuracy"]),
            textcoords="offset points",
            xytext=(4, -10),
            fontsize=7,
        )
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel=xlabel,
        ylabel=ylabel,
        title=f"Reliability (ECE = {cell(figures['ece'])})",
    )
    ax.legend(fontsize=8, loc="upper left")
    return figure_png(fig, plt)


def render_html(report: dict[str, Any], figures: dict[str, bytes], title: str) -> str:
    """The page of a report's record (report.json) and its plots."""
    probability = report.get("probability")
    return render_page(
        "calibrate/report.html",
        title=title,
        report=report,
        figures=figures,
        rows=_table_rows(report),
        probability=probability,
        probability_rows=probability_rows(probability) if probability else None,
    )


def _table_rows(report: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """The rows of the report's tables (calibrate/report.html gives their headers)."""
    cv = report["cross_validated"]
    return {
        "targets": [
            [
                name,
                t["value"],
                t["pooled_held_out"],
                t["target"],
                {True: "met", False: "not met", None: "–"}[t["met"]],
            ]
            for name, t in report["targets"].items()
        ],
        "metrics": _metric_rows(cv, report["in_sample"]),
        "levels": _level_rows(cv),
        "routing": [
            [label, r["n"], r["auto_rate"], r["hitl_rate"], r["web_fallback_rate"], r["high_rate"]]
            for label, r in cv["routing"].items()
        ],
        "ablation": [
            [
                s["pass"] or "",
                s["parameter"],
                s["value"] if s["value"] is not None else "",
                s["in_sample_auroc"],
                s["cross_validated_auroc"],
                s["pooled_held_out_auroc"],
            ]
            for s in report["ablation"]
        ],
        "thresholds": [
            [fit, t["T_low"], t["T_high"], t["R_hitl"], t["n_good"], t["n_ambiguous"], t["n_bad"]]
            for fit, t in report["thresholds"].items()
        ],
    }


def _metric_rows(cv: dict[str, Any], ins: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, caption in (
        ("good_vs_bad", "good vs bad"),
        ("best_parent_relevant", "best parent relevant"),
        ("good_vs_rest", "good vs ambiguous + bad"),
    ):
        if name not in cv:
            continue
        for scope, figs in (("cross-validated", cv[name]), ("in-sample", ins[name])):
            ci = figs["auroc_ci"]
            rows.append(
                [
                    caption,
                    scope,
                    figs["n"],
                    figs["auroc"],
                    f"{cell(ci['lower'])} – {cell(ci['upper'])}",
                    figs["average_precision"],
                    figs["brier"],
                    figs["ece"],
                ]
            )
    return rows


def _level_rows(cv: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            row["level"],
            caption,
            row["n"],
            row["precision"],
            f"{cell(row['precision_wilson_lower'])} – {cell(row['precision_wilson_upper'])}",
        ]
        for name, caption in (
            ("good_vs_rest", "label good"),
            ("best_parent_relevant", "best parent relevant"),
        )
        for row in (cv.get(name) or {}).get("levels") or []
    ]
