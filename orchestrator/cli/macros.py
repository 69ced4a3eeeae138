"""`duckscore macros install`: the macro pack written into a DuckDB database file."""

from __future__ import annotations

from pathlib import Path

import click

from .app import DuckscoreGroup, cli
from .options import pack_options
from .summary import done


@cli.group(cls=DuckscoreGroup)
def macros() -> None:
    """duckscore as SQL: the building blocks as DuckDB macros (ds_rrf, ds_quantile_norm, …) and
    each capability as a table macro over any relation (ds_fuse, ds_queries, ds_eval, …). Print
    them with `duckscore sql macros`; docs/in-sql.md lists them."""


@macros.command("install")
@click.option(
    "--db",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A DuckDB database file (created if missing); the macros persist in its catalog.",
)
@pack_options
def macros_install(db: Path, script: str) -> None:
    """Write the macro pack into a DuckDB database, replacing an earlier install.

    \b
    duckscore macros install --db analysis.duckdb
    duckdb analysis.duckdb -c "SELECT ds_rrf(1), ds_policy()"
    """
    from ..pack.install import install

    names = install(db, script)
    done(f"installed {len(names)} macros into {db}: {', '.join(names)}")
    done(f"{db} opens with DuckDB {storage_version(db)} or later (its storage version)")


def storage_version(db: Path) -> str:
    """The DuckDB release that wrote `db`'s storage format (an older DuckDB cannot open it)."""
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT tags['storage_version'] FROM duckdb_databases() WHERE NOT internal"
        ).fetchone()
    return str(row[0]).rstrip("+") if row and row[0] else f"v{duckdb.__version__}"
