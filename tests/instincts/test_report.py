"""The instincts dashboard (seed 004, "Dashboard 可视化"): a store built with the public store
functions, the report's numbers checked against the store and against the seed's formulas by hand."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from pathlib import Path

import pandas as pd
import pytest

from duckscore.instincts.report import write_report
from duckscore.instincts.store import decay, ingest, init_store, top
from duckscore.instincts.workspace import Store, open_workspace

from ..helpers import documented_keys
from .conftest import BACKENDS, location

USER = str(uuid.UUID(int=10**6))
START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)  # a Monday: ISO week 2026-W02
NOW = START + dt.timedelta(weeks=8)
DAY, WEEK = dt.timedelta(days=1), dt.timedelta(weeks=1)
A, B, C, D, E, F, G = (str(uuid.UUID(int=i)) for i in range(1, 8))
TRIGGERS = {
    A: "when a test fails twice in a row",
    B: "用户要求写测试时",
    C: "before a risky refactor",
    D: "when the build is slow",
    E: "when asked for a summary",
    F: "on a new repository",
    G: r"pay $\frac{ $ <b>now</b>",
}  # neither mathtext for matplotlib nor markup for the page


def new_instincts(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": names,
            "trigger_text": [TRIGGERS[n] for n in names],
            "action_text": [f"act {n[-1]}" for n in names],
            "domain": ["code"] * len(names),
            "user_id": [USER] * len(names),
        }
    )


def events(rows: list[tuple[str, str, str, dt.datetime]]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["event_id", "instinct_id", "event_type", "occurred_at"]
    ).assign(
        occurred_at=lambda f: pd.to_datetime(f["occurred_at"].map(lambda t: t.replace(tzinfo=None)))
    )


@pytest.fixture(scope="module", params=BACKENDS)
def db(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Store:
    """Five weeks of events, a weekly decay in the eighth week, one instinct added after it; in
    a DuckDB file and in PostgreSQL."""
    db = location(request.param, tmp_path_factory.mktemp("store"), request)
    init_store(db)
    rows = []
    for w in range(5):  # A: observed and applied successfully every week, W02..W06
        rows += [
            (f"a-o{w}", A, "pattern_observed_again", START + w * WEEK + DAY),
            (f"a-s{w}", A, "applied_successfully", START + w * WEEK + 2 * DAY),
        ]
    rows += [
        ("b-1", B, "user_accepted", START),
        ("b-2", B, "reflect_approved", START + 3 * WEEK + 3 * DAY),
    ]
    rows += [
        ("c-1", C, "applied_failed", START + WEEK),
        ("c-2", C, "reflect_rejected", START + WEEK + DAY),
    ]
    rows += [(f"e-{i}", E, "user_corrected", START + WEEK + i * DAY) for i in range(3)]
    ingest(db, events(rows), new_instincts([A, B, C, D, E]), now=START)
    result = decay(db, START + 7 * WEEK)  # W09: every instinct decayed, E deprecated
    assert (result.decayed, result.deprecated) == (5, 1)
    ingest(db, new_instincts=new_instincts([F]), now=START + 7 * WEEK + DAY)  # F: no history
    return db


def seed_composite(f: float, e: float, h: float) -> float:
    """The seed's calculateCompositeConfidence, by hand."""
    weighted = f * 0.35 + e * 0.40 + h * 0.25
    return weighted * 0.7 if min(f, e, h) < 0.2 else max(0.0, min(1.0, weighted))


def images(page: str) -> list[bytes]:
    marker = 'src="data:image/png;base64,'
    return [base64.b64decode(chunk.split('"', 1)[0]) for chunk in page.split(marker)[1:]]


