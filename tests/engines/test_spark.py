"""`duckscore run --engine spark`: the log sharded by query_id on Spark, the same DuckDB SQL per
shard. Every output must equal the DuckDB engine's, row for row and type for type. The tests on
Spark skip where pyspark or a JVM is missing (install the `spark` extra) — but fail in CI; the
refusals run everywhere."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.resources import fixtures_dir
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run
from duckscore.runner.spark import run_on_spark

from ..helpers import ROOT, need, need_module

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("jvm")]  # one JVM for both Spark modules

TABLES = ("fused", "parent_features", "parents", "queries")
SCIFACT_LOG = fixtures_dir() / "scifact" / "retrieval_log.parquet"


@pytest.fixture(scope="module")
def spark():
    need(shutil.which("java") is not None, "a JVM")
    need_module("pyspark")
    from ..conftest import spark_session

    with spark_session() as session:
        yield session


def assert_same_outputs(duck: Path, spark_out: Path) -> None:
    con = duckdb.connect()
    for table in TABLES:
        a = f"read_parquet('{duck / (table + '.parquet')}')"
        b = f"read_parquet('{spark_out / (table + '.parquet')}/*.parquet')"
        assert (
            con.execute(f"DESCRIBE SELECT * FROM {a}").fetchall()
            == con.execute(f"DESCRIBE SELECT * FROM {b}").fetchall()
        ), table
        for left, right in ((a, b), (b, a)):
            extra = con.execute(
                f"SELECT count(*) FROM (SELECT * FROM {left} EXCEPT ALL SELECT * FROM {right})"
            ).fetchall()
            assert extra[0][0] == 0, (
                f"{table}: {extra[0][0]} rows of one engine are not in the other"
            )
    spark_lines = [
        line
        for part in sorted(glob.glob(str(spark_out / "contract.jsonl" / "part-*")))
        for line in Path(part).read_text().splitlines()
    ]
    duck_lines = (duck / "contract.jsonl").read_text().splitlines()
    assert spark_lines == sorted(duck_lines)  # written sorted; the same objects, byte for byte


@pytest.mark.spark
@pytest.mark.parametrize(
    ("recipe", "policy"),
    [
        (None, "overall_v3"),  # the defaults: canonical_rrf, and a policy with a p_good map
        ("hybrid_v1", "overall_v1"),
    ],
)
def test_scifact_equals_the_duckdb_engine(
    spark, tmp_path: Path, recipe: str | None, policy: str
) -> None:
    run(SCIFACT_LOG, tmp_path / "duck", Job(recipe=recipe, policy=policy))
    result = run_on_spark(
        SCIFACT_LOG, tmp_path / "spark", Job(recipe=recipe, policy=policy), shards=3
    )
    assert result.rows["queries"] == 300 and result.rows["parents"] == 40_282
    written = {  # every output's rows, as the DuckDB engine wrote them
        table: duckdb.sql(f"SELECT count(*) FROM '{tmp_path / 'duck' / table}.parquet'").fetchall()
        for table in TABLES
    }
    assert result.rows == {t: n[0][0] for t, n in written.items()} | {"contract": 300}
    assert_same_outputs(tmp_path / "duck", tmp_path / "spark")


# issue 50's optional blocks, which no packaged policy has: §13's diagnostics (the query_actions
# stage, actions on the contract, a rule raising need_hitl) and §4.4's smoothing
ISSUE_50_BLOCKS = (
    "diagnostics={single_spike: {actions: [raise_threshold, clarify], need_hitl: false}, "
    "ambiguous_candidate: {actions: [clarify], need_hitl: true}}",
    "coverage_smoothing={pseudo_chunks: 2, prior: 0.5}",
)


@pytest.mark.spark
def test_diagnostics_and_smoothing_equal_the_duckdb_engine(spark, tmp_path: Path) -> None:
    job = Job(policy="overall_v3", policy_overrides=ISSUE_50_BLOCKS)
    run(SCIFACT_LOG, tmp_path / "duck", job)
    run_on_spark(SCIFACT_LOG, tmp_path / "spark", job, shards=3)
    assert_same_outputs(tmp_path / "duck", tmp_path / "spark")


RECIPES = sorted(path.stem for path in (ROOT / "sql" / "fuse" / "recipes").glob("*.yaml"))
POLICIES = sorted(path.stem for path in (ROOT / "sql" / "score" / "policies").glob("*.yaml"))
CISI_LOG = fixtures_dir() / "cisi" / "retrieval_log.parquet"


@pytest.mark.spark
@pytest.mark.parametrize("log", [SCIFACT_LOG, CISI_LOG], ids=["scifact", "cisi"])
def test_every_packaged_recipe_and_policy_equals_the_duckdb_engine(
    spark, tmp_path: Path, log: Path
) -> None:
    """Issue 52 §1: the default (canonical_rrf, overall_v3) failed on Spark's 8 shards — DuckDB
    wrote top2_ratio NOT NULL in one shard and with NULLs in another. Every packaged recipe
    under the default policy, every packaged policy under both base recipes, in the CLI's 8
    shards: the recipe decides the fusion's columns, the policy the score's, and since every
    output is written all-nullable no pair of them decides anything a shard's schema does (the
    whole product, 48 runs, passed once: 17 min under a load of 11)."""
    assert len(RECIPES) >= 8 and len(POLICIES) >= 3
    pairs = [(recipe, DEFAULT_POLICY) for recipe in RECIPES] + [
        (recipe, policy)
        for recipe in ("canonical_rrf", "hybrid_v1")
        for policy in POLICIES
        if policy != DEFAULT_POLICY
    ]
    for recipe, policy in pairs:
        job = Job(recipe=recipe, policy=policy, allow_recipe_mismatch=True)
        folder = tmp_path / f"{recipe}-{policy}"
        run(log, folder / "duck", job)
        run_on_spark(log, folder / "spark", job, shards=8)
        assert_same_outputs(folder / "duck", folder / "spark")
        shutil.rmtree(folder)


def test_the_rows_written_are_read_from_the_parts_unless_a_text_part_is_compressed(
    tmp_path: Path,
) -> None:
    """The manifest's rows of an unpartitioned output: a Parquet part's footer, a plain text
    part's lines (Spark's names, part-*.txt); a compressed text part (a cluster's Hadoop
    settings: part-*.txt.gz) is left to Spark to count, never its bytes' newlines."""
    from duckscore.runner.spark import _rows_written

    table = tmp_path / "t.parquet"
    table.mkdir()
    for i, n in enumerate((3, 0, 2)):
        pq.write_table(pa.table({"x": list(range(n))}), table / f"part-0000{i}-c000.snappy.parquet")
    (table / ".part-00000-c000.snappy.parquet.crc").write_bytes(b"\n\n")
    assert _rows_written(table, text=False) == 5
    lines = tmp_path / "contract.jsonl"
    lines.mkdir()
    (lines / "part-00000-c000.txt").write_text('{"a":1}\n{"a":2}\n')
    (lines / "part-00001-c000.txt").write_text("")
    assert _rows_written(lines, text=True) == 2
    (lines / "part-00002-c000.txt.gz").write_bytes(b"\x1f\x8b\n\n\n")
    assert _rows_written(lines, text=True) is None


