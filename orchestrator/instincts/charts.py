"""The charts of the instincts dashboard, drawn with matplotlib from the numbers of report.py:
a radar of the three scores per instinct, and the weekly confidence trends."""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

from ..common.report_html import figure_png, pyplot

if TYPE_CHECKING:
    from .report import InstinctsReport

AXES = (
    ("frequency", "frequency_score", "频率分"),
    ("effectiveness", "effectiveness_score", "效果分"),
    ("human", "human_score", "人工分"),
)
TREND_SERIES = ("composite", "frequency", "effectiveness", "human")
FIGURES = ("radar", "trends")
TIER_COLOURS = ("#1b7837", "#5aae61", "#e9a23b", "#d6604d", "#8c8c8c")
TITLE_CHARS = 30


def chart_files(instincts: list[dict[str, Any]], trends: dict[str, Any]) -> list[str]:
    """The charts a dashboard has: radar.png when there are active instincts, trends.png when
    they have history."""
    if not instincts:
        return []
    return ["radar.png", "trends.png"] if trends["series"] else ["radar.png"]


def draw_figures(report: InstinctsReport) -> dict[str, bytes]:
    """The PNGs of the report's charts (its `figures`), by name."""
    if not report.figures:
        return {}
    plt = pyplot()
    colours = {
        t["tier"]: TIER_COLOURS[min(i, len(TIER_COLOURS) - 1)]
        for i, t in enumerate(report.tier_counts)
    }
    out: dict[str, bytes] = {}
    with warnings.catch_warnings():
        # trigger texts may hold characters the installed fonts lack: drawn as boxes; the page
        # (rendered by the browser) has the full text
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
        family = _font_family()
        titles = _Titles(family)
        with plt.rc_context({"font.family": family}):
            out["radar"] = _radar(plt, report.instincts, colours, titles)
            if "trends.png" in report.figures:
                out["trends"] = _trend_chart(plt, report, titles)
    return out


def _font_family() -> list[str]:
    """DejaVu Sans, then a CJK font when one is installed (seed 004's texts are Chinese)."""
    from matplotlib import font_manager

    installed = {f.name for f in font_manager.fontManager.ttflist}
    cjk = [
        name
        for name in (
            "Noto Sans CJK SC",
            "Noto Sans CJK JP",
            "Source Han Sans SC",
            "WenQuanYi Zen Hei",
            "WenQuanYi Micro Hei",
            "Microsoft YaHei",
            "SimHei",
            "PingFang SC",
            "Hiragino Sans GB",
            "Arial Unicode MS",
        )
        if name in installed
    ]
    return ["DejaVu Sans", *cjk[:1]]


class _Titles:
    """Chart titles "#rank trigger…"; a trigger the fonts cannot draw (e.g. Chinese without a CJK
    font installed) becomes "#rank (trigger in the table)" rather than a row of boxes."""

    def __init__(self, family: list[str]) -> None:
        from matplotlib import font_manager
        from matplotlib.ft2font import FT2Font

        self.drawable: set[int] = set()
        for name in family:
            try:
                path = font_manager.findfont(
                    font_manager.FontProperties(family=name), fallback_to_default=False
                )
                self.drawable |= set(FT2Font(path).get_charmap())
            except (ValueError, OSError, RuntimeError):
                continue

    def __call__(self, inst: dict[str, Any], limit: int = TITLE_CHARS) -> str:
        text = shorten(inst["trigger_text"], limit)
        if all(ord(c) in self.drawable or c.isspace() for c in text):
            return f"#{inst['rank']} " + text.replace("$", r"\$")  # no mathtext from user text
        return f"#{inst['rank']} (trigger in the table)"


