"""Check rendered SQL before any data is touched: parse, qualify columns, lint.

Parse and qualify with sqlglot against the real input schema, so a misspelt column fails naming
the template and the column. The lint rejects what docs/design.md warns about: bare `log(x)`
(base 10 in DuckDB, ln elsewhere), I/O inside scoring SQL, `count(DISTINCT …)`, discrete or
ambiguous quantile functions, bare decimal literals (DECIMAL in DuckDB), window ORDER BY keys
without an explicit NULLS placement, ranking windows without an id tie-breaker, and unguarded
division.

Both steps are pure functions of the SQL text (and the schema), so each is done once: per
process, and across processes through the cache folder (core/cache.py), keyed by the SQL, the
schema and this checker's code (this file and sqlglot's version): parsing the SQL of a large
template costs more than running it on a small input, and every CLI run is a new process.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from functools import lru_cache
from importlib import metadata

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError
from sqlglot.optimizer.qualify import qualify
from sqlglot.tokenizer_core import Token, TokenType

from . import cache
from .errors import TemplateError
from .render import RenderedSQL

_FORBIDDEN_FUNCTIONS = {
    "read_parquet",
    "parquet_scan",
    "read_csv",
    "read_csv_auto",
    "read_json",
    "read_json_auto",
    "read_ndjson",
    "read_text",
    "read_blob",
    "glob",
    "query_table",
    "query",
}
_AMBIGUOUS_QUANTILES = {"quantile", "quantile_disc", "median", "mode", "approx_quantile"}
_RANKING_WINDOWS = (exp.RowNumber,)


_QUALIFIED: set[tuple[str, str]] = set()


def check_sql(rendered: RenderedSQL, schema: Mapping[str, Mapping[str, str]]) -> None:
    """Parse, lint and qualify `rendered` against `schema` (table -> column -> type); raise
    TemplateError naming the template on failure."""
    tables: dict[str, object] = {k: dict(v) for k, v in schema.items()}
    key = (rendered.sha256, json.dumps(tables, sort_keys=True))
    if key in _QUALIFIED:
        return
    stored = cache.digest(_checker(), rendered.text, key[1])
    if cache.read("checked", stored) is True:
        _QUALIFIED.add(key)
        return
    tree = _parsed(rendered.where, rendered.text)
    try:
        qualify(
            tree.copy(),
            schema=tables,
            dialect="duckdb",
            validate_qualify_columns=True,
            quote_identifiers=False,
        )
    except OptimizeError as exc:
        raise TemplateError(f"{rendered.where}: {exc} (inputs: {_describe(schema)})") from None
    _QUALIFIED.add(key)
    cache.write("checked", stored, True)


def tables_read(rendered: RenderedSQL) -> list[str]:
    """The tables and views `rendered` reads (its FROM and JOIN names that are not its own CTEs)."""
    return list(_tables_read(rendered.where, rendered.text))


@lru_cache(maxsize=1)
def _checker() -> str:
    """What a cached check depends on besides its SQL and schema: this code and sqlglot's."""
    return cache.code_id(__file__, f"sqlglot {metadata.version('sqlglot')}")


@lru_cache(maxsize=128)
def _tables_read(where: str, text: str) -> tuple[str, ...]:
    stored = cache.digest(_checker(), text)
    found = cache.read("tables", stored)
    if isinstance(found, list):
        return tuple(found)
    names = _tables_named(where, text)
    cache.write("tables", stored, list(names))
    return names


def _tables_named(where: str, text: str) -> tuple[str, ...]:
    tree = _parsed(where, text)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names = {
        table.name
        for table in tree.find_all(exp.Table)
        if isinstance(table.this, exp.Identifier) and not table.db
    }
    return tuple(sorted(name for name in names if name.lower() not in ctes))


@lru_cache(maxsize=128)
def _parsed(where: str, text: str) -> exp.Expr:
    """The one SELECT of `text`, parsed and linted (callers copy it before changing it); errors
    name `where` (sql/<template>)."""
    try:
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    except ParseError as exc:
        detail = exc.errors[0] if exc.errors else {}
        raise TemplateError(
            f"{where}: cannot parse the rendered SQL at line {detail.get('line')}, "
            f"column {detail.get('col')}: {detail.get('description', exc)}"
        ) from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise TemplateError(f"{where}: must render exactly one SELECT statement")
    tree = statements[0]
    lint(tree, where)
    lint_tokens(text, where)
    return tree


def lint(tree: exp.Expr, where: str) -> None:
    for node in tree.walk():
        problem = _problem(node)
        if problem:
            raise TemplateError(f"{where}: {problem}: {node.sql('duckdb')[:80]}")


