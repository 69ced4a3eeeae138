"""The rendered DuckDB SQL for other engines (`duckscore sql … --dialect`), through sqlglot.

sqlglot alone is silently wrong on constructs the templates use, so the tree is rewritten
(children before parents) and anything a dialect cannot express exactly is refused, naming the
construct. Spark and PostgreSQL are executed against DuckDB by the tests; BigQuery, Snowflake
and Trino are sqlglot's output plus the refusals below, not executed.

- `quantile_cont(x, p)`: Spark `percentile(x, p)` (sqlglot writes a two-argument
  percentile_cont Spark rejects), windowed as the templates write it (per-query bounds are
  windows, so DuckDB can spill them); PostgreSQL `percentile_cont(p) WITHIN GROUP`, which it has
  as an aggregate only, so a SELECT of windowed quantiles reads them from a grouped subquery
  joined back on the partition keys; Trino has no exact quantile and BigQuery's is a window
  function only: refused.
- `list(v ORDER BY k…)`: Spark's collect_list drops the ORDER BY, so it becomes
  `transform(array_sort(collect_list(struct(k…, v)), comparator), e -> e.v)`, the comparator
  keeping DuckDB's ASC/DESC and NULLS LAST.
- Lambdas and list functions: Spark's higher-order functions; on PostgreSQL, ordered subqueries
  over `unnest(…) WITH ORDINALITY`; refused elsewhere.
- Structs: Spark structs; PostgreSQL `jsonb_build_object` (a JSON object with the same fields).
- `arg_min(v, struct(k…))` and `any_value(v)`: PostgreSQL 15 has neither, so the first element
  of an ordered (or NULL-free) `array_agg`.
- `round(x, n)` on a double: PostgreSQL rounds numerics only, so through NUMERIC and back.
- `printf` formats numbers with C's rules; Spark's Java formatter and PostgreSQL differ: refused.
- One-argument `log` is base 10 in DuckDB and ln elsewhere; the templates never write it (the
  lint refuses it), and a tree that has it is refused here too.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from ..core.errors import TemplateError
from ..core.render import RenderedSQL
from . import DIALECTS
from .quantiles import regroup_windowed_quantiles
from .refusal import Refusal

LIST_FUNCTIONS = (exp.ArrayFilter, exp.Transform, exp.ArraySort)


def to_dialect(rendered: RenderedSQL, dialect: str) -> str:
    """`rendered` (DuckDB) as `dialect` SQL, or a TemplateError naming what cannot be expressed."""
    if dialect not in DIALECTS:
        raise TemplateError(f"unknown dialect {dialect!r} (dialects: {', '.join(DIALECTS)})")
    where = f"sql/{rendered.template} for {dialect}"
    tree = sqlglot.parse_one(rendered.text, read="duckdb")
    rewrites: dict[str, Callable[[exp.Expr], exp.Expr]] = {
        "spark": _SparkRewrite(),
        "postgres": _PostgresRewrite(),
    }
    rewrite = rewrites.get(dialect) or _refuse_elsewhere(dialect)
    try:
        _refuse_everywhere(tree)
        tree = _post_order(tree, rewrite)
        return tree.sql(dialect=dialect, pretty=True, unsupported_level=ErrorLevel.RAISE) + "\n"
    except Refusal as exc:
        raise TemplateError(f"{where}: {exc}") from None
    except SqlglotError as exc:
        first = str(exc).strip().splitlines()[0]
        raise TemplateError(f"{where}: cannot be expressed exactly: {first}") from None


def _post_order(tree: exp.Expr, rewrite: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """Apply `rewrite` to every node, children first, so a rewritten parent holds rewritten children."""
    for node in reversed(list(tree.dfs())):
        new = rewrite(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


def _refuse_everywhere(tree: exp.Expr) -> None:
    for node in tree.walk():
        if isinstance(node, exp.Log) and node.expression is None:
            raise Refusal("one-argument log is base 10 in DuckDB; write log10 or ln")
        if isinstance(node, exp.Anonymous) and node.name.lower() == "printf":
            raise Refusal(
                "printf formats numbers by C's rules, which this dialect does not share "
                "(select a stage before the formatted text)"
            )
        if (
            isinstance(node, exp.Cast)
            and node.to.is_type(*exp.DataType.INTEGER_TYPES)
            and not isinstance(node.this, (exp.Literal, exp.Null, exp.Floor, exp.Ceil, exp.Round))
        ):
            raise Refusal(
                f"{node.sql('duckdb')}: DuckDB rounds a number cast to an integer, other "
                "engines truncate; cast round(), floor() or ceil() of it"
            )
        if (
            isinstance(node, exp.Literal)
            and not node.is_string
            and "." in node.this
            and isinstance(node.parent, exp.Div)
        ):
            raise Refusal(
                f"the decimal literal {node.this} in a division is DECIMAL in Spark (6 digits); "
                "write CAST(… AS DOUBLE)"
            )
        if isinstance(node, exp.Flatten):
            raise Refusal("flatten of a list of structs (the delayed aligner) is not translated")


def _refuse_elsewhere(dialect: str) -> Callable[[exp.Expr], exp.Expr]:
    def refuse(node: exp.Expr) -> exp.Expr:
        if isinstance(node, LIST_FUNCTIONS + (exp.Lambda,)) or _anonymous(node, "list_sum"):
            shown_node = node.parent if isinstance(node, exp.Lambda) and node.parent else node
            shown = " ".join(shown_node.sql("duckdb").split())
            raise Refusal(
                f"{dialect} is not supported for DuckDB list functions and lambdas "
                f"({shown[:70]}); use spark or postgres"
            )
        if isinstance(node, exp.PercentileCont) and dialect in ("trino", "bigquery"):
            raise Refusal(f"{dialect} has no exact grouped quantile (quantile_cont)")
        return node

    return refuse


def _anonymous(node: exp.Expr, name: str) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == name


def _shape(shape: str, dialect: str, **parts: exp.Expr) -> exp.Expr:
    """Parse `shape` (fixed SQL written in `dialect`) and put `parts` where `__name` stands."""
    shaped = sqlglot.parse_one(shape, read=dialect)
    for node in list(shaped.find_all(exp.Column, exp.Identifier)):
        name = node.name
        if name.startswith("__") and name[2:] in parts and node.parent is not None:
            target = (
                node
                if isinstance(node, exp.Column) or not isinstance(node.parent, exp.Column)
                else node.parent
            )
            target.replace(parts[name[2:]].copy())
    return shaped


class _SparkRewrite:
    def __call__(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.PercentileCont) and node.expression is not None:
            return exp.Anonymous(this="PERCENTILE", expressions=[node.this, node.expression])
        if _anonymous(node, "list_sum"):
            return _shape(
                "AGGREGATE(__xs, CAST(NULL AS DOUBLE), "
                "(acc, x) -> CASE WHEN x IS NULL THEN acc ELSE COALESCE(acc, 0D) + x END)",
                "spark",
                xs=node.expressions[0],
            )
        if isinstance(node, exp.Length) and isinstance(node.this, LIST_FUNCTIONS + (exp.Array,)):
            return exp.Anonymous(this="SIZE", expressions=[node.this])
        if isinstance(node, (exp.RegexpLike, exp.RegexpExtractAll)) or _anonymous(
            node, "regexp_split_to_array"
        ):
            text, pattern = _literal_pattern(node, "spark")
            if isinstance(node, exp.RegexpLike):
                return exp.RegexpLike(this=text, expression=exp.Literal.string(pattern))
            if isinstance(node, exp.RegexpExtractAll):
                return exp.RegexpExtractAll(
                    this=text, expression=exp.Literal.string(pattern), group=exp.Literal.number(0)
                )
            return exp.Anonymous(
                this="SPLIT",
                expressions=[text, exp.Literal.string(pattern), exp.Literal.number(-1)],
            )
        if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
            return exp.Anonymous(this="ANY_VALUE", expressions=[node.this.this, exp.true()])
        if isinstance(node, exp.Transform) and len(node.expression.expressions) == 2:
            return _one_based_position(node)
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            return _spark_element(node)
        aggregate = node.this if isinstance(node, exp.Filter) else node
        if (
            isinstance(aggregate, exp.ArrayAgg)
            and isinstance(aggregate.this, exp.Order)
            and not isinstance(node.parent, exp.Filter)
        ):
            where = node.expression if isinstance(node, exp.Filter) else None
            return _sorted_collect_list(aggregate.this, where)
        return node


def _one_based_position(node: exp.Transform) -> exp.Expr:
    """A lambda's second parameter is the 1-based position in DuckDB, 0-based in Spark."""
    position = node.expression.expressions[1].name

    def shift(part: exp.Expr) -> exp.Expr:
        if (
            isinstance(part, (exp.Identifier, exp.Column))
            and part.name == position
            and not isinstance(part.parent, (exp.Column, exp.Lambda))
        ):
            return exp.paren(exp.Add(this=part.copy(), expression=exp.Literal.number(1)))
        return part

    shifted = node.copy()
    shifted.expression.set("this", shifted.expression.this.transform(shift))
    return shifted


