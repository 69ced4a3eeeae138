"""Jinja rendering of SQL templates: structure from Jinja, values through one audited filter.

Every `macros/<name>.sql` defines one public macro `<name>`, made global to all templates.
Undefined variables raise (StrictUndefined). Values reach SQL only through `lit` (and identifiers
only through `ident`), so nothing user-controlled is ever spliced into the text unescaped.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jinja2

from . import cache
from .errors import TemplateError
from .frozen import thaw
from .resources import macros_dir, sql_dir

_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _operator(symbol: str, reflected: bool = False) -> Callable[[Any, Any], SqlExpression]:
    def apply(self: Any, other: Any) -> SqlExpression:
        left, right = lit(self), lit(other)
        if reflected:
            left, right = right, left
        return SqlExpression(f"({left} {symbol} {right})")

    return apply


class _SqlArithmetic:
    """Arithmetic on a parameter that is SQL rather than a number writes the SQL, so a template's
    `z * z / 2` works for a column or a macro parameter `z` as for a number: `((z * z) / 2)`."""

    __add__, __radd__ = _operator("+"), _operator("+", reflected=True)
    __sub__, __rsub__ = _operator("-"), _operator("-", reflected=True)
    __mul__, __rmul__ = _operator("*"), _operator("*", reflected=True)
    __truediv__, __rtruediv__ = _operator("/"), _operator("/", reflected=True)


@dataclass(frozen=True)
class ColumnParameter(_SqlArithmetic):
    """A parameter read from a column instead of a literal: `calibrate` scores many candidate
    policies in one query, each row carrying its candidate's values; the macro pack renders a
    building block with its parameters as the DuckDB macro's. Renders as an identifier."""

    name: str


@dataclass(frozen=True)
class SqlExpression(_SqlArithmetic):
    """Arithmetic over ColumnParameters and numbers, built by _SqlArithmetic (never user text)."""

    sql: str


def column(name: str) -> ColumnParameter:
    return ColumnParameter(name)


def _keep_sql(convert: Callable[..., Any]) -> Callable[..., Any]:
    """Jinja's `float` and `int` filters, passing a column or expression through (the built-in
    ones would turn it into 0 without a word)."""

    def apply(value: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(value, (ColumnParameter, SqlExpression)):
            return value
        return convert(value, *args, **kwargs)

    return apply


def lit(value: Any) -> str:
    """Render a Python value as a SQL literal. The single audited path from values to SQL text.

    Floats become `CAST(<repr> AS DOUBLE)`: DuckDB reads `0.5` as DECIMAL, and `repr` round-trips
    the exact double, so the rendered SQL reproduces the policy to the last digit. A
    ColumnParameter renders as its (quoted when needed) column name.
    """
    if isinstance(value, ColumnParameter):
        return ident(value.name)
    if isinstance(value, jinja2.Undefined):
        value._fail_with_undefined_error()  # what is undefined, as Jinja says it
    if isinstance(value, SqlExpression):
        return value.sql
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TemplateError(f"cannot render non-finite number {value!r} as a SQL literal")
        return f"CAST({value!r} AS DOUBLE)"
    if isinstance(value, str):
        if "\x00" in value:
            raise TemplateError("cannot render a string containing a NUL character")
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(lit(item) for item in value) + "]"
    raise TemplateError(f"cannot render a {type(value).__name__} as a SQL literal")


def ident(name: str) -> str:
    """Render an identifier, quoting it unless it is plain."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise TemplateError(f"invalid SQL identifier {name!r}")
    if _PLAIN_IDENTIFIER.fullmatch(name):
        return name
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class SqlFragment:
    """SQL text that a compiler of this package wrote from a checked tree, never the user's text:
    e.g. the bids' whitelist (orchestrator/bids/whitelist.py) writes whitelisted field names, fixed
    operators and `$name` placeholders, and binds the values. Templates splice it with `fragment`."""

    sql: str


def fragment(compiled: Any) -> str:
    """The SQL of a SqlFragment (its values are bound as parameters, never rendered)."""
    if not isinstance(compiled, SqlFragment):
        kind = type(compiled).__name__
        raise TemplateError(f"fragment expects a compiled SqlFragment, got {kind}")
    return compiled.sql


def _fail(message: str) -> None:
    raise TemplateError(message)


@dataclass(frozen=True)
class RenderedSQL:
    template: str
    text: str
    label: str | None = None  # what messages name: sql/<template>, or a plugin's file

    @property
    def where(self) -> str:
        return self.label or f"sql/{self.template}"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def statements(self) -> list[str]:
        """The text split at `;`: a DDL script's statements, to run one at a time."""
        return [s for s in self.text.split(";") if s.strip()]


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(sql_dir()), str(macros_dir())]),
        bytecode_cache=cache.template_code(cache.code_id(__file__, f"jinja2 {jinja2.__version__}")),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["lit"] = lit
    env.filters["float"] = _keep_sql(jinja2.filters.do_float)
    env.filters["int"] = _keep_sql(jinja2.filters.do_int)
    env.filters["ident"] = ident
    env.filters["fragment"] = fragment
    env.globals["fail"] = _fail
    env.globals["column"] = column
    for path in sorted(macros_dir().glob("*.sql")):
        if path.name.startswith("_"):
            continue
        module = env.get_template(path.name).module
        macro = getattr(module, path.stem, None)
        if macro is None:
            raise TemplateError(f"macros/{path.name} must define a macro named {path.stem!r}")
        env.globals[path.stem] = macro
    return env


def macro_names() -> list[str]:
    return sorted(p.stem for p in macros_dir().glob("*.sql") if not p.name.startswith("_"))


def render(template: str, **context: Any) -> RenderedSQL:
    """Render `sql/<template>` with the given context; errors name the template and line. A
    template reads a policy's frozen parameters (core/frozen.py) as the plain dicts and lists."""
    try:
        text = environment().get_template(template).render(**thaw(context))
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"template not found: sql/{exc.name}") from exc
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"sql/{template}: {exc.message}") from exc
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{exc.filename or template}:{exc.lineno}: {exc.message}") from exc
    return RenderedSQL(template=template, text=_tidy(text))


def render_expression(source: str, **context: Any) -> str:
    """Render a one-off Jinja string with the macros available (used by macro tests and docs)."""
    try:
        return environment().from_string(source).render(**thaw(context)).strip()
    except jinja2.TemplateError as exc:
        raise TemplateError(f"expression {source!r}: {exc}") from exc


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    tidy: list[str] = []
    for line in lines:
        if line or (tidy and tidy[-1]):
            tidy.append(line)
    return "\n".join(tidy).strip() + "\n"