def _problem(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Log) and node.args.get("expression") is None:
        return "bare log(x) is base 10 in DuckDB and ln elsewhere; write ln(x) or log10(x)"
    name = _function_name(node)
    if name in _FORBIDDEN_FUNCTIONS or isinstance(node, (exp.ReadCSV, exp.Copy)):
        return "scoring SQL reads plain table names; I/O belongs to the runner"
    if name in _AMBIGUOUS_QUANTILES or isinstance(node, exp.Median):
        return "use quantile_cont (continuous quantiles, docs/design.md)"
    if isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct):
        return "count(DISTINCT …) on the row path is slow; count after a GROUP BY"
    if (
        isinstance(node, exp.Literal)
        and not node.is_string
        and _is_decimal(node.this)
        and not _inside_double_cast(node)
    ):
        return f"decimal literal {node.this} is DECIMAL in DuckDB; render values with `| lit`"
    if (
        isinstance(node, exp.Window)
        and isinstance(node.this, _RANKING_WINDOWS)
        and not _ends_with_id(node)
    ):
        return "a ranking window must end its ORDER BY with an id tie-breaker"
    if isinstance(node, exp.Div) and not _guarded(node.expression):
        return "unguarded denominator; use NULLIF(…, 0), a non-zero constant or `+ eps`"
    return None


def _function_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return None


def _is_decimal(text: str) -> bool:
    return any(ch in text for ch in ".eE")


def _inside_double_cast(node: exp.Expr) -> bool:
    parent = node.parent
    if isinstance(parent, exp.Neg):
        parent = parent.parent
    return isinstance(parent, exp.Cast) and parent.to.is_type(exp.DataType.Type.DOUBLE)


def _ends_with_id(window: exp.Window) -> bool:
    order = window.args.get("order")
    if order is None or not order.expressions:
        return False
    last = order.expressions[-1].this
    return isinstance(last, exp.Column) and last.name.lower().endswith("id")


def _positive_constant(node: exp.Expr) -> bool:
    node = node.unnest()
    if isinstance(node, exp.Cast):
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this) > 0
    return False


def _guarded(denominator: exp.Expr) -> bool:
    node = denominator.unnest()
    if _positive_constant(node):
        return True
    if isinstance(node, exp.Nullif):
        return True
    if isinstance(node, exp.Greatest):
        return any(_positive_constant(e) for e in [node.this, *node.expressions])
    if isinstance(node, exp.Add):
        return _positive_constant(node.expression) or _positive_constant(node.this)
    return False


def lint_tokens(text: str, where: str) -> None:
    """Every ORDER BY key inside OVER (…) states NULLS FIRST or NULLS LAST."""
    tokens = duckdb_tokens(text)
    for key in _window_order_keys(tokens):
        words = [t.text.upper() for t in key]
        if not any(a == "NULLS" and b in ("FIRST", "LAST") for a, b in itertools.pairwise(words)):
            shown = " ".join(t.text for t in key)
            raise TemplateError(
                f"{where}: window ORDER BY key `{shown}` needs NULLS LAST "
                f"(or NULLS FIRST), line {key[0].line}"
            )


def duckdb_tokens(text: str) -> list[Token]:
    """`text` as sqlglot's DuckDB tokenizer reads it (with each token's line and offsets)."""
    return list(sqlglot.Dialect.get_or_raise("duckdb").tokenize(text))


def _window_order_keys(tokens: list[Token]) -> Iterator[list[Token]]:
    i = 0
    while i < len(tokens):
        if (
            tokens[i].token_type == TokenType.OVER
            and i + 1 < len(tokens)
            and tokens[i + 1].token_type == TokenType.L_PAREN
        ):
            depth, j = 1, i + 2
            in_order, key = False, list[Token]()
            while j < len(tokens) and depth:
                t = tokens[j]
                if t.token_type == TokenType.L_PAREN:
                    depth += 1
                elif t.token_type == TokenType.R_PAREN:
                    depth -= 1
                if depth == 1 and t.token_type == TokenType.ORDER_BY:
                    in_order, key = True, []
                elif in_order and depth == 1 and t.token_type == TokenType.COMMA:
                    yield key
                    key = []
                elif in_order and depth == 1 and t.token_type in (TokenType.ROWS, TokenType.RANGE):
                    in_order = False
                    yield key
                elif in_order and depth >= 1:
                    key.append(t)
                j += 1
            if in_order and key:
                yield key
            i = j
        else:
            i += 1


def _describe(schema: Mapping[str, Mapping[str, str]]) -> str:
    return "; ".join(f"{table}({', '.join(cols)})" for table, cols in schema.items())
