"""`macros install` says which DuckDB opens the database it wrote (issue 35 §5): the storage
version DuckDB records for the file, not the version of the package that wrote it by assumption."""

from __future__ import annotations

from pathlib import Path

import duckdb
from click.testing import CliRunner

from duckscore.cli.app import cli


def test_install_names_the_duckdb_that_opens_the_file(tmp_path: Path) -> None:
    db = tmp_path / "analysis.duckdb"
    done = CliRunner().invoke(cli, ["macros", "install", "--db", str(db)])
    assert done.exit_code == 0, done.output
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT tags['storage_version'] FROM duckdb_databases() WHERE database_name = 'analysis'"
        ).fetchone()
    assert row is not None and row[0].startswith("v")
    version = row[0].rstrip("+")
    assert (
        done.stderr.splitlines()[1]
        == f"duckscore: {db} opens with DuckDB {version} or later (its storage version)"
    )
