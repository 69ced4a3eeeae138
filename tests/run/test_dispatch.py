"""`run/dispatch.py`: `duckscore run` and `ds.run` reach the same engines — DuckDB, Spark, a
partition at a time — and refuse the same combinations with the same line.

Oracles: the command line's files on the same log, and the plain DuckDB run of the whole log
(scoring never looks across queries, so a partitioned or sharded run has its rows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import duckscore as ds
from duckscore.api.functions import connection
from duckscore.cli import cli
from duckscore.runner.dispatch import Unsupported

from ..api.test_python_api import same_rows
from ..engines.test_spark import assert_same_outputs, spark  # noqa: F401 (a fixture)
from ..helpers import SCIFACT
from .test_partitions import PER_DAY, data_files, write_days

LOG = SCIFACT / "retrieval_log.parquet"
PARTITIONED = ("--partition-by", "dt")
SPARK = ("--engine", "spark")


def test_ds_run_by_partition_writes_the_commands_outputs(tmp_path: Path) -> None:
    write_days(tmp_path / "logs", 1, 2)
    logs = str(tmp_path / "logs")
    done = CliRunner().invoke(
        cli, ["-q", "run", "--log", logs, *PARTITIONED, "--out", str(tmp_path / "cli")]
    )
    assert done.exit_code == 0, done.output
    ran = ds.run(logs, partition_by="dt", out=tmp_path / "api")
    assert data_files(tmp_path / "api") == data_files(tmp_path / "cli")
    assert ran.manifest["partition_by"] == "dt"
    assert len(ran.manifest["partitions"]) == 2
    whole = ds.run(f"{logs}/*/*.parquet")
    con = connection()
    for name in ("fused", "parent_features", "parents", "queries", "contract"):
        by_day, plain = getattr(ran, name), getattr(whole, name)
        assert "dt" in by_day.columns, name
        columns = ", ".join(f'"{c}"' for c in plain.columns)
        assert same_rows(
            con, by_day.select(columns).sql_query(), plain.select(columns).sql_query()
        ), name
    days = con.execute(
        f"SELECT dt::VARCHAR, count(*) FROM ({ran.queries.sql_query()}) GROUP BY ALL"
    ).fetchall()
    assert sorted(days) == [("2024-01-01", PER_DAY), ("2024-01-02", PER_DAY)]


# a refused option: its flags on the command line, its keywords of ds.run
OPTIONS = {
    "--queries": (("--queries", str(LOG)), {"queries": str(LOG)}),
    "--no-explain": (("--no-explain",), {"explain": False}),
    "--rerank-scores": (("--rerank-scores", str(LOG)), {"rerank_scores": str(LOG)}),
    "--log-format": (("--log-format", "openinference"), {"log_format": "openinference"}),
    "--unsorted": (("--unsorted",), {"unsorted": True}),
}
# where they are refused: the engine's flags and keywords, and the options it refuses
ENGINES = {
    "--engine spark yet": (SPARK, {"engine": "spark"}, tuple(OPTIONS)),
    "--partition-by": (PARTITIONED, {"partition_by": "dt"}, ("--queries", "--unsorted",
                                                             "--rerank-scores")),
}  # fmt: skip
REFUSALS = [
    (("--incremental",), {"incremental": True}, "--incremental needs --partition-by"),
    (("--force",), {"force": True}, "--force needs --partition-by"),
] + [
    ((*flags, *OPTIONS[option][0]), keywords | OPTIONS[option][1],
     f"{option} is not supported with {engine}")
    for engine, (flags, keywords, refused) in ENGINES.items()
    for option in refused
]  # fmt: skip


@pytest.mark.parametrize(("flags", "keywords", "message"), REFUSALS)
def test_a_refused_combination_is_the_same_line_from_the_command_and_the_api(
    flags: tuple[str, ...], keywords: dict[str, object], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["run", "--log", str(LOG), "--out", str(out), *flags]
    done = CliRunner().invoke(cli, args, prog_name="duckscore")
    assert done.exit_code == 2
    assert done.stderr == f"duckscore: error: {message} (see `duckscore run --help`)\n"
    with pytest.raises(Unsupported) as refused:
        ds.run(str(LOG), out=out, **keywords)  # type: ignore[arg-type]
    assert str(refused.value) == message
    assert not out.exists()


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"partition_by": "dt"}, "--partition-by writes an output folder: give --out"),
        ({"engine": "spark"}, "--engine spark writes an output folder: give --out"),
        ({"engine": "spark", "out": "o"}, "--log: --engine spark reads files (a path, glob or "
         "folder), not a DuckDBPyRelation"),
        ({"engine": "postgres"}, "--engine 'postgres': one of duckdb, spark"),
        ({"engine": "spark", "shards": 0}, "--shards must be at least 1, got 0"),
    ],
)  # fmt: skip
def test_what_only_the_api_can_ask_is_refused_in_one_line(
    keywords: dict[str, object], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    log = connection().read_parquet(str(LOG)) if keywords.get("out") else str(LOG)
    with pytest.raises(ds.DuckscoreError) as refused:
        ds.run(log, **keywords)  # type: ignore[arg-type]
    assert str(refused.value) == message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.spark
@pytest.mark.xdist_group("jvm")
def test_ds_run_on_spark_equals_the_duckdb_engine(spark, tmp_path: Path) -> None:  # noqa: F811
    tiny = tmp_path / "tiny.parquet"
    connection().execute(
        f"COPY (FROM read_parquet('{LOG}') WHERE query_id IN "
        f"(SELECT DISTINCT query_id FROM read_parquet('{LOG}') ORDER BY 1 LIMIT 6)) TO '{tiny}'"
    )
    on_duckdb = ds.run(str(tiny), out=tmp_path / "duck")
    on_spark = ds.run(str(tiny), engine="spark", shards=3, out=tmp_path / "spark")
    assert_same_outputs(tmp_path / "duck", tmp_path / "spark")
    con = connection()
    for name in ("fused", "parent_features", "parents", "queries", "contract"):
        left, right = getattr(on_duckdb, name), getattr(on_spark, name)
        assert same_rows(con, left.sql_query(), right.sql_query()), name
    assert on_spark.manifest["engine"] == "spark" and on_spark.manifest["shards"] == 3
    assert on_spark.recipe.version == on_duckdb.recipe.version
