"""The §5.3 whitelist: an injection corpus refused without touching a database, accepted
conditions with their canonical form, literals only ever bound, and the compiled SQL's meaning
checked in DuckDB against predicates written by hand."""

from __future__ import annotations

import math
import re

import duckdb
import pytest
from click.testing import CliRunner
from sqlglot import expressions as exp

from duckscore.bids.whitelist import FIELD_TYPES, parse_condition, parse_formula
from duckscore.cli import cli
from duckscore.core.errors import WhitelistError

INJECTIONS = {
    "other column": "tenant_id = 't_other'",
    "other column quoted": "\"tenant_id\" = 't_other'",
    "project column": "project_id IN ('p1', 'p2')",
    "chunk column": "chunk_id IS NOT NULL",
    "whitelisted or other column": "bid_price > 0 OR tenant_id = 'x'",
    "quote breaking identifier": '"bid_price""; DROP TABLE chunks; --" > 1',
    "second statement": "bid_price > 1; DROP TABLE chunks",
    "second select": "bid_price > 1; SELECT * FROM chunks",
    "trailing semicolon": "bid_price > 1;",
    "line comment": "bid_price > 1 -- and the rest",
    "block comment": "bid_price > 1 /* hidden */",
    "comment inside": "bid_price /* x */ > 1",
    "subquery in IN": "supplier_code IN (SELECT supplier_code FROM bid_fields)",
    "scalar subquery": "bid_price > (SELECT max(bid_price) FROM bid_fields)",
    "exists": "EXISTS (SELECT 1 FROM chunks)",
    "union": "bid_price > 1 UNION SELECT 1",
    "join word": "bid_price > 1 JOIN chunks ON TRUE",
    "read_csv": "supplier_code = read_csv('/etc/passwd')",
    "getenv": "supplier_code = getenv('HOME')",
    "current_setting": "supplier_code = current_setting('threads')",
    "pg_sleep": "bid_price > pg_sleep(10)",
    "lower in condition": "lower(supplier_code) = 'a'",
    "now": "delivery_period > now()",
    "cast double colon": "bid_price::VARCHAR = '1'",
    "cast": "CAST(bid_price AS VARCHAR) = '1'",
    "try_cast": "TRY_CAST(supplier_code AS INTEGER) = 1",
    "like": "supplier_code LIKE 'A%'",
    "ilike": "supplier_code ILIKE 'a%'",
    "similar to": "supplier_code SIMILAR TO 'A.*'",
    "regexp": "regexp_matches(supplier_code, '.*')",
    "glob": "supplier_code GLOB 'A*'",
    "case": "CASE WHEN bid_price > 1 THEN TRUE ELSE FALSE END",
    "concatenation": "supplier_code || 'x' = 'ax'",
    "dollar placeholder": "bid_price > $1",
    "named placeholder": "bid_price > $price",
    "question placeholder": "bid_price > ?",
    "colon placeholder": "bid_price > :price",
    "getvariable": "bid_price > getvariable('x')",
    "star": "*",
    "count star": "count(*) > 0",
    "table qualified": "bid_fields.bid_price > 1",
    "alias qualified": "b.bid_price > 1",
    "schema qualified": "main.bid_fields.bid_price > 1",
    "lambda": "list_filter([1], lambda x: x > 1) = [1]",
    "arrow lambda": "list_filter([1], x -> x > 1) = [1]",
    "list literal compare": "[bid_price] = [1]",
    "struct literal": "{'a': bid_price} = {'a': 1}",
    "cyrillic look-alike": "bid_pricе > 1",  # the last "е" is U+0435
    "fullwidth look-alike": "ｂｉｄ_price > 1",
    "backslash escape": "supplier_code = E'\\x27'",
    "nul byte": "bid_price > 1\x00; DROP TABLE x",
    "empty": "",
    "blank": "   \n\t ",
    "bare column": "bid_price",
    "bare literal": "1",
    "bare true": "TRUE",
    "tautology over literals": "1 = 1",
    "tautology or": "bid_price > 1 OR 1 = 1",
    "string tautology": "'a' = 'a'",
    "boolean comparison": "(bid_price > 1) = TRUE",
    "aggregate in condition": "min(bid_price) > 1",
    "text compared to number": "supplier_code > 5",
    "number in text IN": "qualification_level IN ('A', 1)",
    "null comparison": "bid_price = NULL",
    "is true": "bid_price > 1 IS TRUE",
    "between symmetric": "bid_price BETWEEN SYMMETRIC 1 AND 2",
    "columns star": "COLUMNS(*) > 1",
    "exclude": "* EXCLUDE (tenant_id)",
    "qualify": "bid_price > 1 QUALIFY TRUE",
    "pragma": "PRAGMA database_list",
    "attach": "ATTACH '/tmp/x.db'",
    "copy": "COPY chunks TO '/tmp/x.csv'",
    "install": "INSTALL httpfs",
    "set": "SET threads = 1",
    "drop alone": "DROP TABLE chunks",
    "select alone": "SELECT 1",
    "infinite literal": "bid_price < 1e999",
    "nan string cast": "bid_price < 'nan'::DOUBLE",
    "modulo": "bid_price % 2 = 0",
    "power": "bid_price ^ 2 > 1",
    "bitwise": "bid_price & 1 = 1",
    "deep nesting": "(" * 3000 + "bid_price > 1" + ")" * 3000,
    "very long": "bid_price > 1 AND " * 60_000 + "bid_price > 1",
    "in without values": "bid_price IN ()",
}
FORMULA_INJECTIONS = {
    "aggregate of expression": "min(bid_price * 2)",
    "aggregate of text": "min(supplier_code)",
    "count": "count(bid_price)",
    "sum": "sum(bid_price)",
    "distinct aggregate": "min(DISTINCT bid_price)",
    "window": "min(bid_price) OVER ()",
    "condition as formula": "bid_price > 1",
    "text as formula": "supplier_code",
    "abs of two": "abs(bid_price, 1)",
    "round non-literal digits": "round(bid_price, delivery_period)",
    "other function": "sqrt(bid_price)",
    "other column": "100 * min(tenant_id)",
    "literal only": "100",
}
MALFORMED = {  # typing mistakes rather than attacks: each is refused in the user's words
    "hexadecimal": "bid_price > 0x10",
    "hexadecimal first": "0x10 > bid_price",
    "binary": "bid_price > 0b101",
    "octal": "bid_price > 0o17",
    "digits and letters": "bid_price > 12abc",
    "number then word": "bid_price > 1 x",
    "alias": "bid_price > 1 AS x",
    "dangling IS": "bid_price IS",
    "BETWEEN without AND": "bid_price BETWEEN 1",
    "BETWEEN without high": "bid_price BETWEEN 1 AND",
    "BETWEEN without low": "bid_price BETWEEN AND 2",
    "BETWEEN alone": "bid_price BETWEEN",
    "NOT BETWEEN without AND": "bid_price NOT BETWEEN 1",
    "comparison without right side": "bid_price >",
    "comparison without left side": "> 1",
    "doubled operator": "bid_price >= =1",
    "AND without right side": "bid_price > 1 AND",
    "AND without left side": "AND bid_price > 1",
    "OR without right side": "bid_price > 1 OR",
    "NOT alone": "NOT",
    "minus alone": "bid_price > -",
    "modulo without right side": "bid_price > 10%",
    "unclosed parenthesis": "(bid_price > 1",
    "extra parenthesis": "bid_price > 1)",
    "unclosed IN": "bid_price IN (1",
    "unclosed string": "bid_price = 'abc",
    "unclosed quoted field": '"bid_price > 1',
    "lone dollar": "bid_price > $",
    "two values": "bid_price > 1,2",
    "NOT after value": "bid_price NOT > 1",
    "IS NOT alone": "bid_price IS NOT",
    "cast without type": "bid_price > 'a'::",
    "backtick": "supplier_code = `A`",
    "hex string": "bid_price > x'10'",
    "dotted number": "bid_price > 1.2.3",
    "tuple": "bid_price > (1, 2)",
    "empty parentheses": "()",
    "interval": "bid_price > INTERVAL 1 DAY",
    "date literal": "bid_price > DATE '2020-01-01'",
    "bitwise not": "bid_price > ~1",
    "null-safe equal": "bid_price <=> 1",
    "is distinct from": "bid_price IS DISTINCT FROM 1",
    "integer division": "bid_price // 2 > 1",
    "power operator": "bid_price ** 2 > 1",
    "index": "bid_price[1] > 1",
    "json arrow": "bid_price->'x' > 1",
    "adjacent strings": "supplier_code = 'a' 'b'",
    "collate": "supplier_code = 'a' COLLATE nocase",
    "any": "bid_price > ANY([1])",
    "all": "bid_price > ALL(SELECT 1)",
    "at sign": "bid_price > @x",
    "least in a condition": "least(bid_price, 1) > 1",
    "least without arguments": "bid_price > least()",
    "order by": "bid_price > 1 ORDER BY 1",
}
FORMULA_MALFORMED = {
    "hexadecimal": "100 - 0x10",
    "hexadecimal alone": "0x10",
    "least without arguments": "least()",
    "round without arguments": "round()",
    "abs without arguments": "abs()",
    "avg without arguments": "avg()",
    "product without right side": "100 *",
    "window over a partition": "min(bid_price) OVER (PARTITION BY supplier_code)",
    "filter": "greatest(bid_price, 1) FILTER (WHERE TRUE)",
    "ignore nulls": "min(bid_price IGNORE NULLS)",
    "modulo": "100 % bid_price",
    "BETWEEN without AND": "bid_price BETWEEN 1",
}
# sqlglot's names for what it parsed (Alias, Between, GT …) mean nothing to the person who typed
# the expression; nor does `readcsv` for read_csv or "Line 1, Col: 18"
SQLGLOT_NAMES = {
    name
    for name, value in vars(exp).items()
    if isinstance(value, type) and issubclass(value, exp.Expr) and len(name) > 2
}


