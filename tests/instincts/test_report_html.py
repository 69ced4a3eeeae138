"""The instincts dashboard shows every text it is given as text: the store's path, the policy's
version and names, each instinct's trigger, action, domain and id, each made hostile markup."""

from __future__ import annotations

from typing import Any

from duckscore.instincts.charts import shorten
from duckscore.instincts.report import render_html

from ..helpers import assert_shown_as_text, hostile

PNG = b"\x89PNG\r\n\x1a\n"


def instinct(rank: int, history: int) -> dict[str, Any]:
    return {
        "rank": rank,
        "instinct_id": hostile(f"id {rank}"),
        "trigger_text": hostile(f"trigger {rank}"),
        "action_text": hostile(f"action {rank}"),
        "domain": hostile(f"domain {rank}"),
        "frequency_score": 0.5,
        "effectiveness_score": 0.5,
        "human_score": 0.5,
        "composite": 0.5,
        "tier": hostile("tier"),
        "injection_method": hostile("injection method"),
        "history_records": history,
    }


def report(instincts: list[dict[str, Any]]) -> dict[str, Any]:
    """A report.json in the shape `instincts report` writes, a hostile text in every place a
    text goes; the first instinct has a week of history."""
    series = [
        {"instinct_id": i["instinct_id"], "records": [1], "composite": [0.5]}
        for i in instincts
        if i["history_records"]
    ]
    return {
        "generated_at": hostile("generated at"),
        "duckscore_version": hostile("version"),
        "store": hostile("store"),
        "policy": hostile("policy"),
        "weights": {hostile("weight"): 1.0},
        "low_dimension": {"low_dimension_factor": 0.7, "low_dimension_below": 0.2},
        "instincts_total": len(instincts),
        "status_counts": {hostile("status"): len(instincts)},
        "tier_counts": [
            {
                "tier": hostile("tier"),
                "at_least": 0.0,
                "below": None,
                "injection_method": hostile("injection method"),
                "active_instincts": len(instincts),
            }
        ],
        "instincts": instincts,
        "trends": {"weeks": [hostile("week")] if series else [], "series": series},
    }


def test_every_text_in_the_dashboard_is_escaped() -> None:
    document = report([instinct(1, history=1), instinct(2, history=0)])
    page = render_html(document, {"radar": PNG, "trends": PNG})
    texts = ["generated at", "version", "store", "policy", "weight", "status", "tier",
             "injection method", "week"]  # fmt: skip
    texts += [f"{what} {rank}" for what in ("id", "trigger", "action", "domain") for rank in (1, 2)]
    shortened = [f"#{i['rank']} {shorten(i['trigger_text'])}" for i in document["instincts"]]
    assert_shown_as_text(page, [hostile(t) for t in texts] + shortened, images=2)


def test_a_dashboard_without_history_or_instincts_escapes_too() -> None:
    document = report([instinct(1, history=0)])
    page = render_html(document, {"radar": PNG})
    assert_shown_as_text(page, [hostile("trigger 1"), "#1 " + shorten(hostile("trigger 1"))], 1)
    assert "No confidence history recorded" in page
    page = render_html(report([]), {})
    assert_shown_as_text(page, [hostile("store"), hostile("policy"), hostile("status")], 0)
    assert "No active instincts" in page
