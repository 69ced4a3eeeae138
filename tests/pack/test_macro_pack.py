"""The macro pack: the building blocks as DuckDB macros, checked without duckscore in the room.

Every scalar macro runs the hand-computed fixture of its building block
(tests/macros/cases/<block>.yaml): each case's Jinja call is rewritten into a call of the DuckDB
macro and evaluated on a connection that only ran the script. A fresh Python process that
imports duckdb alone reads the script, and `ds_rrf` summed over the SciFact log's document ranks
reproduces the data set's reference RRF(k=60) run.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import pytest
import yaml
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.core.render import ColumnParameter, column, lit
from duckscore.pack.install import pack_script

from ..helpers import SCIFACT, same_value

CASES = Path(__file__).parents[1] / "macros" / "cases"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def sql_arguments(required: int, names: list[str], args: tuple, kwargs: dict) -> list[str]:
    """The first `required` arguments positionally (SQL text), the others as `name := value`."""
    given = dict(zip(names, args)) | kwargs
    written = [str(given[name]) for name in names[:required]]
    written += [f"{name} := {lit(given[name])}" for name in names[required:] if name in given]
    return written


def writer(name: str, required: int, names: list[str]) -> Callable[..., str]:
    def call(*args: Any, **kwargs: Any) -> str:
        return f"ds_{name}({', '.join(sql_arguments(required, names, args, kwargs))})"

    return call


def wilson(successes: str, trials: str, z: float = 1.96, bound: str = "lower") -> str:
    return f"ds_wilson_{bound}({successes}, {trials}, z := {lit(z)})"


def geomean(terms: list[tuple[str, float | ColumnParameter]], floor: float | None = None) -> str:
    pairs = [f"{expr}, {lit(weight)}" for expr, weight in terms]
    return f"ds_weighted_geomean({', '.join(pairs)}{'' if floor is None else f', floor := {lit(floor)}'})"


def bands(x: str, given: list[dict[str, float]]) -> str:
    pairs = [f"{lit(band['at_least'])}, {lit(band['points'])}" for band in given[:-1]]
    return f"ds_band_points({x}, {', '.join(pairs) or 'NULL, NULL'}, otherwise := {lit(given[-1]['points'])})"


def rank(score: str, partition_by: list[str], tie_breaker: str) -> str:
    (partition,) = partition_by
    return f"ds_rank_desc({score}, {partition}, {tie_breaker})"


CALLS: dict[str, Callable[..., str]] = {
    "band_points": bands,
    "rank_desc": rank,
    "rrf": writer("rrf", 1, ["rank", "k", "weight"]),
    "log_scale": writer("log_scale", 1, ["x", "shift"]),
    "clamp": writer("clamp", 1, ["x", "lo", "hi"]),
    "quantile_norm": writer("quantile_norm", 3, ["x", "lo", "hi", "eps", "zero_spread_value"]),
    "wilson_interval": wilson,
    "weighted_geomean": geomean,
}


def as_macro_call(expression: str) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["lit"] = lit
    env.globals.update(CALLS, column=column)
    return env.from_string(expression).render().strip()


def cases() -> list[Any]:
    found = []
    for path in sorted(CASES.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in document["cases"]:
            if case.get("error"):
                continue  # render-time refusals of the building block, not values
            found.append(pytest.param(case, id=f"{path.stem}: {case['title'][:40]}"))
    return found


@pytest.fixture(scope="module")
def packed() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(pack_script())
    return con


@pytest.mark.parametrize("case", cases())
def test_every_scalar_macro_on_its_building_blocks_fixture(
    packed: duckdb.DuckDBPyConnection, case: dict
) -> None:
    con = packed.cursor()
    columns = case["columns"]
    definition = ", ".join(f'"{name}" {dtype}' for name, dtype in columns.items())
    con.execute(f"CREATE OR REPLACE TEMP TABLE t (__row INTEGER, {definition})")
    con.executemany(
        f"INSERT INTO t VALUES ({', '.join('?' for _ in range(len(columns) + 1))})",
        [[i, *(row[c] for c in columns)] for i, row in enumerate(case["rows"])],
    )
    call = as_macro_call(case["expression"])
    assert call.startswith("ds_"), call
    actual = con.execute(f"SELECT {call} FROM t ORDER BY __row").fetchall()
    for index, ((value,), row) in enumerate(zip(actual, case["rows"])):
        assert same_value(value, row["expected"]), f"{call}, row {index}: got {value!r}"


def test_every_building_block_is_packed() -> None:
    blocks = {yaml.safe_load(p.read_text())["macro"] for p in CASES.glob("*.yaml")}
    assert blocks == set(CALLS)


RRF_OVER_THE_LOG = """
import sys, duckdb
con = duckdb.connect()
con.execute(open(sys.argv[1]).read())
log, reference = sys.argv[2], sys.argv[3]
worst, n, default_k, policy = con.execute(f'''
    WITH documents AS (
        SELECT query_id, source, parent_id, min(rank) AS best FROM '{log}' GROUP BY ALL),
    ranked AS (
        SELECT *, row_number() OVER (PARTITION BY query_id, source
                                     ORDER BY best, parent_id) AS doc_rank FROM documents),
    fused AS (SELECT query_id, parent_id, sum(ds_rrf(doc_rank)) AS score FROM ranked GROUP BY ALL)
    SELECT max(abs(score - rrf_score)), count(*), any_value(ds_rrf(1, k := 60)) = ds_rrf(1),
           ds_policy().recipe
    FROM fused FULL JOIN '{reference}' USING (query_id, parent_id)''').fetchone()
