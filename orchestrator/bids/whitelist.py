"""User-supplied conditions and formulas over the six whitelisted bid fields (seed 002 §5.3, §7.1).

The text is parsed with sqlglot and walked against a closed grammar: comparisons, IN, BETWEEN,
IS [NOT] NULL, AND/OR/NOT, arithmetic, and (formulas only) least/greatest/abs/round and the
project-wide aggregates min/max/avg of one field. Anything else is refused with one line. The
SQL is then written by this module from the tree — fields from the whitelist, operators from a
fixed table, every literal a `$name` placeholder bound by value — so no text of the user's
reaches SQL. Nothing here touches a database.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError, SqlglotError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from ..core.errors import WhitelistError
from ..core.render import SqlFragment

FIELD_TYPES: dict[str, Literal["text", "number"]] = {
    "supplier_code": "text",
    "qualification_level": "text",
    "registered_capital": "number",
    "bid_price": "number",
    "delivery_period": "number",
    "warranty_period": "number",
}
AGGREGATES = {exp.Min: "min", exp.Max: "max", exp.Avg: "avg"}
MAX_LENGTH = 10_000
MAX_DEPTH = 64
_COMPARISONS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
_SCALAR_FUNCTIONS = {
    exp.Least: "least",
    exp.Greatest: "greatest",
    exp.Abs: "abs",
    exp.Round: "round",
}
_FUNCTION_ARGUMENTS = {  # the arguments sqlglot may fill for each, and what to tell the user
    "least": ({"this", "expressions", "ignore_nulls"}, "numbers"),
    "greatest": ({"this", "expressions", "ignore_nulls"}, "numbers"),
    "abs": ({"this"}, "one number"),
    "round": ({"this", "decimals"}, "a number and a whole number of decimals"),
}
_OPERATORS = {**_COMPARISONS, **_ARITHMETIC, exp.Div: "/", exp.And: "AND", exp.Or: "OR"}
_RADIXES = {"0x": ("hexadecimal", 16), "0b": ("binary", 2), "0o": ("octal", 8)}
_WORDS = {  # what a refused construct is called where its SQL would not show it
    exp.IgnoreNulls: "IGNORE NULLS",
    exp.RespectNulls: "RESPECT NULLS",
    exp.ByteString: "an E'…' string",
}
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]*?(\w+)'>")
Type = Literal["text", "number", "boolean"]


@dataclass(frozen=True)
class Compiled(SqlFragment):
    """A checked expression: `sql` holds only whitelisted field names, fixed operators and
    `$name` placeholders; `params` the bound values; `normalized` the canonical text."""

    source: str
    params: dict[str, Any]
    normalized: str
    fields: tuple[str, ...]
    aggregates: tuple[
        tuple[str, str], ...
    ] = ()  # (function, field), read as column f"{fn}__{field}"

    def describe(self) -> str:
        """What `duckscore filter check` prints: the canonical form, the SQL and its values."""
        values = json.dumps(self.params, ensure_ascii=False, sort_keys=True)
        return f"normalized: {self.normalized}\nsql: {self.sql}\nparams: {values}"


def parse_condition(text: str, prefix: str = "p") -> Compiled:
    """A §5.3 condition: a boolean combination of comparisons over whitelisted fields."""
    return _Compiler(text, prefix, formula=False).compile("boolean")


def parse_formula(text: str, prefix: str = "p") -> Compiled:
    """A §7.1 formula: arithmetic over numeric fields, least/greatest/abs/round, and the
    aggregates min/max/avg of one field over the project's qualified suppliers."""
    return _Compiler(text, prefix, formula=True).compile("number")