def _spark_element(node: exp.Bracket) -> exp.Expr:
    """DuckDB's 1-based `xs[i]` and `xs[a:b]` (NULL out of range): Spark's `xs[i]` is 0-based and
    fails out of range, and it has no slice syntax; sqlglot shifts literal indexes only."""
    (index,) = node.expressions
    if isinstance(index, exp.Slice):
        start = index.this or exp.Literal.number(1)
        if index.expression is None:
            return _shape("SLICE(__xs, __start, SIZE(__xs))", "spark", xs=node.this, start=start)
        return _shape(
            "SLICE(__xs, __start, GREATEST(__end - __start + 1, 0))",
            "spark",
            xs=node.this,
            start=start,
            end=index.expression,
        )
    if isinstance(index, exp.Literal):  # sqlglot keeps literal indexes 0-based in the tree
        index = exp.Literal.number(int(index.this) + 1)
    return _shape("TRY_ELEMENT_AT(__xs, __i)", "spark", xs=node.this, i=index)


def _sorted_collect_list(order: exp.Order, where: exp.Where | None) -> exp.Expr:
    """DuckDB's `list(v ORDER BY k…)` for Spark: collect structs of (keys, v), sort, keep v."""
    keys = [o for o in order.expressions if isinstance(o, exp.Ordered)]
    fields = [f"__k{i} AS k{i}" for i in range(len(keys))] + ["__v AS v"]
    collected = f"COLLECT_LIST(STRUCT({', '.join(fields)}))" + (
        " FILTER (WHERE __where)" if where else ""
    )
    comparator = "0"
    for i, key in reversed(list(enumerate(keys))):
        nulls_first = bool(key.args.get("nulls_first"))
        less, more = ("1", "-1") if key.args.get("desc") else ("-1", "1")
        comparator = (
            f"CASE WHEN l.k{i} IS NULL AND r.k{i} IS NULL THEN {comparator} "
            f"WHEN l.k{i} IS NULL THEN {'-1' if nulls_first else '1'} "
            f"WHEN r.k{i} IS NULL THEN {'1' if nulls_first else '-1'} "
            f"WHEN l.k{i} < r.k{i} THEN {less} WHEN l.k{i} > r.k{i} THEN {more} ELSE {comparator} END"
        )
    parts = {f"k{i}": key.this for i, key in enumerate(keys)} | {"v": order.this}
    if where is not None:
        parts["where"] = where.this
    return _shape(
        f"TRANSFORM(ARRAY_SORT({collected}, (l, r) -> {comparator}), e -> e.v)", "spark", **parts
    )


