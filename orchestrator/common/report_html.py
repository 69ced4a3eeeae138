"""The pieces of duckscore's self-contained HTML reports (calibrate, instincts): PNG figures drawn
by matplotlib, and the pages rendered from the package's templates/ (Jinja, autoescaped). Numbers
come from SQL; this only shows them."""

from __future__ import annotations

import base64
import io
from functools import lru_cache
from typing import Any

import jinja2

from ..core.resources import report_templates_dir


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


def cell(value: Any) -> str:
    """A value as a table shows it: – for None, three decimals for a float, else its text."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _base64(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """Every value a template shows is escaped (autoescape), so user text (a policy's version, a
    store path, an instinct's trigger) is never markup; a name the template does not get fails."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(report_templates_dir())),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = cell
    env.filters["base64"] = _base64
    return env


def render_page(template: str, **context: Any) -> str:
    """The page templates/<template> shows for `context`."""
    return environment().get_template(template).render(**context)
