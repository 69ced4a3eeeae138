"""A rendered `WITH … SELECT` run one CTE at a time, each a temp table of its own name.

A command whose outputs are several CTEs of one long chain (seed 002's bids: ten outputs of a
chain of some forty CTEs) would otherwise have DuckDB bind and plan the whole chain once per
output, which costs far more than running it on a tender's few thousand rows. Run CTE by CTE,
each is planned once and every output is a plain SELECT of its table.

The CTEs are cut out of the rendered text by its tokens (sqlglot's DuckDB tokenizer), never
regenerated: each runs exactly as written, and the whole chain has been checked as one statement
(core/check.py) before.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlglot.tokenizer_core import Token, TokenType

from .check import duckdb_tokens
from .errors import TemplateError
from .render import RenderedSQL, ident

if TYPE_CHECKING:
    from .session import Session


@dataclass(frozen=True)
class Cte:
    name: str
    text: str  # the body between the parentheses, as rendered
    parameters: frozenset[str]  # the `$name` placeholders it binds


def ctes(rendered: RenderedSQL) -> list[Cte]:
    """The CTEs of `rendered`'s leading WITH, in order."""
    return list(_cut(rendered.where, rendered.text))


@lru_cache(maxsize=16)
def _cut(where: str, text: str) -> tuple[Cte, ...]:
    """The CTEs of `text` (`where` names it in errors); cached: a calibrating bids run makes
    its chain's tables twice."""
    tokens = duckdb_tokens(text)
    if not tokens or tokens[0].token_type != TokenType.WITH:
        raise TemplateError(f"{where}: does not start with WITH")
    found: list[Cte] = []
    at = 1
    while True:
        name, opened = tokens[at], at + 2
        while opened < len(tokens) and tokens[opened].text.upper() in ("NOT", "MATERIALIZED"):
            opened += 1
        if opened >= len(tokens) or (tokens[at + 1].token_type, tokens[opened].token_type) != (
            TokenType.ALIAS,
            TokenType.L_PAREN,
        ):
            raise TemplateError(f"{where}: line {name.line}: not `name AS (…)`")
        closed = _closing(tokens, opened, where)
        body = tokens[opened + 1 : closed]
        found.append(
            Cte(name.text, text[tokens[opened].end + 1 : tokens[closed].start], _parameters(body))
        )
        if closed + 1 == len(tokens) or tokens[closed + 1].token_type != TokenType.COMMA:
            return tuple(found)
        at = closed + 2


def create_each(session: Session, rendered: RenderedSQL, params: Mapping[str, Any]) -> list[str]:
    """Every CTE of `rendered` (checked already) as a temp table, in order, each bound to the
    `params` it names; the tables' names. A CTE may not take the name of a view (the inputs'
    typed views): it would replace the relation the chain reads."""
    found = ctes(rendered)
    views = session.con.execute("SELECT lower(view_name) FROM duckdb_views() WHERE temporary")
    names = {row[0] for row in views.fetchall()}
    taken = {cte.name for cte in found if cte.name.lower() in names}
    if taken:
        raise TemplateError(f"{rendered.where}: CTE {min(taken)} is the name of a view")
    for cte in found:
        session.execute(
            f"CREATE OR REPLACE TEMP TABLE {ident(cte.name)} AS {cte.text}",
            rendered=rendered,
            params={name: params[name] for name in sorted(cte.parameters)},
        )
    return [cte.name for cte in found]


def _closing(tokens: list[Token], opened: int, where: str) -> int:
    depth = 0
    for at in range(opened, len(tokens)):
        kind = tokens[at].token_type
        depth += (kind == TokenType.L_PAREN) - (kind == TokenType.R_PAREN)
        if depth == 0:
            return at
    raise TemplateError(f"{where}: line {tokens[opened].line}: unclosed parenthesis")


def _parameters(tokens: list[Token]) -> frozenset[str]:
    return frozenset(
        later.text
        for token, later in itertools.pairwise(tokens)
        if token.token_type == TokenType.PARAMETER
    )