@pytest.fixture
def no_database(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open or use DuckDB fails the test: parsing must not execute anything."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the whitelist touched a database")

    monkeypatch.setattr(duckdb, "connect", refuse)
    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute", refuse)


@pytest.mark.parametrize("text", list(INJECTIONS.values()), ids=list(INJECTIONS))
def test_injections_are_refused_in_one_line_without_a_database(
    no_database: None, text: str
) -> None:
    with pytest.raises(WhitelistError) as caught:
        parse_condition(text)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400
    assert message.startswith("condition ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # sqlglot kept the extra argument elsewhere and the compiled SQL dropped it silently
        ("min(bid_price, 1)", "min takes one whitelisted field, and nothing more"),
        ("100 - round(bid_price, 2, 3)", "round takes a number and a whole number of decimals"),
        ("round(bid_price, 2) + max(bid_price, 0)", "max takes one whitelisted field"),
    ],
)
def test_a_formula_is_compiled_exactly_or_refused(
    no_database: None, text: str, message: str
) -> None:
    with pytest.raises(WhitelistError, match=message):
        parse_formula(text)
    assert "round(bid_price, 2)" in parse_formula("round(bid_price, 2)").describe()


@pytest.mark.parametrize("text", list(FORMULA_INJECTIONS.values()), ids=list(FORMULA_INJECTIONS))
def test_formula_injections_are_refused(no_database: None, text: str) -> None:
    with pytest.raises(WhitelistError):
        parse_formula(text)


