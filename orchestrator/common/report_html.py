"""The pieces of duckscore's self-contained HTML reports (calibrate, instincts): PNG figures
drawn by matplotlib, embedded images and tables. Numbers come from SQL; this only shows them."""

from __future__ import annotations

import base64
import html
import io
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig: Any, plt: Any, dpi: int = 110) -> bytes:
    """The figure as PNG bytes, closed. tight_layout, not constrained layout: the latter placed
    axes a fraction of a pixel differently from one run to the next (same numbers, other bytes)."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def image(png: bytes, alt: str) -> str:
    """An <img> with the PNG embedded as a data URI."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def cell(value: Any) -> str:
    """A table cell's text: – for None, three decimals for a float, else the escaped text."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape(str(value))


def table(headers: list[str], rows: list[list[Any]], css: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    opening = f'<table class="{css}">' if css else "<table>"
    return f"{opening}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