@dataclass
class _Compiler:
    text: str
    prefix: str
    formula: bool
    params: dict[str, Any] = field(default_factory=dict)
    fields: set[str] = field(default_factory=set)
    aggregates: set[tuple[str, str]] = field(default_factory=set)

    def compile(self, want: Type) -> Compiled:
        tree = self._parse()
        sql, shown, kind = self._node(tree, 0)
        if kind != want:
            raise self._error(
                f"must be a {'formula (a number)' if want == 'number' else 'condition'}, "
                f"not a {kind}"
            )
        if not self.fields and not self.aggregates:
            raise self._error("names none of the whitelisted fields")
        return Compiled(
            sql=sql,
            source=self.text,
            params=dict(self.params),
            normalized=shown,
            fields=tuple(sorted(self.fields)),
            aggregates=tuple(sorted(self.aggregates)),
        )

    def _error(self, reason: str) -> WhitelistError:
        shown = " ".join(self.text.split())
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return WhitelistError(f"{'formula' if self.formula else 'condition'} {shown!r}: {reason}")

    def _parse(self) -> exp.Expr:
        if not isinstance(self.text, str) or not self.text.strip():
            raise self._error("is empty")
        if len(self.text) > MAX_LENGTH:
            raise self._error(f"is longer than {MAX_LENGTH:,} characters")
        if "\x00" in self.text:
            raise self._error("contains a NUL character")
        try:
            self._check_tokens(sqlglot.Dialect.get_or_raise("duckdb").tokenize(self.text))
            statements = sqlglot.parse(self.text, read="duckdb")
        except SqlglotError as exc:
            raise self._error(self._unparsable(exc)) from None
        except RecursionError:
            raise self._error(f"is nested deeper than {MAX_DEPTH} levels") from None
        if len(statements) != 1 or statements[0] is None:
            raise self._error("only one expression is allowed")
        return statements[0]

    def _check_tokens(self, tokens: list[Token]) -> None:
        if any(t.comments for t in tokens):
            raise self._error("comments are not allowed")
        if any(t.token_type == TokenType.SEMICOLON for t in tokens):
            raise self._error("only one expression is allowed (found ';')")
        for number, word in pairwise(tokens):
            # sqlglot reads `0x10` as the number 0 aliased x10: a number glued to a word
            if (number.token_type, word.token_type) == (TokenType.NUMBER, TokenType.VAR) and (
                word.start == number.end + 1
            ):
                raise self._error(_not_a_number(self.text[number.start : word.end + 1]))

    def _unparsable(self, exc: SqlglotError) -> str:
        """What is wrong, from sqlglot's error, in the words of the person who typed it."""
        if isinstance(exc, TokenError):
            for quote in "'\"":
                if self.text.count(quote) % 2:
                    return f"a {quote} quote is not closed"
            return "cannot be read: a character is not part of the grammar"
        problem = exc.errors[0] if isinstance(exc, ParseError) and exc.errors else {}
        description = str(problem.get("description", ""))
        near, before = str(problem.get("highlight", "")), str(problem.get("start_context", ""))
        missing = _MISSING.match(description)
        if missing:
            return _incomplete(getattr(exp, missing[1], None), near)
        if description == "Expecting )":
            return "a '(' is not closed"
        if description.startswith("Invalid expression"):
            return f"unexpected {near!r}" + (f" after {before.strip()!r}" if before.strip() else "")
        if description and "<" not in description:
            return f"cannot be parsed near {near!r}: {description[0].lower()}{description[1:]}"
        return f"cannot be parsed near {near!r}"

    def _bind(self, value: Any) -> str:
        name = f"{self.prefix}{len(self.params) + 1}"
        self.params[name] = value
        return f"${name}"

    def _node(self, node: exp.Expr, depth: int) -> tuple[str, str, Type]:
        """(sql, normalized text, type) of one node, refusing anything outside the grammar."""
        if depth > MAX_DEPTH:
            raise self._error(f"is nested deeper than {MAX_DEPTH} levels")
        handler = self._handler(node)
        if handler is None:
            raise self._error(f"{self._describe(node)} is not allowed")
        return handler(node, depth + 1)

    def _handler(self, node: exp.Expr) -> Callable[[Any, int], tuple[str, str, Type]] | None:
        kind = type(node)
        if kind in (exp.And, exp.Or):
            return self._logical
        if kind is exp.Not:
            return self._not
        if kind is exp.Paren:
            return self._paren
        if kind in _COMPARISONS:
            return self._comparison
        if kind is exp.In:
            return self._in
        if kind is exp.Between:
            return self._between
        if kind is exp.Is:
            return self._is_null
        if kind in _ARITHMETIC or kind is exp.Div:
            return self._arithmetic
        if kind is exp.Neg:
            return self._negative
        if kind is exp.Column:
            return self._column
        if kind is exp.Alias:
            return self._alias
        if kind in (exp.Literal, exp.Boolean):
            return self._literal
        if self.formula and kind in _SCALAR_FUNCTIONS:
            return self._function
        if self.formula and kind in AGGREGATES:
            return self._aggregate
        return None

    def _logical(self, node: exp.Connector, depth: int) -> tuple[str, str, Type]:
        word = "AND" if isinstance(node, exp.And) else "OR"
        left, right = (self._boolean(side, depth) for side in (node.this, node.expression))
        return f"({left[0]} {word} {right[0]})", f"{left[1]} {word} {right[1]}", "boolean"

    def _not(self, node: exp.Not, depth: int) -> tuple[str, str, Type]:
        sql, shown = self._boolean(node.this, depth)
        if isinstance(node.this, exp.Is):
            return f"(NOT {sql})", shown.replace(" IS NULL", " IS NOT NULL"), "boolean"
        return f"(NOT {sql})", f"NOT {shown}", "boolean"

    def _boolean(self, node: exp.Expr, depth: int) -> tuple[str, str]:
        sql, shown, kind = self._node(node, depth)
        if kind != "boolean":
            raise self._error(f"{shown} is a {kind}, not a condition (compare it with something)")
        return sql, shown

    def _paren(self, node: exp.Paren, depth: int) -> tuple[str, str, Type]:
        sql, shown, kind = self._node(node.this, depth)
        return sql, f"({shown})", kind

    def _comparison(self, node: exp.Binary, depth: int) -> tuple[str, str, Type]:
        left, right = self._node(node.this, depth), self._node(node.expression, depth)
        self._same_type(left, right, _COMPARISONS[type(node)])
        self._references_a_field(node)
        op = _COMPARISONS[type(node)]
        return f"({left[0]} {op} {right[0]})", f"{left[1]} {op} {right[1]}", "boolean"

    def _in(self, node: exp.In, depth: int) -> tuple[str, str, Type]:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self._error("IN takes a list of literals only")
        value = self._node(node.this, depth)
        if not node.expressions:
            raise self._error("IN needs at least one value")
        items = []
        for item in node.expressions:
            if not isinstance(item, (exp.Literal, exp.Neg)):
                raise self._error(f"IN takes literals only, not {self._describe(item)}")
            compiled = self._node(item, depth)
            self._same_type(value, compiled, "IN")
            items.append(compiled)
        self._references_a_field(node)
        return (
            f"({value[0]} IN ({', '.join(i[0] for i in items)}))",
            f"{value[1]} IN ({', '.join(i[1] for i in items)})",
            "boolean",
        )

    def _between(self, node: exp.Between, depth: int) -> tuple[str, str, Type]:
        if node.args.get("symmetric"):
            raise self._error("BETWEEN SYMMETRIC is not allowed")
        value, low, high = (self._node(node.args[k], depth) for k in ("this", "low", "high"))
        self._same_type(value, low, "BETWEEN")
        self._same_type(value, high, "BETWEEN")
        self._references_a_field(node)
        return (
            f"({value[0]} BETWEEN {low[0]} AND {high[0]})",
            f"{value[1]} BETWEEN {low[1]} AND {high[1]}",
            "boolean",
        )

    def _is_null(self, node: exp.Is, depth: int) -> tuple[str, str, Type]:
        if not isinstance(node.expression, exp.Null):
            raise self._error("IS is allowed only as IS NULL / IS NOT NULL")
        if not isinstance(node.this, exp.Column):
            raise self._error("IS NULL applies to a whitelisted field only")
        sql, shown, _ = self._node(node.this, depth)
        return f"({sql} IS NULL)", f"{shown} IS NULL", "boolean"

    def _arithmetic(self, node: exp.Binary, depth: int) -> tuple[str, str, Type]:
        left, right = self._node(node.this, depth), self._node(node.expression, depth)
        op = "/" if isinstance(node, exp.Div) else _ARITHMETIC[type(node)]
        for side in (left, right):
            if side[2] != "number":
                raise self._error(f"{op} needs numbers; {side[1]} is a {side[2]}")
        sql = (
            f"({left[0]} / NULLIF({right[0]}, 0))" if op == "/" else f"({left[0]} {op} {right[0]})"
        )
        return sql, f"{left[1]} {op} {right[1]}", "number"

    def _negative(self, node: exp.Neg, depth: int) -> tuple[str, str, Type]:
        if isinstance(node.this, exp.Literal) and not node.this.is_string:
            value = -_number(node.this.this, self._error)
            return self._bind(value), _show(value), "number"
        sql, shown, kind = self._node(node.this, depth)
        if kind != "number":
            raise self._error(f"- needs a number; {shown} is a {kind}")
        return f"(- {sql})", f"-{shown}", "number"

    def _column(self, node: exp.Column, depth: int) -> tuple[str, str, Type]:
        if node.table or node.args.get("db") or node.args.get("catalog"):
            raise self._error(f"{node.sql()} is qualified; name the field alone")
        if not isinstance(node.this, exp.Identifier):
            raise self._error(f"{self._describe(node.this)} is not allowed")
        name = node.this.this.lower()
        if name not in FIELD_TYPES:
            raise self._error(
                f"{node.this.this!r} is not a whitelisted field (allowed: {', '.join(FIELD_TYPES)})"
            )
        self.fields.add(name)
        return name, name, FIELD_TYPES[name]

    def _alias(self, node: exp.Alias, depth: int) -> tuple[str, str, Type]:
        # `bid_price > 1 x` and `bid_price IS` parse as aliases: a word where none may stand
        after = _quoted(_sql(node.this))
        raise self._error(f"unexpected {node.alias!r} after {after}")

    def _literal(self, node: exp.Literal | exp.Boolean, depth: int) -> tuple[str, str, Type]:
        if isinstance(node, exp.Boolean):
            raise self._error("TRUE/FALSE are not field values here")
        if node.is_string:
            value: Any = node.this
            if "\x00" in value:
                raise self._error("a string contains a NUL character")
            return self._bind(value), "'" + value.replace("'", "''") + "'", "text"
        value = _number(node.this, self._error)
        return self._bind(value), _show(value), "number"

    def _only_arguments(self, node: exp.Expr, name: str, keys: set[str], takes: str) -> None:
        """sqlglot keeps an argument a function does not take under another key (`min(x, 1)`
        as a count, `round(x, 2, 3)` as truncate): an expression is compiled exactly or refused."""
        if any(v not in (None, [], False) and k not in keys for k, v in node.args.items()):
            raise self._error(f"{name} takes {takes}, and nothing more")

    def _function(self, node: exp.Func, depth: int) -> tuple[str, str, Type]:
        name = _SCALAR_FUNCTIONS[type(node)]
        self._only_arguments(node, name, *_FUNCTION_ARGUMENTS[name])
        arguments = [node.this, *node.expressions] if name in ("least", "greatest") else [node.this]
        if name == "round" and node.args.get("decimals") is not None:
            decimals = node.args["decimals"]
            if not (
                isinstance(decimals, exp.Literal)
                and not decimals.is_string
                and decimals.this.isdigit()
            ):
                raise self._error("round's second argument must be a whole number literal")
            arguments.append(decimals)
        if (name == "abs" and node.expressions) or any(a is None for a in arguments):
            raise self._error(f"{name} takes {'one argument' if name == 'abs' else 'numbers'}")
        compiled = [self._node(a, depth) for a in arguments]
        for argument in compiled:
            if argument[2] != "number":
                raise self._error(f"{name} needs numbers; {argument[1]} is a {argument[2]}")
        sql = f"{name}({', '.join(c[0] for c in compiled)})"
        if name in ("least", "greatest") and len(compiled) > 1:
            # DuckDB's least/greatest skip NULLs; a missing field must stay missing (NULL).
            # A fold over the arguments names each once (a CASE would repeat them per level).
            sql = (
                f"list_reduce([{', '.join(c[0] for c in compiled)}], lambda lhs, rhs: "
                f"CASE WHEN lhs IS NULL OR rhs IS NULL THEN NULL ELSE {name}(lhs, rhs) END)"
            )
        return sql, f"{name}({', '.join(c[1] for c in compiled)})", "number"

    def _aggregate(self, node: exp.AggFunc, depth: int) -> tuple[str, str, Type]:
        name = AGGREGATES[type(node)]
        self._only_arguments(node, name, {"this"}, "one whitelisted field")
        argument = node.this
        if (
            node.expressions
            or isinstance(argument, exp.Distinct)
            or not isinstance(argument, exp.Column)
        ):
            raise self._error(f"{name} takes one whitelisted field")
        column, _, kind = self._node(argument, depth)
        if kind != "number":
            raise self._error(f"{name} needs a numeric field; {column} is text")
        self.aggregates.add((name, column))
        return f"{name}__{column}", f"{name}({column})", "number"

    def _same_type(
        self, left: tuple[str, str, Type], right: tuple[str, str, Type], op: str
    ) -> None:
        if left[2] != right[2] or left[2] == "boolean":
            raise self._error(
                f"{op} compares {left[1]} (a {left[2]}) with {right[1]} (a {right[2]})"
            )

    def _references_a_field(self, node: exp.Expr) -> None:
        if not any(isinstance(n, exp.Column) for n in node.walk()):
            raise self._error(f"{_sql(node)} compares no whitelisted field")

    def _describe(self, node: exp.Expr) -> str:
        """A refused construct as the user wrote it: a function by the name typed, anything
        else by its SQL — never by sqlglot's name for it."""
        if isinstance(node, (exp.Select, exp.Subquery, exp.Union, exp.Exists)):
            return "a subquery"
        if node.__class__ in _WORDS:
            return _WORDS[node.__class__]
        start, end = node.meta.get("start"), node.meta.get("end")
        if isinstance(node, exp.Func) and start is not None and end is not None:
            return f"function {self.text[start : end + 1].lower()}()"
        if isinstance(node, exp.Func):  # min(), cast(): parsed by sqlglot without a position
            name = node.sql_name().lower()
            if re.search(rf"(?<![\w.]){re.escape(name)}\s*\(", self.text, re.IGNORECASE):
                return f"function {name}()"
        return _quoted(_sql(node))


