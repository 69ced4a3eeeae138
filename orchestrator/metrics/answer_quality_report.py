"""The report of `duckscore eval --answers-quality`: tables as text (stdout) or Markdown (`--out
FILE.md`), or one JSON document (`--json`, `--out FILE.json`)."""

from __future__ import annotations

from typing import Any

from .answer_quality import QualityReport
from .significance import p_value_text

Table = tuple[str, list[str], list[list[str]]]  # title, header, rows


def report_document(report: QualityReport) -> dict[str, Any]:
    """What --json prints: the tables' rows with full precision."""
    return {
        "versions": report.versions,
        "metrics": report.metrics,
        "by_level": _rows(report, "all"),
        "side_by_side": None
        if report.common_queries is None
        else {"queries": report.common_queries, "by_level": _rows(report, "common")},
        "checks": report.tests,
        "routing_checks": report.routing_checks,
        "ignored_queries": report.ignored_queries,
        "test": {"permutations": report.permutations, "seed": report.seed,
                 "alpha": report.alpha, "exact_max_n": report.exact_max_n},
    }  # fmt: skip


def _rows(report: QualityReport, scope: str) -> list[dict[str, Any]]:
    """One row per version and level: its routing and, per metric, n, mean and interval."""
    rows = []
    for routed in report.routing:
        if routed["scope"] != scope:
            continue
        key = (routed["version"], routed["level"])
        rows.append({
            **{k: v for k, v in routed.items() if k != "scope"},
            "metrics": {s["metric"]: {"n": s["n_evaluated"], "mean": s["mean"],
                                      "ci_low": s["ci_low"], "ci_high": s["ci_high"]}
                        for s in report.level_stats
                        if s["scope"] == scope and (s["version"], s["level"]) == key},
        })  # fmt: skip
    return rows


def report_tables(report: QualityReport) -> list[Table]:
    """The report's tables: by version and level; side by side over the queries every version
    scored; the checks of seed 000 §11."""
    confidence = f"{1 - report.alpha:.0%}"
    tables = [_by_level(report, confidence)]
    if report.common_queries is not None:
        tables.append(_side_by_side(report, confidence))
    tables.append(_checks(report))
    if report.routing_checks:
        tables.append(_routing_checks(report))
    return tables


def _by_level(report: QualityReport, confidence: str) -> Table:
    shares = ["web", "hitl"] + (["clarify"] if report.has_actions else [])
    header = ["version", "level", "queries", "evaluated", *report.metrics, *shares]
    rows = []
    for row in _rows(report, "all"):
        rows.append([
            row["version"], row["level"], f"{row['n_queries']:,}", f"{row['n_evaluated']:,}",
            *(_mean(row["metrics"].get(m)) for m in report.metrics),
            *(_share(row[f"share_{s}"]) for s in shares),
        ])  # fmt: skip
    title = f"answer quality by version and level: mean [{confidence} t interval]; share routed"
    return title, header, rows


def _side_by_side(report: QualityReport, confidence: str) -> Table:
    rows_by = {(r["version"], r["level"]): r for r in _rows(report, "common")}
    levels = [lv for lv in ("high", "medium", "low") if any(lv == k[1] for k in rows_by)]
    rows = []
    for level in levels:
        for measure in [*report.metrics, "web", "hitl"]:
            cells = []
            for version in report.versions:
                row = rows_by.get((version, level))
                if row is None:
                    cells.append("-")
                elif measure in ("web", "hitl"):
                    cells.append(f"{_share(row[f'share_{measure}'])} of {row['n_queries']:,}")
                else:
                    stats = row["metrics"].get(measure)
                    cells.append(f"{_mean(stats)} n={stats['n'] if stats else 0:,}")
            rows.append([level, measure, *cells])
    title = (
        f"side by side, the {report.common_queries:,} queries every version scored: mean "
        f"[{confidence} t interval] of n evaluated; share routed of the level's queries"
    )
    return title, ["level", "measure", *report.versions], rows


def _checks(report: QualityReport) -> Table:
    rows = [
        [t["version"], f"{t['metric']}: high above low", _number(t["high"]), _number(t["low"]),
         _signed(t["difference"]), _p(t["p_value"]), t["verdict"]]
        for t in report.tests
    ]  # fmt: skip
    title = (
        f"seed 000 §11 checks: one-sided permutation test of high above low, yes when p <= "
        f"{report.alpha:g} (all splits of a pool of up to {report.exact_max_n} queries, else "
        f"{report.permutations:,} random ones, seed {report.seed})"
    )
    return title, ["version", "check", "high", "low", "difference", "p-value", "verdict"], rows


def _routing_checks(report: QualityReport) -> Table:
    routed = {"web": "web_fallback", "clarification": "need_hitl or clarify"}
    shares = {(r["version"], r["level"]): r for r in report.routing if r["scope"] == "all"}
    rows = []
    for check in report.routing_checks:
        needed = f"share_needed_{check['need']}"
        low, high = (shares.get((check["version"], lv), {}).get(needed) for lv in ("low", "high"))
        rows.append([
            check["version"], f"{routed[check['need']]} vs needed_{check['need']}",
            f"{check['known']:,}", f"{check['needed']:,}", f"{check['routed']:,}",
            _number(check["routing_precision"]), _number(check["routing_recall"]),
            _number(low), _number(high),
        ])  # fmt: skip
    header = ["version", "routing vs need", "known", "needed", "routed", "precision", "recall",
              "needed|low", "needed|high"]  # fmt: skip
    title = "is low more in need? routing against the recorded need (queries where it is known)"
    return title, header, rows


def format_text(tables: list[Table], ignored: int) -> str:
    """The tables as aligned text, then the count of ignored quality rows."""
    blocks = []
    for title, header, rows in tables:
        widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
        lines = [title] + [
            "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(line, widths))).rstrip()
            for line in [header, *rows]
        ]  # fmt: skip
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + f"\n\n{_ignored(ignored)}"


def format_markdown(tables: list[Table], ignored: int) -> str:
    """The tables as Markdown, each under its title."""
    blocks = ["# Answer quality by score policy version (seed 000 §11)"]
    for title, header, rows in tables:
        lines = [f"**{title}**", "", _md_row(header), _md_row(["---"] * len(header))]
        blocks.append("\n".join(lines + [_md_row(row) for row in rows]))
    return "\n\n".join(blocks) + f"\n\n{_ignored(ignored)}\n"


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _ignored(ignored: int) -> str:
    return f"{ignored:,} answer-quality rows of queries no --scored folder scored, ignored"


def _mean(stats: dict[str, Any] | None) -> str:
    if stats is None or stats["mean"] is None:
        return "-"
    if stats["ci_low"] is None:
        return f"{stats['mean']:.3f}"
    return f"{stats['mean']:.3f} [{stats['ci_low']:.3f}, {stats['ci_high']:.3f}]"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def _p(value: float | None) -> str:
    # a random test's p is (as extreme + 1) / (permutations + 1), never 0
    return "-" if value is None else p_value_text(value)