class _PostgresRewrite:
    """PostgreSQL 15: lists as arrays through ordered subqueries, structs as jsonb objects."""

    def __init__(self) -> None:
        self._aliases: Iterator[int] = itertools.count(1)

    def __call__(self, node: exp.Expr) -> exp.Expr:
        n = next(self._aliases)
        if isinstance(node, exp.Select):
            return regroup_windowed_quantiles(node)
        if isinstance(node, exp.ArrayFilter):
            (item,) = node.expression.expressions
            return _shape(
                f"ARRAY(SELECT __item FROM UNNEST(__xs) WITH ORDINALITY AS _l{n}(__item, _o{n}) "
                f"WHERE __keep ORDER BY _o{n})",
                "postgres",
                xs=node.this,
                item=exp.column(item.name),
                keep=node.expression.this,
            )
        if isinstance(node, exp.Transform):
            names = [i.name for i in node.expression.expressions]
            position = names[1] if len(names) > 1 else f"_o{n}"
            return _shape(
                f"ARRAY(SELECT __value FROM UNNEST(__xs) WITH ORDINALITY AS _l{n}({names[0]}, {position}) "
                f"ORDER BY {position})",
                "postgres",
                xs=node.this,
                value=node.expression.this,
            )
        if _anonymous(node, "list_sum"):
            return _shape(
                f"(SELECT SUM(_v{n}) FROM UNNEST(__xs) AS _l{n}(_v{n}))",
                "postgres",
                xs=node.expressions[0],
            )
        if isinstance(node, exp.ArraySort):
            return _sorted_array(node, n)
        if isinstance(node, exp.Length) and isinstance(node.this, LIST_FUNCTIONS + (exp.Array,)):
            return exp.Anonymous(this="CARDINALITY", expressions=[node.this])
        if isinstance(node, exp.Struct) and not isinstance(node.parent, exp.ArgMin):
            pairs: list[exp.Expr] = []
            for field in node.expressions:
                pairs += [exp.Literal.string(field.this.name), field.expression]
            return exp.Anonymous(this="JSONB_BUILD_OBJECT", expressions=pairs)
        if isinstance(node, exp.ArgMin):
            keys = (
                [f.expression for f in node.expression.expressions]
                if isinstance(node.expression, exp.Struct)
                else [node.expression]
            )
            return _first_of(
                node.this, [exp.Ordered(this=k.copy(), nulls_first=False) for k in keys]
            )
        if (
            isinstance(node, exp.IgnoreNulls)
            and isinstance(node.this, exp.AnyValue)
            and not isinstance(node.parent, exp.Filter)
        ):
            return _first_of(
                node.this.this,
                [],
                exp.Not(this=exp.Is(this=node.this.this.copy(), expression=exp.null())),
            )
        if (
            isinstance(node, exp.Filter)
            and isinstance(node.this, exp.IgnoreNulls)
            and isinstance(node.this.this, exp.AnyValue)
        ):
            value = node.this.this.this
            return _first_of(
                value,
                [],
                exp.and_(
                    exp.paren(node.expression.this.copy()),
                    exp.Not(this=exp.Is(this=value.copy(), expression=exp.null())),
                ),
            )
        if (
            isinstance(node, exp.Array)
            and not node.expressions
            and isinstance(node.parent, exp.Coalesce)
        ):
            return exp.Literal.string("{}")  # an untyped '{}' takes the other argument's array type
        if isinstance(node, exp.Round) and node.args.get("decimals") is not None:
            return _shape(
                "CAST(ROUND(CAST(__x AS NUMERIC), __n) AS DOUBLE PRECISION)",
                "postgres",
                x=node.this,
                n=node.args["decimals"],
            )
        if isinstance(node, (exp.RegexpLike, exp.RegexpExtractAll)) or _anonymous(
            node, "regexp_split_to_array"
        ):
            return _regex_for_postgres(node, n)
        return node