@pytest.mark.parametrize(
    "text",
    [
        "tenant_id = 't_other'",
        "bid_price > 1; DROP TABLE chunks",
        "bid_price > 1 -- x",
        "EXISTS (SELECT 1)",
        "bid_pricе > 1",
    ],
)
def test_filter_check_refuses_with_exit_2_and_one_line(text: str) -> None:
    result = CliRunner().invoke(cli, ["filter", "check", text])
    assert result.exit_code == 2
    assert result.stdout == "" and result.stderr.count("\n") == 1


def refusal(text: str, formula: bool = False) -> str:
    with pytest.raises(WhitelistError) as caught:
        (parse_formula if formula else parse_condition)(text)
    return str(caught.value)


def assert_in_the_users_words(text: str, message: str) -> None:
    """One line, and no word of sqlglot's: not its class names, not its keys for functions."""
    assert "\n" not in message and len(message) < 400, message
    assert "<class" not in message and "sqlglot" not in message, message
    assert not re.search(r"Line [0-9]+, Col", message), message
    outside_quotes = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "", message)
    words = set(re.findall(r"[A-Za-z_]+", outside_quotes))
    assert not words & SQLGLOT_NAMES, (words & SQLGLOT_NAMES, message)
    assert not re.search(r"[a-z][A-Z]", outside_quotes), message  # CamelCase
    for name in re.findall(r"function ([^ (]+)\(\)", message):
        assert name in text.lower(), f"{name}() is not what {text!r} calls it: {message}"