print(worst, n, default_k, policy)
"""


def test_a_process_without_duckscore_reads_the_script_and_fuses_scifact(tmp_path: Path) -> None:
    script = tmp_path / "duckscore.sql"
    done = invoke("sql", "macros")
    assert done.exit_code == 0, done.stderr
    script.write_text(done.stdout)
    ran = subprocess.run(
        [sys.executable, "-I", "-c", RRF_OVER_THE_LOG, str(script),
         str(SCIFACT / "retrieval_log.parquet"), str(SCIFACT / "reference_rrf_k60.parquet")],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    worst, rows, default_k, recipe = ran.stdout.split()
    assert float(worst) < 1e-12 and rows == "40282" and default_k == "True"
    assert recipe == "canonical_rrf"


def test_install_persists_and_replaces(tmp_path: Path) -> None:
    db = tmp_path / "analysis.duckdb"
    first = CliRunner().invoke(cli, ["macros", "install", "--db", str(db)])  # not -q: its message
    assert (first.exit_code, first.stdout) == (0, ""), first.stderr
    assert first.stderr.startswith(f"duckscore: installed 18 macros into {db}: ds_policy, ds_rrf, ")
    again = invoke("macros", "install", "--db", str(db), "--set-recipe", "fusion.k=20")
    assert again.exit_code == 0, again.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        value, recipe = con.execute("SELECT ds_rrf(1), ds_policy().recipe").fetchone()  # type: ignore[misc]
        macros = con.execute(
            "SELECT count(*) FROM duckdb_functions() WHERE function_name LIKE 'ds\\_%' ESCAPE '\\'"
        ).fetchone()
    assert value == pytest.approx(1 / 21, rel=1e-15) and recipe.startswith("canonical_rrf+")
    assert macros == (18,)


def test_policy_values_are_the_defaults() -> None:
    con = duckdb.connect()
    con.execute(pack_script(overrides=["normalization.eps=0.5", "subscore_floor=0.2"]))
    norm, floor_only = con.execute(
        "SELECT ds_quantile_norm(1, 0, 1), ds_weighted_geomean(0.1, 1, 0.1, 1)"
    ).fetchone()  # type: ignore[misc]
    assert norm == pytest.approx(1 / 1.5) and floor_only == pytest.approx(0.2)


@pytest.mark.parametrize("prefix", ["1x", "ds-", "", "a b"])
def test_a_bad_prefix_is_one_line(prefix: str) -> None:
    done = invoke("sql", "macros", "--prefix", prefix)
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.startswith(f"duckscore: error: --prefix {prefix!r}: ")
    assert done.stderr.count("\n") == 1


def test_a_database_that_is_not_one_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "notes.duckdb"
    db.write_text("not a database\n")
    done = invoke("macros", "install", "--db", str(db))
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"duckscore: error: --db {db}: cannot install the macros (")
    assert db.read_text() == "not a database\n"