def _literal_pattern(node: exp.Expr, dialect: str) -> tuple[exp.Expr, str]:
    """The text and the pattern (translated for `dialect`) of a regular-expression function."""
    text, pattern = (
        node.expressions if isinstance(node, exp.Anonymous) else [node.this, node.expression]
    )[:2]
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise Refusal(
            f"a regular expression that is not a literal cannot be translated for {dialect}"
        )
    return text, portable_pattern(pattern.this, dialect)


def _regex_for_postgres(node: exp.Expr, n: int) -> exp.Expr:
    text, pattern = _literal_pattern(node, "postgres")
    if isinstance(node, exp.RegexpExtractAll):
        # regexp_matches returns the capture groups: one group around the whole pattern, after a
        # leading (?flags), which ARE accepts only at the very start
        flags = re.match(r"\(\?[a-z]+\)", pattern)
        lead = flags.group(0) if flags else ""
        return _shape(
            f"ARRAY(SELECT _m{n}[1] FROM REGEXP_MATCHES(__text, __pattern, 'g') "
            f"WITH ORDINALITY AS _l{n}(_m{n}, _o{n}) ORDER BY _o{n})",
            "postgres",
            text=text,
            pattern=exp.Literal.string(f"{lead}({pattern[len(lead) :]})"),
        )
    if isinstance(node, exp.RegexpLike):
        return exp.RegexpLike(this=text, expression=exp.Literal.string(pattern))
    return exp.Anonymous(
        this="REGEXP_SPLIT_TO_ARRAY", expressions=[text, exp.Literal.string(pattern)]
    )