REFUSED = [
    *((text, False) for text in (*INJECTIONS.values(), *MALFORMED.values())),
    *((text, True) for text in (*FORMULA_INJECTIONS.values(), *FORMULA_MALFORMED.values())),
]


@pytest.mark.parametrize(
    "text, formula",
    REFUSED,
    ids=[
        *(f"condition {name}" for name in (*INJECTIONS, *MALFORMED)),
        *(f"formula {name}" for name in (*FORMULA_INJECTIONS, *FORMULA_MALFORMED)),
    ],
)
def test_refusals_are_one_line_in_the_users_words(
    no_database: None, text: str, formula: bool
) -> None:
    assert_in_the_users_words(text, refusal(text, formula))


@pytest.mark.parametrize(
    ("text", "formula", "reason"),
    [
        # sqlglot reads 0x10 as `0 AS x10`: it was refused as "Alias (bid_price > 0 AS x10)"
        (
            "bid_price > 0x10",
            False,
            "'0x10' is not a number: hexadecimal is not accepted (write 16)",
        ),
        (
            "0x10 > bid_price",
            False,
            "'0x10' is not a number: hexadecimal is not accepted (write 16)",
        ),
        ("100 - 0X1F", True, "'0X1F' is not a number: hexadecimal is not accepted (write 31)"),
        ("bid_price > 0b101", False, "'0b101' is not a number: binary is not accepted (write 5)"),
        ("bid_price > 0xZZ", False, "'0xZZ' is not a number: hexadecimal is not accepted"),
        ("bid_price > 12abc", False, "'12abc' is not a number"),
        ("bid_price > 1 x", False, "unexpected 'x' after 'bid_price > 1'"),
        ("bid_price IS", False, "unexpected 'IS' after 'bid_price'"),
        # sqlglot: "Required keyword: 'high' missing for <class 'sqlglot.expressions.core.Between'>"
        ("bid_price BETWEEN 1", False, "BETWEEN needs `low AND high`"),
        ("bid_price BETWEEN 1 AND", False, "BETWEEN needs `low AND high`"),
        ("bid_price NOT BETWEEN 1", False, "BETWEEN needs `low AND high`"),
        ("bid_price BETWEEN AND 2", False, "BETWEEN needs `low AND high`"),
        ("bid_price BETWEEN 1", True, "BETWEEN needs `low AND high`"),
        ("bid_price >", False, "> needs a value on each side"),
        ("> 1", False, "> needs a value on each side"),
        ("100 *", True, "* needs a value on each side"),
        ("bid_price > 1 AND", False, "AND needs a condition on each side"),
        ("AND bid_price > 1", False, "AND needs a condition on each side"),
        ("NOT", False, "NOT needs a condition after it"),
        ("bid_price > -", False, "- needs a number after it"),
        ("least()", True, "least() needs an argument"),
        ("(bid_price > 1", False, "a '(' is not closed"),
        ("bid_price = 'abc", False, "a ' quote is not closed"),
        ('"bid_price > 1', False, 'a " quote is not closed'),
        ("bid_price > 1 JOIN chunks ON TRUE", False, "unexpected 'JOIN' after 'bid_price > 1'"),
        # sqlglot's keys for the functions (readcsv, regexplike) and classes (Like, DPipe)
        ("supplier_code = read_csv('/etc/passwd')", False, "function read_csv() is not allowed"),
        ("regexp_matches(supplier_code, 'a')", False, "function regexp_matches() is not allowed"),
        ("supplier_code LIKE 'A%'", False, "\"supplier_code LIKE 'A%'\" is not allowed"),
        ("supplier_code || 'x' = 'ax'", False, "\"supplier_code || 'x'\" is not allowed"),
        ("bid_price > $1", False, "'$1' is not allowed"),
        ("bid_price % 2 = 0", False, "'bid_price % 2' is not allowed"),
    ],
)
def test_refusals_say_what_is_wrong(
    no_database: None, text: str, formula: bool, reason: str
) -> None:
    message = refusal(text, formula)
    assert message == f"{'formula' if formula else 'condition'} {text!r}: {reason}"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--formula", "100 * 0x10 / bid_price"],
            "formula '100 * 0x10 / bid_price': "
            "'0x10' is not a number: hexadecimal is not accepted (write 16)",
        ),
        (
            ["bid_price BETWEEN 1 AND"],
            "condition 'bid_price BETWEEN 1 AND': BETWEEN needs `low AND high`",
        ),
        # sqlglot also logged "IGNORE NULLS is not supported for non-window functions." on stderr
        (
            ["--formula", "min(bid_price IGNORE NULLS)"],
            "formula 'min(bid_price IGNORE NULLS)': IGNORE NULLS is not allowed",
        ),
    ],
)
def test_filter_check_says_what_is_wrong_in_one_line(args: list[str], line: str) -> None:
    result = CliRunner().invoke(cli, ["filter", "check", *args])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"duckscore: error: {line}\n"


