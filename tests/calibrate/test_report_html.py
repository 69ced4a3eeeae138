"""The calibration report's page shows every text it is given as text: a policy's version (the
title, the base policy) and every name in report.json, each made hostile markup here."""

from __future__ import annotations

from typing import Any

from duckscore.calibrate.report import render_html

from ..helpers import assert_shown_as_text, hostile

PNG = b"\x89PNG\r\n\x1a\n"
THRESHOLDS = ("T_low", "T_high", "R_hitl", "n_good", "n_ambiguous", "n_bad")
FIGURES = ("score_distributions", "reliability", "risk_coverage", "ablation")


def metrics(level: str) -> dict[str, Any]:
    return {
        "n": 3,
        "auroc": 0.75,
        "auroc_ci": {"lower": 0.5, "upper": None},
        "average_precision": 0.8,
        "brier": 0.2,
        "ece": 0.1,
        "levels": [
            {
                "level": level,
                "n": 2,
                "precision": 0.5,
                "precision_wilson_lower": 0.1,
                "precision_wilson_upper": 0.9,
            }
        ],
    }


def report() -> dict[str, Any]:
    """A report.json in the shape calibrate writes, a hostile text in every place a text goes."""
    figures = {
        "good_vs_bad": metrics(hostile("good_vs_bad level")),
        "good_vs_rest": metrics(hostile("good_vs_rest level")),
        "best_parent_relevant": metrics(hostile("best_parent_relevant level")),
        "routing": {
            hostile("routing label"): {
                "n": 3,
                "auto_rate": 0.5,
                "hitl_rate": 0.25,
                "web_fallback_rate": 0.25,
                "high_rate": 0.5,
            }
        },
    }
    scope = {"n": 3, "base_rate": 0.5, "brier": 0.2, "ece": 0.1, "auroc": 0.7}
    return {
        "base_policy": hostile("base_policy"),
        "label_counts": {hostile("label"): 3},
        "settings": {"folds": 3, "seed": 0, "thresholds": hostile("thresholds method")},
        "thresholds": {hostile("fit"): dict.fromkeys(THRESHOLDS, 0.5)},
        "ablation": [
            {
                "pass": hostile("ablation pass"),
                "parameter": hostile("ablation parameter"),
                "value": hostile("ablation value"),
                "in_sample_auroc": 0.7,
                "cross_validated_auroc": 0.6,
                "pooled_held_out_auroc": None,
            }
        ],
        "cross_validated": figures,
        "in_sample": figures,
        "targets": {
            hostile("target"): {"value": 0.9, "pooled_held_out": 0.8, "target": 0.85, "met": True}
        },
        "probability": {
            "method": hostile("probability method"),
            "features": [hostile("feature 1"), hostile("feature 2")],
            "cross_validated": scope,
            "in_sample": scope,
            "cross_validated_base_rate_brier": 0.25,
            "ece_of_perfect_calibration": {"ece_mean": 0.05, "ece_p95": 0.08, "simulations": 10},
            "held_out_brier": {hostile("candidate map"): 0.2},
            "targets": {
                hostile("probability target"): {"value": 0.1, "target": 0.05, "met": False}
            },
        },
    }


def test_every_text_in_the_report_is_escaped() -> None:
    figures = dict.fromkeys((*FIGURES, "probability_reliability"), PNG)
    page = render_html(report(), figures, hostile("title"))
    texts = ["title", "base_policy", "label", "thresholds method", "fit", "ablation pass",
             "ablation parameter", "ablation value", "routing label", "target",
             "good_vs_rest level", "best_parent_relevant level", "probability method",
             "feature 1", "feature 2", "candidate map", "probability target"]  # fmt: skip
    assert_shown_as_text(page, [hostile(t) for t in texts], images=len(figures))


def test_the_page_without_p_good_has_no_section_for_it() -> None:
    document = report()
    del document["probability"]
    page = render_html(document, dict.fromkeys(FIGURES, PNG), "calibration")
    assert_shown_as_text(page, ["calibration", hostile("base_policy")], images=len(FIGURES))
    assert "p_good" not in page
