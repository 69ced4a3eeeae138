"""The fusion macros and the log's sources (issue 47): a macro pack installed for some sources,
over a log holding another, stops the query naming the source, the sources the pack was built
for and the log's — where it returned 0 rows, or left the source out, and said nothing. A
recipe that declares its sources leaves the others out, as `duckscore run` does. ds_policy()
says which sources the pack fuses."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.pack.install import pack_script

from ..helpers import SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
# dense and sparse renamed, summary kept: a log the default pack fuses only a third of
RENAMED = (
    "SELECT * REPLACE (CASE source WHEN 'dense' THEN 'vector' WHEN 'sparse' THEN 'bm25' "
    f"ELSE source END AS source) FROM '{LOG}'"
)
REFUSAL = (
    "Invalid Input Error: {macro}: log holds source 'bm25', which this pack does not fuse "
    "(installed for sources dense, sparse, summary; the log's sources: bm25, summary, vector): "
    "install the pack again with --sources bm25,summary,vector, or give {macro} a view of the "
    "log without the others"
)


def connection(script: str, log: str = RENAMED) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(script)
    con.execute(f"CREATE VIEW log AS {log}")
    return con


@pytest.mark.parametrize("macro", ["ds_fuse", "ds_parent_features"])
def test_a_log_source_the_pack_does_not_fuse_stops_the_query_naming_it(macro: str) -> None:
    con = connection(pack_script())
    with pytest.raises(duckdb.InvalidInputException) as refused:
        con.execute(f"SELECT count(*) FROM {macro}('log')").fetchall()
    assert str(refused.value) == REFUSAL.format(macro=macro)


def test_the_pack_installed_for_the_logs_sources_fuses_them_as_run_does(tmp_path: Path) -> None:
    """The remedy the message names: --sources the log's; the rows are then run's."""
    log = tmp_path / "log.parquet"
    duckdb.execute(f"COPY ({RENAMED}) TO '{log}'")
    done = CliRunner().invoke(cli, ["-q", "fuse", "--log", str(log), "--out", str(tmp_path / "o")])
    assert done.exit_code == 0, done.output
    con = connection(pack_script(sources=["bm25", "summary", "vector"]))
    written = f"FROM '{tmp_path / 'o' / 'fused.parquet'}'"
    for a, b in (("FROM ds_fuse('log')", written), (written, "FROM ds_fuse('log')")):
        assert con.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b})").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM ds_fuse('log')").fetchone() == (40282,)


def test_installed_the_pack_refuses_too_and_ds_policy_names_its_sources(tmp_path: Path) -> None:
    db = tmp_path / "analysis.duckdb"
    done = CliRunner().invoke(cli, ["-q", "macros", "install", "--db", str(db)])
    assert done.exit_code == 0, done.output
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT ds_policy().sources").fetchone() == (
            ["dense", "sparse", "summary"],
        )
        con.execute(f"CREATE VIEW log AS {RENAMED}")
        with pytest.raises(duckdb.InvalidInputException, match="installed for sources dense"):
            con.execute("FROM ds_fuse('log')").fetchall()
        # the log cut to the pack's sources: the rows of the sources it fuses, no refusal
        con.execute("CREATE VIEW known AS FROM log WHERE source = 'summary'")
        assert con.execute("SELECT count(DISTINCT query_id) > 0 FROM ds_fuse('known')").fetchone()


def test_a_recipe_that_declares_its_sources_leaves_the_others_out_as_run_does(
    tmp_path: Path,
) -> None:
    recipe = tmp_path / "declared.yaml"
    recipe.write_text(
        "extends: canonical_rrf\nrecipe_id: declared\ndiscover_sources: false\n"
        "sources: {summary: {}}\n",
        encoding="utf-8",
    )
    con = connection(pack_script(recipe=str(recipe), sources=["summary"]))
    assert con.execute("SELECT ds_policy().sources").fetchone() == (["summary"],)
    fused = con.execute("SELECT count(*) FROM ds_fuse('log')").fetchone()
    assert fused is not None and fused[0] > 0
    # and a NULL source passes, as before: the macros trust their input but for what they fuse
    default = connection(pack_script(), f"SELECT * REPLACE (NULL AS source) FROM '{LOG}'")
    assert default.execute("SELECT count(*) FROM ds_fuse('log')").fetchone() == (0,)