def test_shards_whose_columns_differ_in_nullability_decode_to_one_schema() -> None:
    """The bundle's payloads decoded for Spark's writer: a shard whose column DuckDB wrote NOT
    NULL and a shard with NULLs in it (lists and structs too) cast to one all-nullable schema."""
    from duckscore.runner.spark import _bundle, _Decode, _ipc, _nullable

    strict = pa.schema(
        [pa.field("x", pa.float64(), nullable=False),
         pa.field("xs", pa.list_(pa.field("item", pa.string(), nullable=False)), nullable=False),
         pa.field("s", pa.struct([pa.field("a", pa.int64(), nullable=False)]), nullable=False)]
    )  # fmt: skip
    first = pa.table({"x": [1.0], "xs": [["a"]], "s": [{"a": 1}]}, schema=strict)
    loose = pa.table({"x": [None], "xs": [None], "s": [None]}, schema=_nullable(strict))
    schema = _nullable(first.schema)
    assert all(f.nullable for f in schema) and schema.field("xs").type.value_field.nullable
    assert schema.field("s").type.field("a").nullable
    decoded = list(_Decode(schema)(iter([_bundle("t", _ipc(first)), _bundle("t", _ipc(loose))])))
    assert [b.schema for b in decoded] == [schema, schema]
    assert [b.to_pylist() for b in decoded] == [
        [{"x": 1.0, "xs": ["a"], "s": {"a": 1}}],
        [{"x": None, "xs": None, "s": None}],
    ]