ACCEPTED = [
    ("bid_price <= 5000000", "bid_price <= 5000000", [5000000]),
    ("bid_price < 5000000.5", "bid_price < 5000000.5", [5000000.5]),
    ("delivery_period >= 30", "delivery_period >= 30", [30]),
    ("warranty_period > 12", "warranty_period > 12", [12]),
    ("registered_capital = 1e6", "registered_capital = 1000000.0", [1000000.0]),
    ("supplier_code <> 'X'", "supplier_code <> 'X'", ["X"]),
    ("supplier_code != 'X'", "supplier_code <> 'X'", ["X"]),
    ("qualification_level IN ('A', 'B')", "qualification_level IN ('A', 'B')", ["A", "B"]),
    ("qualification_level NOT IN ('C')", "NOT qualification_level IN ('C')", ["C"]),
    ("bid_price BETWEEN 1 AND 2", "bid_price BETWEEN 1 AND 2", [1, 2]),
    ("bid_price NOT BETWEEN 1 AND 2", "NOT bid_price BETWEEN 1 AND 2", [1, 2]),
    ("warranty_period IS NULL", "warranty_period IS NULL", []),
    ("warranty_period IS NOT NULL", "warranty_period IS NOT NULL", []),
    ("BID_PRICE > 1", "bid_price > 1", [1]),
    ('"bid_price" > 1', "bid_price > 1", [1]),
    ("qualification_level = '甲级'", "qualification_level = '甲级'", ["甲级"]),
    ("supplier_code = 'O''Brien'", "supplier_code = 'O''Brien'", ["O'Brien"]),
    (
        "supplier_code = '''; DROP TABLE x; --'",
        "supplier_code = '''; DROP TABLE x; --'",
        ["'; DROP TABLE x; --"],
    ),
    ("bid_price > -5", "bid_price > -5", [-5]),
    ("bid_price IN [1, 2]", "bid_price IN (1, 2)", [1, 2]),  # DuckDB's list form, the same IN list
    ("bid_price / delivery_period < 100000", "bid_price / delivery_period < 100000", [100000]),
    (
        "bid_price * 2 + 1 > registered_capital - 3",
        "bid_price * 2 + 1 > registered_capital - 3",
        [2, 1, 3],
    ),
    (
        "(bid_price < 1 OR bid_price > 2) AND NOT supplier_code = 'Z'",
        "(bid_price < 1 OR bid_price > 2) AND NOT supplier_code = 'Z'",
        [1, 2, "Z"],
    ),
    (
        "bid_price < 1 OR bid_price > 2 AND supplier_code = 'Z'",
        "bid_price < 1 OR bid_price > 2 AND supplier_code = 'Z'",
        [1, 2, "Z"],
    ),
]