_ASCII_WORD = "[0-9A-Za-z_]"
# RE2's \b looks at ASCII word characters only; Java's and PostgreSQL's at every letter (a CJK
# character beside "maybe" is a boundary in DuckDB, not in the others): spelled out with lookarounds
_ASCII_BOUNDARY = f"(?:(?<!{_ASCII_WORD})(?={_ASCII_WORD})|(?<={_ASCII_WORD})(?!{_ASCII_WORD}))"


def portable_pattern(re2: str, dialect: str) -> str:
    """An RE2 pattern (DuckDB's) with the same matches in Java (Spark) or PostgreSQL ARE syntax:
    the word boundary `\\b` spelled out for ASCII; for PostgreSQL also `\\x{hh}` as `\\uhhhh` and a
    bare `.` as `[^\\n]` (ARE's dot matches a newline unless `(?s)` is meant). Escapes with no
    exact counterpart are refused."""
    dot_all = re2.startswith("(?s)")
    out, i, in_class = [], 0, False
    while i < len(re2):
        ch = re2[i]
        if ch == "\\":
            escape = re2[i + 1 : i + 2]
            if escape == "b" and not in_class:
                out.append(_ASCII_BOUNDARY)
            elif escape in ("B", "C", "Q", "E", "z", "p", "P"):
                raise Refusal(f"the RE2 escape \\{escape} is not translated for {dialect}")
            elif escape == "x" and re2[i + 2 : i + 3] == "{" and dialect == "postgres":
                end = re2.index("}", i)
                code = int(re2[i + 3 : end], 16)
                out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
                i = end + 1
                continue
            else:
                out.append(re2[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
            opening = (
                "[^]"
                if re2.startswith("[^]", i)
                else "[^"
                if re2.startswith("[^", i)
                else "[]"
                if re2.startswith("[]", i)
                else "["
            )  # a leading ] is a literal
            out.append(opening)
            i += len(opening)
            continue
        if ch == "]" and in_class:
            in_class = False
        elif ch == "." and not in_class and not dot_all and dialect == "postgres":
            ch = "[^\\n]"
        out.append(ch)
        i += 1
    return "".join(out)


def _sorted_array(node: exp.ArraySort, n: int) -> exp.Expr:
    desc = node.args.get("asc") is not None and not node.args["asc"].this
    nulls_first = bool(node.args.get("nulls_first") and node.args["nulls_first"].this)
    order = f"{'DESC' if desc else 'ASC'} NULLS {'FIRST' if nulls_first else 'LAST'}"
    if isinstance(node.this, exp.ArrayAgg) and not isinstance(node.this.this, exp.Order):
        return _shape(f"ARRAY_AGG(__v ORDER BY __v {order})", "postgres", v=node.this.this)
    return _shape(
        f"ARRAY(SELECT _v{n} FROM UNNEST(__xs) AS _l{n}(_v{n}) ORDER BY _v{n} {order})",
        "postgres",
        xs=node.this,
    )


def _first_of(value: exp.Expr, order: list[exp.Ordered], keep: exp.Expr | None = None) -> exp.Expr:
    """`(array_agg(value ORDER BY …) FILTER (WHERE keep))[1]`: one row's value, in one aggregate."""
    aggregated: exp.Expr = exp.ArrayAgg(
        this=exp.Order(this=value.copy(), expressions=order) if order else value.copy()
    )
    if keep is not None:
        aggregated = exp.Filter(this=aggregated, expression=exp.Where(this=keep))
    return _shape("(__aggregated)[1]", "postgres", aggregated=aggregated)
