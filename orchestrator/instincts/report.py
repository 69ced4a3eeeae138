"""The instincts dashboard (seed 004, "Dashboard 可视化"): a radar chart of the three scores of
each top instinct, with its composite, tier and injection method under it, and the confidence
trends of those instincts by ISO week; one self-contained report.html (PNGs embedded), the PNGs
and report.json (the numbers behind the charts), written atomically.

Every number comes from SQL: the confidence rows from the store policy's own confidence.sql (the
query `duckscore instincts top` runs), the trends from confidence_history. matplotlib only draws.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.report_html import render_page
from ..core.errors import InputError
from ..core.outputs import atomic_output_dir, write_json
from ..core.records import Report
from ..core.session import Session
from ..core.version import __version__
from . import postgres
from .charts import FIGURES, TREND_SERIES, chart_files, draw_figures, shorten
from .policy import InstinctPolicy
from .scores import render_confidence
from .workspace import Store, open_workspace

# The seed's captions of its five tiers (its "可视化" of the application policies); a store whose
# policy names other tiers shows the policy's names only.
SEED_TIER_LABELS = {
    "core": "核心行为 - 自动注入",
    "strong": "强 - 上下文相关时建议",
    "moderate": "中等 - 被问到时提供",
    "tentative": "试探 - 静默观察",
    "deprecated": "弱 - 标记删除",
}
TRENDS_SQL = """
WITH
history AS (
    SELECT
        CAST(h.instinct_id AS VARCHAR) AS instinct_id,
        CAST(date_trunc('week', h.recorded_at) AS DATE) AS week_start,
        h.recorded_at, h.rowid AS seq,
        CAST(h.composite AS DOUBLE) AS composite, CAST(h.freq_score AS DOUBLE) AS frequency,
        CAST(h.eff_score AS DOUBLE) AS effectiveness, CAST(h.human_score AS DOUBLE) AS human
    FROM confidence_history AS h
    WHERE CAST(h.instinct_id AS VARCHAR) IN (SELECT unnest(CAST($ids AS VARCHAR[])))
),
last_in_week AS (
    -- the last value recorded in each ISO week (ties on recorded_at: the later insert)
    SELECT *, count(*) OVER (PARTITION BY instinct_id, week_start) AS records
    FROM history
    QUALIFY row_number() OVER (PARTITION BY instinct_id, week_start ORDER BY recorded_at DESC, seq DESC) = 1
),
weeks AS (
    SELECT CAST(w AS DATE) AS week_start
    FROM range((SELECT CAST(min(week_start) AS TIMESTAMP) FROM last_in_week),
               (SELECT CAST(max(week_start) AS TIMESTAMP) FROM last_in_week) + INTERVAL 7 DAY,
               INTERVAL 7 DAY) AS t(w)
),
grid AS (
    -- from an instinct's first recorded week on; a week without a record keeps the last value
    SELECT f.instinct_id, w.week_start
    FROM (SELECT instinct_id, min(week_start) AS first_week FROM last_in_week GROUP BY instinct_id) AS f
    JOIN weeks AS w ON w.week_start >= f.first_week
)
SELECT
    g.instinct_id, strftime(g.week_start, '%Y-%m-%d') AS week_start, strftime(g.week_start, '%G-W%V') AS week,
    coalesce(l.records, 0) AS records,
    {carried}
FROM grid AS g
LEFT JOIN last_in_week AS l ON l.instinct_id = g.instinct_id AND l.week_start = g.week_start
ORDER BY g.instinct_id, g.week_start
""".format(
    carried=",\n    ".join(
        f"last_value(l.{s} IGNORE NULLS) OVER (PARTITION BY g.instinct_id ORDER BY g.week_start "
        f"ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS {s}"
        for s in TREND_SERIES
    )
)


@dataclass(frozen=True, kw_only=True)
class InstinctsReport(Report):
    """The dashboard's numbers (report.json, docs/instincts.md#report): every one from SQL."""

    generated_at: str
    duckscore_version: str
    store: str
    policy: str
    weights: dict[str, float]
    low_dimension: dict[str, float]  # the penalty's threshold and factor
    limit: int
    instincts_total: int
    status_counts: dict[str, int]
    tier_counts: list[dict[str, Any]]
    instincts: list[dict[str, Any]]  # the top `limit` active instincts, ranked
    trends: dict[str, Any]  # weeks, week_starts, series
    figures: list[str]  # the charts drawn: radar.png, trends.png


def write_report(
    db: Store, out_dir: Path, limit: int = 12, now: dt.datetime | None = None
) -> InstinctsReport:
    """Write out_dir/report.html, report.json and the charts (radar.png, trends.png) of the store
    `db`: the top `limit` active instincts by composite (composite desc, then id). Returns the
    report, whose record report.json is."""
    if limit < 1:
        raise InputError(f"--limit {limit}: must be at least 1")
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    store = postgres.describe(str(db)) if postgres.is_postgres(db) else str(db)
    with open_workspace(db, read_all=True) as work:
        report = build_report(
            Session(connection=work.con),
            work.policy,
            limit,
            generated_at=moment.isoformat(timespec="seconds"),
            store=store,
        )
    figures = draw_figures(report)
    record = report.as_record()
    with atomic_output_dir(out_dir) as stage:
        write_json(stage / "report.json", record)
        for name, png in figures.items():
            (stage / f"{name}.png").write_bytes(png)
        (stage / "report.html").write_text(render_html(record, figures), encoding="utf-8")
    for name in FIGURES:  # a chart this run has nothing for must not survive from an earlier run
        if name not in figures:
            (Path(out_dir) / f"{name}.png").unlink(missing_ok=True)
    return report


# -- numbers (SQL) ----------------------------------------------------------------------------