@pytest.mark.parametrize("text, normalized, values", ACCEPTED, ids=[a[0][:40] for a in ACCEPTED])
def test_accepted_conditions_bind_every_literal(
    no_database: None, text: str, normalized: str, values: list
) -> None:
    compiled = parse_condition(text)
    assert compiled.normalized == normalized
    assert list(compiled.params.values()) == values
    assert "'" not in compiled.sql and '"' not in compiled.sql and "--" not in compiled.sql
    without_placeholders = re.sub(r"\$p[0-9]+", "", compiled.sql).replace("NULLIF(", "")
    assert not re.search(r"[0-9]", without_placeholders.replace(", 0)", ")")), compiled.sql
    words = set(re.findall(r"[a-z_]+", compiled.sql.lower())) - {
        "p",
        "and",
        "or",
        "not",
        "in",
        "between",
        "is",
        "null",
        "nullif",
    }
    assert words <= set(FIELD_TYPES), words


@pytest.mark.parametrize(
    "text",
    [
        "100 * min(bid_price) / bid_price",
        "greatest(0, 100 - 2 * greatest(0, delivery_period - 30))",
        "least(100, warranty_period * 2)",
        "abs(bid_price - avg(bid_price))",
        "round(max(registered_capital) / registered_capital, 2)",
    ],
)
def test_accepted_formulas(no_database: None, text: str) -> None:
    compiled = parse_formula(text)
    assert compiled.fields or compiled.aggregates
    assert "'" not in compiled.sql


ROWS = [  # supplier_code, qualification_level, registered_capital, bid_price, delivery_period, warranty_period
    ("A1", "A", 8e6, 4.5e6, 30.0, 36.0),
    ("B2", "B", 4e6, 5e6, 45.0, None),
    ("C3", "C", 9e6, None, 20.0, 24.0),
    ("O'B", "甲级", None, 1.0, 0.0, 12.0),
    ("D4", None, 5e6, 5e6, 30.0, 36.0),
]
NAMES = list(FIELD_TYPES)


def _sql_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _sql_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _cmp(value: object, op: str, other: object) -> bool | None:
    if value is None or other is None:
        return None
    return {
        "<": value < other,
        "<=": value <= other,
        ">": value > other,
        ">=": value >= other,  # type: ignore[operator]
        "=": value == other,
        "<>": value != other,
    }[op]