def _number(text: str, error: Callable[[str], WhitelistError]) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise error(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise error(f"{text!r} is not a finite number")
    if value.is_integer() and abs(value) < 2**53 and not any(c in text for c in ".eE"):
        return int(text)
    return value


def _show(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def _sql(node: exp.Expr) -> str:
    """The node as DuckDB SQL, for a message: without sqlglot's warnings on stderr."""
    return node.sql(dialect="duckdb", unsupported_level=ErrorLevel.IGNORE)


def _quoted(sql: str) -> str:
    return repr(sql if len(sql) <= 40 else sql[:37] + "...")


def _not_a_number(word: str) -> str:
    name, radix = _RADIXES.get(word[:2].lower(), ("", 0))
    if not name:
        return f"{word!r} is not a number"
    try:
        decimal = f" (write {int(word, radix)})"
    except ValueError:
        decimal = ""
    return f"{word!r} is not a number: {name} is not accepted{decimal}"


def _incomplete(kind: object, near: str) -> str:
    """The message for sqlglot's "Required keyword … missing for <class …>"."""
    if kind is exp.Between:
        return "BETWEEN needs `low AND high`"
    if kind in (exp.And, exp.Or):
        return f"{_OPERATORS[kind]} needs a condition on each side"
    if kind in _OPERATORS:
        return f"{_OPERATORS[kind]} needs a value on each side"
    if kind is exp.Not:
        return "NOT needs a condition after it"
    if kind is exp.Neg:
        return "- needs a number after it"
    if isinstance(kind, type) and issubclass(kind, exp.Func):
        return f"{kind.sql_name().lower()}() needs an argument"
    return f"is incomplete near {near!r}"
