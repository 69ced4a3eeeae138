"""The macro pack for the named policies, as a script or written into a DuckDB database."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from ..core.connection import first_line
from ..core.errors import OutputError
from ..core.policy import load_policy
from ..fuse.recipe import FUSE_RECIPE
from ..instincts.policy import INSTINCT_POLICY
from ..score.policy import SCORE_POLICY
from .scalar import DEFAULT_PREFIX, macro_script


def pack_script(
    policy: str = "overall_v1",
    overrides: Sequence[str] = (),
    recipe: str = "hybrid_v1",
    recipe_overrides: Sequence[str] = (),
    instinct_policy: str = "instinct_v1",
    prefix: str = DEFAULT_PREFIX,
) -> str:
    """The DuckDB script of `CREATE OR REPLACE MACRO` statements, defaults from these policies."""
    return macro_script(
        load_policy(SCORE_POLICY, policy, list(overrides)),
        load_policy(FUSE_RECIPE, recipe, list(recipe_overrides)),
        load_policy(INSTINCT_POLICY, instinct_policy),
        prefix,
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
