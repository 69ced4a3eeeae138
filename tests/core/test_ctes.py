"""core/ctes.py: a WITH chain cut into its CTEs by tokens and run one at a time."""

from __future__ import annotations

import re

import pytest

from duckscore.core.ctes import Cte, create_each, ctes
from duckscore.core.errors import TemplateError
from duckscore.core.render import RenderedSQL
from duckscore.core.session import Session

CHAIN = RenderedSQL(
    "chain.sql",
    "WITH\n"
    "base AS (SELECT x, 'a)(b' AS s FROM (VALUES (1), (2), (3)) AS v(x) WHERE x >= $low),\n"
    '"Big Ones" AS (\n  SELECT x * (x + 1) AS y FROM base WHERE x > $high\n),\n'
    'together AS MATERIALIZED (SELECT count(*) AS n FROM base, "Big Ones")\n'
    "SELECT * FROM together\n",
)
PARAMS = {"low": 2, "high": 2, "unused": 0}


def test_each_cte_is_cut_out_as_written_with_its_parameters() -> None:
    assert ctes(CHAIN) == [
        Cte(
            "base",
            "SELECT x, 'a)(b' AS s FROM (VALUES (1), (2), (3)) AS v(x) WHERE x >= $low",
            frozenset({"low"}),
        ),
        Cte(
            "Big Ones",
            "\n  SELECT x * (x + 1) AS y FROM base WHERE x > $high\n",
            frozenset({"high"}),
        ),
        Cte("together", 'SELECT count(*) AS n FROM base, "Big Ones"', frozenset()),
    ]


def test_the_tables_hold_what_the_chain_selects() -> None:
    """The oracle: the chain run as one statement, selecting each CTE in turn."""
    with Session() as session:
        assert create_each(session, CHAIN, PARAMS) == ["base", "Big Ones", "together"]
        for name in ("base", "Big Ones", "together"):
            whole = CHAIN.text.replace("SELECT * FROM together", f'SELECT * FROM "{name}"')
            expected = session.con.execute(whole, {"low": 2, "high": 2}).fetchall()
            assert sorted(session.con.execute(f'FROM "{name}"').fetchall()) == sorted(expected)
        assert session.con.execute('FROM "Big Ones"').fetchall() == [(12,)]


def test_a_cte_named_as_a_view_is_refused() -> None:
    with Session() as session:
        session.con.execute('CREATE TEMP VIEW "BIG ONES" AS SELECT 1 AS x')
        with pytest.raises(
            TemplateError, match=r"^sql/chain\.sql: CTE Big Ones is the name of a view"
        ):
            create_each(session, CHAIN, PARAMS)
        assert session.first_row("FROM duckdb_tables() WHERE temporary") is None  # none made


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT 1", "does not start with WITH"),
        ("WITH\na AS (SELECT 1),\nb (SELECT 2)\nSELECT 1", "line 3: not `name AS"),
        ("WITH a AS (SELECT (1) SELECT 1", "line 1: unclosed parenthesis"),
        ("WITH a AS", "line 1: not `name AS"),
    ],
)
def test_what_is_not_a_chain_is_refused(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=rf"^sql/t\.sql: {re.escape(message)}"):
        ctes(RenderedSQL("t.sql", text))