def build_report(
    session: Session, policy: InstinctPolicy, limit: int, *, generated_at: str, store: str
) -> InstinctsReport:
    rendered = render_confidence(policy)
    session.check(rendered)
    confidence = f"({rendered.text})"
    top = session.frame(f"""
        SELECT CAST(instinct_id AS VARCHAR) AS instinct_id, trigger_text, action_text, domain,
               frequency_score, effectiveness_score, human_score, composite, tier, injection_method
        FROM {confidence} WHERE status = 'active'
        ORDER BY composite DESC NULLS LAST, instinct_id LIMIT {int(limit)}""")
    per_tier = dict(
        session.con.execute(
            f"SELECT tier, count(*) FROM {confidence} WHERE status = 'active' GROUP BY tier"
        ).fetchall()
    )
    statuses = dict(
        session.con.execute(
            "SELECT status, count(*) FROM instincts GROUP BY status ORDER BY status"
        ).fetchall()
    )
    ids = top["instinct_id"].tolist()
    weekly = session.frame(TRENDS_SQL, {"ids": ids}) if ids else None

    tiers = policy.tiers
    tier_counts = [
        {
            "tier": t.tier,
            "at_least": t.at_least,
            "below": tiers[i - 1].at_least if i else None,
            "injection_method": t.injection_method,
            "active_instincts": int(per_tier.get(t.tier, 0)),
        }
        for i, t in enumerate(tiers)
    ]
    trends = _trends(weekly, ids)
    records = {s["instinct_id"]: sum(s["records"]) for s in trends["series"]}
    instincts = [
        {
            "rank": rank,
            "instinct_id": r["instinct_id"],
            "trigger_text": r["trigger_text"],
            "action_text": r["action_text"],
            "domain": r["domain"],
            "frequency_score": float(r["frequency_score"]),
            "effectiveness_score": float(r["effectiveness_score"]),
            "human_score": float(r["human_score"]),
            "composite": float(r["composite"]),
            "tier": r["tier"],
            "injection_method": r["injection_method"],
            "history_records": int(records.get(r["instinct_id"], 0)),
        }
        for rank, r in enumerate(top.to_dict("records"), start=1)
    ]
    return InstinctsReport(
        generated_at=generated_at,
        duckscore_version=__version__,
        store=store,
        policy=policy.version,
        weights=dict(policy.weights),
        low_dimension=dataclasses.asdict(policy.composite),
        limit=limit,
        instincts_total=int(sum(statuses.values())),
        status_counts={k: int(v) for k, v in statuses.items()},
        tier_counts=tier_counts,
        instincts=instincts,
        trends=trends,
        figures=chart_files(instincts, trends),
    )


def _trends(weekly: Any, ids: list[str]) -> dict[str, Any]:
    if weekly is None or weekly.empty:
        return {"weeks": [], "week_starts": [], "series": []}
    starts = sorted(set(weekly["week_start"]))
    labels = dict(zip(weekly["week_start"], weekly["week"]))
    position = {w: i for i, w in enumerate(starts)}
    series = []
    for instinct_id in ids:  # the radar's order
        rows = weekly[weekly["instinct_id"] == instinct_id]
        if rows.empty:
            continue
        entry: dict[str, Any] = {"instinct_id": instinct_id, "records": [0] * len(starts)}
        entry |= {s: [None] * len(starts) for s in TREND_SERIES}
        for row in rows.to_dict("records"):
            i = position[row["week_start"]]
            entry["records"][i] = int(row["records"])
            for s in TREND_SERIES:
                entry[s][i] = float(row[s])
        series.append(entry)
    return {"weeks": [labels[w] for w in starts], "week_starts": starts, "series": series}


# -- HTML -------------------------------------------------------------------------------------


def _seed_caption(inst: dict[str, Any]) -> str:
    label = SEED_TIER_LABELS.get(inst["tier"], inst["tier"])
    return f"综合: {inst['composite']:.3f} ({label})"


def render_html(report: dict[str, Any], figures: dict[str, bytes]) -> str:
    """The page of a report's record (report.json) and its charts."""
    return render_page("instincts/report.html", report=report, figures=figures, rows=_rows(report))


def _rows(report: dict[str, Any]) -> dict[str, Any]:
    """The rows of the page's tables (instincts/report.html gives their headers), the count of
    active instincts and the instincts without history."""
    instincts = report["instincts"]
    ranks = {i["instinct_id"]: i for i in instincts}
    return {
        "tiers": [
            [
                t["tier"],
                SEED_TIER_LABELS.get(t["tier"], ""),
                f"≥ {t['at_least']:g}" + (f", < {t['below']:g}" if t["below"] is not None else ""),
                t["injection_method"],
                t["active_instincts"],
            ]
            for t in report["tier_counts"]
        ],
        "active": sum(t["active_instincts"] for t in report["tier_counts"]),
        "instincts": [
            [
                i["rank"],
                i["trigger_text"],
                i["action_text"],
                i["domain"],
                i["frequency_score"],
                i["effectiveness_score"],
                i["human_score"],
                i["composite"],
                i["tier"],
                i["injection_method"],
                _seed_caption(i),
                i["history_records"],
                i["instinct_id"],
            ]
            for i in instincts
        ],
        "trends": [
            [
                _titled(ranks[s["instinct_id"]]),
                *[_week_cell(c, n) for c, n in zip(s["composite"], s["records"])],
            ]
            for s in report["trends"]["series"]
        ],
        "without_history": [_titled(i) for i in instincts if not i["history_records"]],
    }


def _titled(inst: dict[str, Any]) -> str:
    return f"#{inst['rank']} {shorten(inst['trigger_text'])}"


def _week_cell(value: float | None, records: int) -> str:
    if value is None:
        return ""
    return f"{value:.3f}" + ("" if records else "*")