def test_report_shows_the_stores_numbers(db: Store, tmp_path: Path) -> None:
    out = tmp_path / "report"
    report = write_report(db, out, now=NOW)
    assert sorted(p.name for p in out.iterdir()) == [
        "radar.png",
        "report.html",
        "report.json",
        "trends.png",
    ]
    written = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert written == report.as_record()
    assert list(written) == documented_keys(
        "docs/instincts.md", "- `report.json` — the numbers behind them"
    )
    page = (out / "report.html").read_text(encoding="utf-8")
    assert images(page) == [(out / "radar.png").read_bytes(), (out / "trends.png").read_bytes()]
    assert all(png.startswith(b"\x89PNG") for png in images(page))
    assert "综合: 0.665 (强 - 上下文相关时建议)" in page and TRIGGERS[B] in page

    # the radar: active instincts by composite, the same rows `instincts top` gives
    shown = report.instincts
    assert [i["instinct_id"] for i in shown] == [A, B, F, D, C]  # E was deprecated by the decay
    expected = top(db, limit=12)
    assert [i["composite"] for i in shown] == expected["composite"].tolist()
    assert [(i["tier"], i["injection_method"]) for i in shown] == list(
        zip(expected["tier"], expected["injection_method"])
    )
    # by hand: A observed 5x (+0.05), applied 5x (+0.08); B accepted (+0.05, +0.10), reflect approved
    # (+0.30); C failed (-0.15), reflect rejected (-0.30); then the weekly decay (-0.02, -0.01, -0.005)
    scores = {
        A: (0.53, 0.89, 0.495),
        B: (0.28, 0.54, 0.895),
        C: (0.28, 0.34, 0.195),
        D: (0.28, 0.49, 0.495),
        F: (0.30, 0.50, 0.50),
    }
    for inst in shown:
        f, e, h = scores[inst["instinct_id"]]
        assert (inst["frequency_score"], inst["effectiveness_score"], inst["human_score"]) == (
            f,
            e,
            h,
        )
        assert inst["composite"] == pytest.approx(seed_composite(f, e, h), abs=1e-12)
    assert [i["tier"] for i in shown] == [
        "strong",
        "moderate",
        "moderate",
        "moderate",
        "deprecated",
    ]
    assert {t["tier"]: t["active_instincts"] for t in report.tier_counts} == {
        "core": 0,
        "strong": 1,
        "moderate": 3,
        "tentative": 0,
        "deprecated": 1,
    }
    assert report.status_counts == {"active": 5, "deprecated": 1}

    # the trends: contiguous ISO weeks W02..W09 (W07 and W08 have no record), last value per week
    trends = report.trends
    with open_workspace(db, read_all=True) as work:
        con = work.con
        first, last = con.execute(
            "SELECT CAST(date_trunc('week', min(recorded_at)) AS DATE), "
            "CAST(date_trunc('week', max(recorded_at)) AS DATE) FROM confidence_history "
            "WHERE CAST(instinct_id AS VARCHAR) <> ?",
            [E],
        ).fetchone()
        history = con.execute(
            "SELECT CAST(instinct_id AS VARCHAR), count(*) FROM confidence_history GROUP BY ALL"
        ).fetchall()
        stored = dict(
            con.execute(
                "SELECT CAST(id AS VARCHAR), CAST(composite AS DOUBLE) FROM instincts"
            ).fetchall()
        )
        a_w04 = con.execute(
            "SELECT CAST(composite AS DOUBLE), CAST(eff_score AS DOUBLE) FROM confidence_history "
            "WHERE instinct_id = CAST(? AS UUID) AND recorded_at < ? ORDER BY recorded_at DESC LIMIT 1",
            [A, (START + 3 * WEEK).replace(tzinfo=None)],
        ).fetchone()
    assert len(trends["weeks"]) == (last - first).days // 7 + 1 == 8
    assert trends["weeks"] == [f"2026-W{w:02d}" for w in range(2, 10)]
    assert trends["week_starts"][0] == "2026-01-05"
    series = {s["instinct_id"]: s for s in trends["series"]}
    assert list(series) == [A, B, D, C]  # radar order; F has no history
    counts = dict(history)
    assert F not in counts and {i["instinct_id"]: i["history_records"] for i in shown} == {
        k: v for k, v in counts.items() if k != E
    } | {F: 0}
    for instinct_id, s in series.items():
        assert len(s["composite"]) == len(s["records"]) == 8
        assert s["composite"][-1] == stored[instinct_id]  # the last record is the store's composite
        assert sum(s["records"]) == counts[instinct_id]
    a = series[A]
    assert a["records"] == [2, 2, 2, 2, 2, 0, 0, 1]
    assert (a["composite"][2], a["effectiveness"][2]) == a_w04  # W04: the last of its two records
    assert (
        a["effectiveness"][:5] == [0.58, 0.66, 0.74, 0.82, 0.90] and a["effectiveness"][7] == 0.89
    )
    assert (
        a["composite"][5] == a["composite"][6] == a["composite"][4]
    )  # carried over the silent weeks
    assert series[B]["human"] == [0.6, 0.6, 0.6, 0.9, 0.9, 0.9, 0.9, 0.895]
    assert series[D]["composite"][:7] == [None] * 7 and series[D]["records"][7] == 1
    assert series[C]["frequency"][0] is None and series[C]["records"][1] == 2

    # deterministic: the same store and `now` give the same report
    again = write_report(db, tmp_path / "again", now=NOW)
    assert again == report
    assert (tmp_path / "again" / "report.html").read_text(encoding="utf-8") == page


def test_limit_keeps_the_top_and_their_trends(db: Store, tmp_path: Path) -> None:
    report = write_report(db, tmp_path / "out", limit=2, now=NOW)
    assert [i["instinct_id"] for i in report.instincts] == [A, B]
    assert [s["instinct_id"] for s in report.trends["series"]] == [A, B]
    assert len(report.trends["weeks"]) == 8  # A's and B's weeks: W02..W09
    assert (
        sum(t["active_instincts"] for t in report.tier_counts) == 5
    )  # counts cover every active one


def test_instincts_without_any_history(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    init_store(db)
    ingest(db, new_instincts=new_instincts([G, F, D]), now=START)
    report = write_report(db, tmp_path / "out", now=NOW)
    assert [i["instinct_id"] for i in report.instincts] == [D, F, G]  # equal composites: by id
    assert report.trends == {"weeks": [], "week_starts": [], "series": []}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "radar.png",
        "report.html",
        "report.json",
    ]
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert len(images(page)) == 1 and "No confidence history recorded" in page
    assert "&lt;b&gt;now&lt;/b&gt;" in page and "<b>now</b>" not in page


def test_empty_store_gives_a_page_that_says_so(db: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_report(db, out, now=NOW)  # charts from an earlier report into the same folder ...
    empty = tmp_path / "empty.duckdb"
    init_store(empty)
    report = write_report(empty, out, now=NOW)
    assert report.instincts == [] and report.instincts_total == 0 and report.figures == []
    assert report.trends["weeks"] == []
    assert all(t["active_instincts"] == 0 for t in report.tier_counts)
    # ... do not survive next to a report that has none
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json"]
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "No active instincts" in page and images(page) == []
