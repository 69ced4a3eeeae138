"""Issue 35 §3.3: in the macro pack a NaN score became 1.0 (`greatest(0, least(1, NaN))` is 1 in
DuckDB, where NaN is larger than every number) or sorted first, and changed a query's best
parent. The commands refuse NaN and ±inf in their inputs; the macros now do what they can:

- the table macros (`ds_fuse`, `ds_score`, `ds_queries`, `ds_eval` …) refuse the query with
  DuckDB's `error()`, naming the macro, the column and the row, as the command refuses the file;
- a scalar macro reads a NaN argument as NULL: its result is NULL (never 1.0), and
  `ds_rank_desc` ranks it last, with the NULLs.

Everything runs on a plain DuckDB connection that only ran the pack's script, as a user's does.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.pack.install import pack_script

NAN = "'NaN'::DOUBLE"


@pytest.fixture(scope="module")
def script() -> str:
    return pack_script(policy="overall_v1")


@pytest.fixture()
def con(script: str) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute(script)
    return connection


FEATURES = """CREATE OR REPLACE TABLE features AS SELECT * FROM (VALUES
    ('q1', 'P1', 0.05, 0.9, 3.0, 9, 0.5),
    ('q1', 'P2', 0.03, 0.7, 2.0, 4, 0.5),
    ('q1', 'P3', 0.01, 0.2, 1.0, 19, 0.05)
) AS t(query_id, parent_id, rrf_sum, max_score, coverage, total_chunks, coverage_ratio)"""


def features(con: duckdb.DuckDBPyConnection, column: str, parent: str) -> None:
    """Seed 000's worked example with one value NaN."""
    con.execute(FEATURES)
    con.execute(f"ALTER TABLE features ALTER {column} TYPE DOUBLE")
    con.execute(f"UPDATE features SET {column} = {NAN} WHERE parent_id = '{parent}'")