SEMANTICS = [
    (
        "bid_price <= 5000000 AND qualification_level IN ('A', 'B')",
        lambda r: _sql_and(_cmp(r[3], "<=", 5e6), None if r[1] is None else r[1] in ("A", "B")),
    ),
    (
        "warranty_period IS NULL OR delivery_period > 40",
        lambda r: _sql_or(r[5] is None, _cmp(r[4], ">", 40)),
    ),
    (
        "NOT bid_price BETWEEN 1 AND 4600000",
        lambda r: None if r[3] is None else not (1 <= r[3] <= 4.6e6),
    ),
    ("supplier_code = 'O''B'", lambda r: r[0] == "O'B"),
    (
        "bid_price / delivery_period > 100000",  # division by 0 is NULL, not an error
        lambda r: None if r[3] is None or not r[4] else r[3] / r[4] > 1e5,
    ),
    (
        "qualification_level NOT IN ('C', '甲级')",
        lambda r: None if r[1] is None else r[1] not in ("C", "甲级"),
    ),
    (
        "registered_capital >= 5000000 OR qualification_level = 'A'",
        lambda r: _sql_or(_cmp(r[2], ">=", 5e6), _cmp(r[1], "=", "A")),
    ),
    (
        "bid_price * 2 > registered_capital",
        lambda r: None if r[3] is None or r[2] is None else r[3] * 2 > r[2],
    ),
    ("-bid_price < -4600000", lambda r: None if r[3] is None else -r[3] < -4.6e6),
    (
        "warranty_period IS NOT NULL AND NOT (delivery_period < 25)",
        lambda r: _sql_and(r[5] is not None, None if r[4] is None else not r[4] < 25),
    ),
]


@pytest.mark.parametrize("text, predicate", SEMANTICS, ids=[s[0][:40] for s in SEMANTICS])
def test_compiled_conditions_select_what_sql_three_valued_logic_says(text: str, predicate) -> None:
    compiled = parse_condition(text)
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t (row_id INTEGER, supplier_code VARCHAR, qualification_level VARCHAR, "
        "registered_capital DOUBLE, bid_price DOUBLE, delivery_period DOUBLE, warranty_period DOUBLE)"
    )
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)", [(i, *r) for i, r in enumerate(ROWS)]
    )
    selected = [
        row[0]
        for row in con.execute(
            f"SELECT row_id FROM t WHERE {compiled.sql} ORDER BY row_id", compiled.params
        ).fetchall()
    ]
    assert selected == [i for i, r in enumerate(ROWS) if predicate(r) is True]


@pytest.mark.parametrize(
    "formula, expected",
    [
        # min/max/avg read as columns min__<field> …, which the rule engine fills per project
        (
            "100 * min(bid_price) / bid_price",
            [100 * 1.0 / 4.5e6, 100 * 1.0 / 5e6, None, 100.0, 100 * 1.0 / 5e6],
        ),
        (
            "greatest(0, 100 - 2 * greatest(0, delivery_period - 30))",
            [100.0, 70.0, 100.0, 100.0, 100.0],
        ),
        ("least(100, warranty_period * 2)", [72.0, None, 48.0, 24.0, 72.0]),  # NULL stays NULL
        ("round(bid_price / 1000000, 1)", [4.5, 5.0, None, 0.0, 5.0]),
    ],
)
def test_compiled_formulas_compute_with_null_as_missing(formula: str, expected: list) -> None:
    compiled = parse_formula(formula)
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t (row_id INTEGER, supplier_code VARCHAR, qualification_level VARCHAR, "
        "registered_capital DOUBLE, bid_price DOUBLE, delivery_period DOUBLE, warranty_period DOUBLE)"
    )
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)", [(i, *r) for i, r in enumerate(ROWS)]
    )
    aggregates = ", ".join(
        f"{fn}({field}) OVER () AS {fn}__{field}" for fn, field in compiled.aggregates
    )
    source = f"(SELECT *{', ' + aggregates if aggregates else ''} FROM t)"
    values = [
        row[0]
        for row in con.execute(
            f"SELECT {compiled.sql} FROM {source} ORDER BY row_id", compiled.params
        ).fetchall()
    ]
    for got, want in zip(values, expected, strict=True):
        assert (got is None and want is None) or math.isclose(got, want, rel_tol=1e-12), (got, want)
