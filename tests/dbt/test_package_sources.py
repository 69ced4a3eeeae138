"""`duckscore dbt package` and the log's sources (issue 47): `--log` gives the models the log's
sources, read and checked at packaging time, and the package's test duckscore_log_sources_known
names every source of a log the models would leave out where `duckscore run` fuses it.

The test's SQL runs here in DuckDB, its `source()` rendered as a table of the connection, as
dbt renders it (dbt wraps a singular test in `SELECT count(*) … FROM (…)`: it fails when a row
comes back). The real `dbt build` refusal is in tests/integrations/test_dbt_build.py."""

from __future__ import annotations

from pathlib import Path

import duckdb
import jinja2
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.dbt.data_tests import SOURCES_TEST
from duckscore.dbt.package import build_package

from ..helpers import SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
TEST_FILE = f"tests/{SOURCES_TEST}.sql"
RENAME = (
    "SELECT * REPLACE (CASE source WHEN 'dense' THEN 'vector' WHEN 'sparse' THEN 'bm25' "
    f"ELSE source END AS source) FROM '{LOG}'"
)
# a recipe that declares its sources and leaves a log's others out
DECLARED = """\
extends: canonical_rrf
recipe_id: declared
discover_sources: false
sources: {dense: {}, sparse: {}}
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", "dbt", "package", *args])


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SciFact's log with dense and sparse named vector and bm25 (summary kept)."""
    path = tmp_path_factory.mktemp("renamed") / "log.parquet"
    duckdb.execute(f"COPY ({RENAME}) TO '{path}'")
    return path


def failing_rows(test_sql: str, log: str) -> list[tuple]:
    """The rows the package's test returns on the relation `log` (SQL), as dbt runs it."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    rendered = env.from_string(test_sql).render(
        var=lambda name: name, source=lambda name, table: "log"
    )
    with duckdb.connect() as con:
        con.execute(f"CREATE VIEW log AS {log}")
        assert con.execute(f"SELECT count(*) FROM ({rendered}) AS t").fetchone() is not None
        return con.execute(rendered).fetchall()


def test_log_gives_the_models_the_logs_sources(renamed: Path, tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    done = CliRunner().invoke(cli, ["dbt", "package", "--log", str(renamed), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert "recipe canonical_rrf over sources bm25, summary, vector; models " in done.stderr
    fused = (out / "models" / "duckscore_fused.sql").read_text(encoding="utf-8")
    assert all(f"'{name}'" in fused for name in ("bm25", "summary", "vector"))
    assert "'dense'" not in fused
    assert "sources:\n        - bm25\n        - summary\n        - vector\n" in (
        out / "models" / "schema.yml"
    ).read_text(encoding="utf-8")
    test_sql = (out / TEST_FILE).read_text(encoding="utf-8")
    assert failing_rows(test_sql, f"FROM '{renamed}'") == []


def test_the_example_log_gives_the_default_sources() -> None:
    """SciFact's sources are the default ones: `--log` on it writes what no option writes."""
    from_log = build_package("overall_v3", [], None, [], False, log=str(LOG))
    default = build_package("overall_v3", [], None, [], False)
    assert from_log.versions.sources == ("dense", "sparse", "summary")
    assert from_log.files == default.files


def test_a_log_source_the_models_do_not_fuse_is_a_failing_row_naming_it(renamed: Path) -> None:
    test_sql = build_package("overall_v3", [], None, [], False).files[TEST_FILE]
    rows = failing_rows(test_sql, f"FROM '{renamed}'")
    assert [(source, hits) for source, _, hits in rows] == [("bm25", 29987), ("vector", 30000)]
    assert rows[0][1] == (
        "not fused: the package fuses dense, sparse, summary; generate it again with "
        "`duckscore dbt package --log` on this log"
    )
    assert failing_rows(test_sql, f"FROM '{LOG}'") == []
    # a hit without a source is named too (run refuses it; the models would leave it out)
    no_source = failing_rows(test_sql, f"SELECT * REPLACE (NULL AS source) FROM '{LOG}' LIMIT 3")
    assert no_source == [(None, "no source: duckscore run refuses such hits", 3)]


def test_a_recipe_that_declares_its_sources_fails_only_on_a_declared_one_missing(
    tmp_path: Path,
) -> None:
    """A recipe without discover_sources leaves a log's undeclared sources out, as run does:
    no failing row for them; a declared source the log lacks (run refuses the log) is one."""
    recipe = tmp_path / "declared.yaml"
    recipe.write_text(DECLARED, encoding="utf-8")
    package = build_package("overall_v3", [], str(recipe), [], True, log=str(LOG))
    assert package.versions.sources == ("dense", "sparse", "summary")
    test_sql = package.files[TEST_FILE]
    assert failing_rows(test_sql, f"FROM '{LOG}'") == []
    missing = "not in the log: recipe declared declares it (duckscore run refuses the log)"
    assert failing_rows(test_sql, f"SELECT * REPLACE ('other' AS source) FROM '{LOG}'") == [
        ("dense", missing, 0),
        ("sparse", missing, 0),
    ]


def test_log_and_sources_together_are_one_line(tmp_path: Path) -> None:
    done = invoke("--log", str(LOG), "--sources", "dense", "--out", str(tmp_path / "pkg"))
    assert done.exit_code == 2 and not (tmp_path / "pkg").exists()
    assert done.stderr == (
        "duckscore: error: --sources and --log both name the sources: give --log (its sources "
        "are read) or --sources\n"
    )


def test_a_log_the_run_would_refuse_is_refused_at_packaging(tmp_path: Path) -> None:
    no_rank = tmp_path / "no_rank.parquet"
    duckdb.execute(f"COPY (SELECT * EXCLUDE (rank) FROM '{LOG}') TO '{no_rank}'")
    done = invoke("--log", str(no_rank), "--out", str(tmp_path / "pkg"))
    assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"duckscore: error: --log {no_rank}: has no rank column")
    missing = invoke("--log", str(tmp_path / "nowhere.parquet"), "--out", str(tmp_path / "pkg"))
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert "--log" in missing.stderr
    assert not (tmp_path / "pkg").exists()