def test_the_best_parent_is_not_changed_by_a_nan(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(FEATURES)
    best = con.execute("SELECT best_parent_id FROM ds_queries('features')").fetchall()
    assert best == [("P1",)]
    # before the fix: P2's NaN coverage_ratio made its score NaN, ranked first: best parent P2
    features(con, "coverage_ratio", "P2")
    with pytest.raises(duckdb.InvalidInputException) as refused:
        con.execute("SELECT best_parent_id FROM ds_queries('features')").fetchall()
    message = str(refused.value)
    assert "ds_queries: features.coverage_ratio is NaN or infinite" in message
    assert "query_id='q1', parent_id='P2'" in message


@pytest.mark.parametrize("column", ["rrf_sum", "max_score", "coverage", "coverage_ratio"])
@pytest.mark.parametrize("macro", ["ds_score", "ds_queries"])
def test_every_number_of_the_features_is_checked(
    con: duckdb.DuckDBPyConnection, column: str, macro: str
) -> None:
    features(con, column, "P3")  # before: P3's NaN became 1.0 in its sub-score
    with pytest.raises(
        duckdb.InvalidInputException, match=re.escape(f"{macro}: features.{column} is NaN")
    ):
        con.execute(f"FROM {macro}('features')").fetchall()
    con.execute(f"UPDATE features SET {column} = 'inf'::DOUBLE WHERE parent_id = 'P3'")
    with pytest.raises(duckdb.InvalidInputException, match="is NaN or infinite"):
        con.execute(f"FROM {macro}('features')").fetchall()


LOG = """CREATE OR REPLACE TABLE log AS SELECT * FROM (VALUES
    ('q1', 'c1', 'P1', 'dense', 1, 0.9::DOUBLE), ('q1', 'c2', 'P2', 'dense', 2, 0.5),
    ('q1', 'c3', 'P3', 'dense', 3, 0.1), ('q1', 'c1', 'P1', 'sparse', 1, 12.0),
    ('q1', 'c3', 'P3', 'sparse', 2, 3.0), ('q1', 'c2', 'P2', 'sparse', 3, 1.0)
) AS t(query_id, item_id, parent_id, source, rank, score)"""


def test_a_nan_score_in_the_log_is_refused_as_duckscore_fuse_refuses_it(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    con.execute(LOG)
    top = "SELECT item_id FROM ds_fuse('log') ORDER BY rank LIMIT 1"
    assert con.execute(top).fetchall() == [("P1",)]
    con.execute(f"UPDATE log SET score = {NAN} WHERE item_id = 'c2' AND source = 'dense'")
    # before the fix: P2's NaN dense score ranked first with norm_score 1.0
    for macro in ("ds_fuse", "ds_parent_features"):
        with pytest.raises(duckdb.InvalidInputException) as refused:
            con.execute(f"FROM {macro}('log')").fetchall()
        assert f"{macro}: log.score is NaN or infinite" in str(refused.value)
    # the command refuses the same log
    con.execute(f"COPY log TO '{tmp_path / 'log.parquet'}'")
    done = CliRunner().invoke(cli, ["-q", "fuse", "--log", str(tmp_path / "log.parquet"),
                                    "--out", str(tmp_path / "out")])  # fmt: skip
    assert done.exit_code == 2 and "column 'score' is NaN or infinite" in done.stderr


def test_ds_eval_and_ds_labels_refuse_a_nan_score_or_relevance(
    con: duckdb.DuckDBPyConnection,
) -> None:
    con.execute(
        f"CREATE TABLE run AS SELECT * FROM (VALUES ('q1', 'a', 0.2), ('q1', 'b', {NAN})) "
        "AS t(query_id, doc_id, score)"
    )
    con.execute(
        "CREATE TABLE qrels AS SELECT * FROM (VALUES ('q1', 'a', 1.0::DOUBLE), ('q1', 'b', 0.0)) "
        "AS t(query_id, doc_id, relevance)"
    )
    for macro in ("ds_eval", "ds_labels"):
        # before the fix: the NaN went through (as -NaN ascending: b ranked last), where
        # `duckscore eval` and `labels` refuse the run
        with pytest.raises(
            duckdb.InvalidInputException, match=re.escape(f"{macro}: run.score is NaN")
        ):
            con.execute(f"FROM {macro}('run', 'qrels')").fetchall()
    con.execute("UPDATE run SET score = 0.1 WHERE doc_id = 'b'")
    assert con.execute("SELECT ndcg FROM ds_eval('run', 'qrels')").fetchall() == [(1.0,)]
    con.execute(f"UPDATE qrels SET relevance = {NAN} WHERE doc_id = 'b'")
    with pytest.raises(
        duckdb.InvalidInputException, match=re.escape("ds_eval: qrels.relevance is NaN")
    ):
        con.execute("FROM ds_eval('run', 'qrels')").fetchall()


@pytest.mark.parametrize(
    "call",
    [
        "ds_clamp({})",
        "ds_quantile_norm({}, 0.1, 0.5)",
        "ds_band_points({}, 0.5, 1.0)",
        "ds_weighted_geomean({}, 0.5, 0.3, 0.5)",
        "ds_log_scale({})",
        "ds_rrf({})",
        "ds_wilson_lower({}, 10)",
        "ds_wilson_upper(3, {})",
    ],
)
def test_a_scalar_macro_of_nan_is_null(con: duckdb.DuckDBPyConnection, call: str) -> None:
    # before the fix: ds_clamp, ds_quantile_norm and ds_band_points gave 1.0, the others NaN
    assert con.execute(f"SELECT {call.format(NAN)}").fetchall() == [(None,)]


@pytest.mark.parametrize(
    "call",
    [
        "ds_clamp(0.5, lo := {})",
        "ds_clamp(1.5, hi := {})",
        "ds_quantile_norm(0.3, {}, 0.5)",
        "ds_quantile_norm(0.3, 0.1, {})",
        "ds_quantile_norm(0.3, 0.1, 0.5, eps := {})",
        "ds_quantile_norm(0.1, 0.1, 0.1, zero_spread_value := {})",
        "ds_band_points(0.7, {}, 1.0, 0.2, 0.5)",
        "ds_band_points(0.7, 0.5, {})",
        "ds_band_points(0.1, 0.5, 1.0, otherwise := {})",
        "ds_weighted_geomean(0.4, {}, 0.3, 0.5)",
        "ds_weighted_geomean(0.4, 0.5, 0.3, 0.5, floor := {})",
        "ds_log_scale(0.5, shift := {})",
        "ds_rrf(1, k := {})",
        "ds_rrf(1, weight := {})",
        "ds_wilson_lower(3, 10, z := {})",
    ],
)
def test_a_nan_argument_is_read_as_null(con: duckdb.DuckDBPyConnection, call: str) -> None:
    """Whatever the parameter, NaN gives what NULL gives (before the fix, NaN or 1.0)."""
    with_nan = con.execute(f"SELECT {call.format(NAN)}").fetchall()
    assert with_nan == con.execute(f"SELECT {call.format('NULL')}").fetchall()
    assert with_nan[0][0] is None or with_nan[0][0] == with_nan[0][0]  # never NaN


def test_a_nan_in_a_parquet_file_is_read_as_null_too(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    # pyarrow's Parquet statistics leave NaN out (min 0.4, max 0.9 here), and DuckDB folded
    # `isnan(x)` to false from them: before, ds_clamp of the NaN rows gave 1.0 from a file
    path = tmp_path / "scores.parquet"
    scores = pa.array([0.9, float("nan"), 0.4, float("nan")], from_pandas=False)
    pq.write_table(pa.table({"id": ["a", "b", "c", "d"], "score": scores}), path)
    rows = con.execute(
        f"SELECT id, ds_clamp(score), ds_log_scale(score) FROM read_parquet('{path}') ORDER BY id"
    ).fetchall()
    assert [(i, c) for i, c, _ in rows] == [("a", 0.9), ("b", None), ("c", 0.4), ("d", None)]
    assert [s is None for _, _, s in rows] == [False, True, False, True]


def test_a_nan_ranks_last_with_the_nulls(con: duckdb.DuckDBPyConnection) -> None:
    ranked = con.execute(
        "SELECT id, ds_rank_desc(score, query_id, id) AS r FROM (VALUES "
        f"('q', 'a', 0.5), ('q', 'b', {NAN}), ('q', 'c', NULL), ('q', 'd', 0.9)) "
        "AS t(query_id, id, score) ORDER BY r"
    ).fetchall()
    assert ranked == [("d", 1), ("a", 2), ("b", 3), ("c", 4)]  # before: b first


def test_finite_values_are_unchanged(con: duckdb.DuckDBPyConnection) -> None:
    row = con.execute(
        "SELECT ds_clamp(1.5), ds_quantile_norm(0.3, 0.1, 0.5), ds_band_points(0.7, 0.5, 1.0), "
        "ds_rrf(1), ds_log_scale(0.0), ds_weighted_geomean(0.25, 0.5, 1.0, 0.5)"
    ).fetchone()
    assert row is not None
    assert row[0] == 1.0 and row[2] == 1.0 and row[3] == 1 / 61 and row[4] == 0.0
    assert row[1] == pytest.approx(0.5) and row[5] == pytest.approx(0.5)


def test_an_installed_database_refuses_too(tmp_path: Path) -> None:
    db = tmp_path / "pack.duckdb"
    done = CliRunner().invoke(cli, ["-q", "macros", "install", "--db", str(db),
                                    "--policy", "overall_v1"])  # fmt: skip
    assert done.exit_code == 0, done.output
    with duckdb.connect(str(db)) as con:
        assert con.execute(f"SELECT ds_clamp({NAN})").fetchall() == [(None,)]
        features(con, "rrf_sum", "P1")
        with pytest.raises(
            duckdb.InvalidInputException, match=re.escape("features.rrf_sum is NaN")
        ):
            con.execute("FROM ds_score('features')").fetchall()