@pytest.mark.spark
def test_edge_logs_equal_the_duckdb_engine(spark, tmp_path: Path) -> None:
    # one query alone in a shard, all-equal scores (ties), a missing source, unicode ids, more
    # shards than queries (empty shards)
    rows = []
    for source, scores in (("bm25", [3.0, 3.0, 3.0]), ("dense", [0.5, 0.5, 0.2])):
        for rank, score in enumerate(scores, start=1):
            rows.append(("q-ü", source, f"{source}-{rank}", f"文档{rank % 2}", score, rank))
    rows += [
        ("q_single", "bm25", "only", "p1", 1.0, 1),
        ("q_two", "dense", "a", "pa", 0.9, 1),
        ("q_two", "dense", "b", "pb", 0.9, 2),
    ]
    log = tmp_path / "log.parquet"
    pd.DataFrame(
        rows, columns=["query_id", "source", "item_id", "parent_id", "score", "rank"]
    ).to_parquet(log)
    run(log, tmp_path / "duck", Job(recipe="canonical_rrf"))
    run_on_spark(log, tmp_path / "spark", Job(recipe="canonical_rrf"), shards=7)
    assert_same_outputs(tmp_path / "duck", tmp_path / "spark")


@pytest.mark.spark
def test_a_bad_shard_is_one_line_and_writes_nothing(spark, tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    pd.DataFrame(
        {
            "query_id": ["q1", "q2"],
            "source": ["bm25", "bm25"],
            "item_id": ["a", "b"],
            "parent_id": ["p", "p"],
            "score": [1.0, float("nan")],
            "rank": [1, 1],
        }
    ).to_parquet(log)
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--engine",
            "spark",
            "--log",
            str(log),
            "--out",
            str(tmp_path / "out"),
            "--shards",
            "2",
        ],
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert (
        "log.parquet, a query_id shard, query_id='q2', source='bm25', item_id='b'): column 'score' is null"
        in result.stderr
    )
    assert not (tmp_path / "out").exists()


def test_queries_option_is_refused_with_spark(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--engine",
            "spark",
            "--log",
            str(SCIFACT_LOG),
            "--queries",
            str(SCIFACT_LOG),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert (
        result.exit_code == 2 and "--queries is not supported with --engine spark" in result.stderr
    )


@pytest.mark.spark
def test_partitions_in_one_spark_job_equal_the_duckdb_engine(spark, tmp_path: Path) -> None:
    """`--partition-by dt` on Spark: the stale days in one job, each day's outputs those of the
    DuckDB engine's partitioned run, and the next --incremental run computes only the new day."""
    from ..run.test_partitions import day, ledger, write_days

    write_days(tmp_path / "logs", 1, 3)
    options = ["--log", str(tmp_path / "logs"), "--partition-by", "dt", "--incremental"]
    for engine in ("duckdb", "spark"):
        result = CliRunner().invoke(
            cli, ["run", "--engine", engine, *options, "--out", str(tmp_path / engine)]
        )
        assert result.exit_code == 0, result.output
    for name in (f"dt={day(n)}" for n in (1, 2, 3)):
        duck, on_spark = tmp_path / "duck-day", tmp_path / "spark-day"
        for table in (*TABLES, "contract"):
            suffix = "jsonl" if table == "contract" else "parquet"
            (duck / f"{table}.{suffix}").parent.mkdir(exist_ok=True)
            shutil.copy(
                tmp_path / "duckdb" / table / name / f"part.{suffix}", duck / f"{table}.{suffix}"
            )
            shutil.copytree(tmp_path / "spark" / table / name, on_spark / f"{table}.{suffix}")
        assert_same_outputs(duck, on_spark)
        shutil.rmtree(duck)
        shutil.rmtree(on_spark)
    assert {e["rows"]["queries"] for e in ledger(tmp_path / "spark").values()} == {10}
    write_days(tmp_path / "logs", 4, 4)
    result = CliRunner().invoke(
        cli, ["--progress", "run", "--engine", "spark", *options, "--out", str(tmp_path / "spark")]
    )
    assert result.exit_code == 0 and "1 to compute, 3 kept" in result.output, result.output
    assert sorted(ledger(tmp_path / "spark")) == [day(n) for n in (1, 2, 3, 4)]