def _radar(
    plt: Any, instincts: list[dict[str, Any]], colours: dict[str, str], titles: _Titles
) -> bytes:
    n = len(instincts)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(3.4 * cols, 4.0 * rows + 0.4),
        subplot_kw={"projection": "polar"},
        squeeze=False,
    )
    # frequency at the top, effectiveness lower left, human lower right (the seed's drawing)
    angles = [math.pi / 2 + 2 * math.pi * i / len(AXES) for i in range(len(AXES))]
    for ax, inst in zip(axes.flat, instincts):
        values = [inst[column] for _, column, _ in AXES]
        colour = colours.get(inst["tier"], TIER_COLOURS[-1])
        ax.plot(angles + angles[:1], values + values[:1], color=colour, linewidth=2)
        ax.fill(angles + angles[:1], values + values[:1], color=colour, alpha=0.25)
        for angle, value in zip(angles, values):
            ax.annotate(
                f"{value:.3f}".rstrip("0").rstrip("."),  # three decimals: 0.195 is not 0.2
                (angle, value),
                textcoords="offset points",
                xytext=(0, 5),
                ha="center",
                fontsize=7,
            )
        ax.set_ylim(0, 1)
        ax.set_yticks(
            [0.2, 0.4, 0.6, 0.8, 1.0], ["", "0.4", "", "0.8", ""], fontsize=6, color="grey"
        )
        ax.set_xticks(angles, [name for name, _, _ in AXES], fontsize=8)
        ax.set_title(titles(inst), fontsize=9, pad=14)
        ax.set_xlabel(caption(inst), fontsize=8, labelpad=8)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(  # wrapped to the figure: one instinct makes a narrow figure
        "Three scores per instinct (radar) with composite, tier and injection method",
        fontsize=11,
        wrap=True,
    )
    return figure_png(fig, plt, dpi=100)


def _trend_chart(plt: Any, report: InstinctsReport, titles: _Titles) -> bytes:
    trends = report.trends
    weeks = trends["weeks"]
    ranks = {i["instinct_id"]: i for i in report.instincts}
    series = trends["series"]
    cols = min(3, len(series))
    rows = math.ceil(len(series) / cols)
    width = max(9.0, 3.6 * cols)
    fig = plt.figure(figsize=(width, 3.6 + 3.0 * rows))
    grid = fig.add_gridspec(rows + 1, cols, height_ratios=[1.3] + [1] * rows)
    x = list(range(len(weeks)))
    step = max(1, math.ceil(len(weeks) / 16))

    def weekly_axis(ax: Any, labelled: bool) -> None:
        ax.set_ylim(0, 1.02)
        ax.set_xlim(-0.3, max(len(weeks) - 0.7, 0.3))
        ax.set_xticks(
            x[::step], weeks[::step] if labelled else [], rotation=45, ha="right", fontsize=7
        )
        ax.grid(alpha=0.3)

    overview = fig.add_subplot(grid[0, :])
    for s in series:
        inst = ranks[s["instinct_id"]]
        overview.plot(x, _nan(s["composite"]), marker="o", markersize=3, label=titles(inst, 22))
    for t in report.tier_counts[:-1]:
        overview.axhline(t["at_least"], color="grey", linewidth=0.6, linestyle=":")
    weekly_axis(overview, True)
    overview.set(
        ylabel="composite (recorded)",
        title="Confidence by ISO week: last recorded value of each week",
    )
    overview.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))

    styles = {
        "composite": ("black", "-", 2.0),
        "frequency": ("#4477aa", "--", 1.1),
        "effectiveness": ("#228833", "--", 1.1),
        "human": ("#cc6677", "--", 1.1),
    }
    for i, s in enumerate(series):
        ax = fig.add_subplot(grid[1 + i // cols, i % cols])
        inst = ranks[s["instinct_id"]]
        for name in TREND_SERIES:
            colour, style, width_ = styles[name]
            ax.plot(
                x,
                _nan(s[name]),
                color=colour,
                linestyle=style,
                linewidth=width_,
                label=name,
                marker="o" if name == "composite" else ".",
                markersize=3,
            )
        weekly_axis(ax, True)
        ax.set_title(titles(inst), fontsize=9)
        if i == 0:
            ax.legend(fontsize=6, loc="lower left")
    return figure_png(fig, plt, dpi=100)


def _nan(values: list[float | None]) -> list[float]:
    return [math.nan if v is None else v for v in values]


def shorten(text: str, limit: int = TITLE_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def caption(inst: dict[str, Any]) -> str:
    return f"composite {inst['composite']:.3f} ({inst['tier']} – {inst['injection_method']})"
