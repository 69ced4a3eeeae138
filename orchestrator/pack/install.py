"""The macro pack for the named policies, as a script or written into a DuckDB database."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from ..answering.policy import load_answer_policy
from ..common.defaults import DEFAULT_POLICY, DEFAULT_RECIPE
from ..core.connection import first_line
from ..core.errors import OptionError, OutputError
from ..core.render import lit
from ..core.version import __version__
from ..fusion.recipe import load_recipe, plan
from ..instincts.policy import load_instinct_policy
from ..scoring.policy_view import load_score_policy
from .scalar import scalar_macros
from .table import table_macros

DEFAULT_PREFIX = "ds_"
DEFAULT_SOURCES = ("dense", "sparse", "summary")
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def pack_script(
    policy: str = DEFAULT_POLICY,
    overrides: Sequence[str] = (),
    recipe: str = DEFAULT_RECIPE,
    recipe_overrides: Sequence[str] = (),
    instinct_policy: str = "instinct_v1",
    prefix: str = DEFAULT_PREFIX,
    sources: Sequence[str] = DEFAULT_SOURCES,
    answer_policy: str = "answer_v1",
) -> str:
    """The DuckDB script of `CREATE OR REPLACE MACRO` statements: scalar macros with these
    policies' values as their defaults, table macros for the capabilities (fusing `sources`)."""
    check_prefix(prefix)
    if not sources:
        raise OptionError("--sources is empty: name the sources the fusion macros fuse")
    score = load_score_policy(policy, list(overrides))
    fusion = load_recipe(recipe, list(recipe_overrides))
    instincts = load_instinct_policy(instinct_policy)
    answers = load_answer_policy(answer_policy)
    fused = plan(fusion, sorted(sources), has_rank=True).sources
    versions = {
        "duckscore": __version__,
        "score_policy": score.version,
        "recipe": fusion.version,
        "sources": fused,
        "instinct_policy": instincts.version,
        "answer_policy": answers.version,
    }
    header = (
        f"-- duckscore {__version__} macro pack (prefix {prefix}): score policy {score.version}, "
        f"recipe {fusion.version} over sources {', '.join(sorted(sources))}, instinct policy "
        f"{instincts.version}, answer policy {answers.version}\n"
        "-- generated from macros/*.sql and sql/ by `duckscore sql macros`; every statement is "
        "idempotent\n"
        f"-- {prefix}policy(): the versions the defaults below come from, and the sources "
        f"{prefix}fuse and {prefix}parent_features fuse\n"
        f"CREATE OR REPLACE MACRO {prefix}policy() AS "
        f"{{{', '.join(f'{lit(key)}: {lit(value)}' for key, value in versions.items())}}};\n"
    )
    statements = [m.statement(prefix) for m in scalar_macros(score, fusion, instincts)]
    statements += [m.statement(prefix) for m in table_macros(score, fusion, answers, sources)]
    return "\n".join([header, *statements])


def check_prefix(prefix: str) -> None:
    """A prefix that keeps every macro name a plain identifier."""
    if not _PREFIX.fullmatch(prefix):
        raise OptionError(
            f"--prefix {prefix!r}: a macro name prefix is letters, digits and _, not starting "
            "with a digit (e.g. ds_)"
        )


def install(db: Path | str, script: str) -> list[str]:
    """Run `script` in the database file `db` (created if missing) in one transaction, so the
    macros persist in its catalog; installing again replaces them. Returns the macro names."""
    try:
        with duckdb.connect(str(db)) as con:
            con.execute("BEGIN TRANSACTION")
            con.execute(script)
            con.execute("COMMIT")
    except duckdb.Error as exc:
        raise OutputError(f"--db {db}: cannot install the macros ({first_line(exc)})") from None
    return [
        line.split()[4].split("(")[0]
        for line in script.splitlines()
        if line.startswith("CREATE OR REPLACE MACRO ")
    ]
