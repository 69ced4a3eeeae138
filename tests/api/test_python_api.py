"""`import duckscore as ds`: the same rows from every kind of input, relations as results, files
only with `out` (and then exactly the command's), the macro pack on ds.connect().

The oracle is the command line on the same data: `duckscore run`, `eval` and `answers` write the
files the API's relations are compared with.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from click.testing import CliRunner

import duckscore as ds
from duckscore.cli import cli
from duckscore.core.errors import InputError

from ..helpers import FIXTURES, SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
QRELS = SCIFACT / "qrels.parquet"


def cli_ok(*args: str) -> str:
    done = CliRunner().invoke(cli, ["-q", *args])
    assert done.exit_code == 0, done.stderr
    return done.stdout


def same_rows(con: duckdb.DuckDBPyConnection, left: str, right: str) -> bool:
    differing = con.execute(
        f"SELECT (SELECT count(*) FROM ({left} EXCEPT ALL {right})) "
        f"+ (SELECT count(*) FROM ({right} EXCEPT ALL {left}))"
    ).fetchall()  # to the end: DuckDB keeps a connection busy until a result is read out
    return differing == [(0,)]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "out"
    cli_ok("run", "--log", str(LOG), "--out", str(out))
    return out


def as_objects(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    frame = pd.read_parquet(LOG)
    other = duckdb.connect()
    return {
        "path": str(LOG),
        "pandas": frame,
        "pandas, reversed view": frame[::-1],
        "polars": pl.read_parquet(LOG),
        "arrow table": pa.Table.from_pandas(frame, preserve_index=False),
        "arrow dataset": pads.dataset(str(LOG)),
        "relation": con.sql(f"FROM '{LOG}'"),
        "relation of another connection": other.sql(f"FROM '{LOG}'"),
    }


@pytest.mark.extended  # 50 s: make test's 15 minutes (docs/testing.md)
@pytest.mark.slow
def test_every_kind_of_input_gives_the_commands_rows(cli_run: Path, tmp_path: Path) -> None:
    con = ds.connect()
    fingerprints = set()
    for kind, given in as_objects(con).items():
        ran = ds.run(given, con=con)
        for name in ("fused", "parent_features", "parents", "queries"):
            relation = getattr(ran, name)
            assert same_rows(con, relation.sql_query(), f"FROM '{cli_run / name}.parquet'"), (
                kind,
                name,
            )
        contract = f"FROM read_json('{cli_run / 'contract.jsonl'}')"
        assert same_rows(con, ran.contract.sql_query(), contract), kind
        (log_input,) = ran.manifest["inputs"]["log"]["files"]
        fingerprints.add(log_input["sha256"] if kind != "path" else "file")
    # the content fingerprint of an object does not depend on its kind (nor on row order)
    assert len(fingerprints - {"file"}) == 1


def test_without_out_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    fused = ds.fuse(str(LOG), "canonical_rrf", explain=False)
    assert fused.fused.aggregate("count(*)").fetchall() == [(40282,)]
    assert fused.recipe.version == "canonical_rrf"
    assert list(tmp_path.iterdir()) == []


def test_with_out_the_outputs_are_the_commands(cli_run: Path, tmp_path: Path) -> None:
    ran = ds.run(str(LOG), out=tmp_path / "api")
    written = sorted(p.name for p in (tmp_path / "api").iterdir())
    assert written == sorted(p.name for p in cli_run.iterdir())
    con = duckdb.connect()
    for name in ("fused", "parent_features", "parents", "queries"):
        assert same_rows(
            con, f"FROM '{tmp_path / 'api' / name}.parquet'", f"FROM '{cli_run / name}.parquet'"
        )
    assert (tmp_path / "api" / "contract.jsonl").read_bytes() == (
        cli_run / "contract.jsonl"
    ).read_bytes()
    manifest = json.loads((tmp_path / "api" / "manifest.json").read_text())
    assert manifest["policy"] == json.loads((cli_run / "manifest.json").read_text())["policy"]
    assert ran.queries.aggregate("count(*)").fetchall() == [(300,)]


def test_eval_gives_the_commands_means(cli_run: Path) -> None:
    metrics = "ndcg@10,recall@100,map"
    printed = json.loads(
        cli_ok("eval", "--run", str(cli_run / "fused.parquet"), "--qrels", str(QRELS),
               "--metrics", metrics, "--json")
    )  # fmt: skip
    evaluated = ds.eval(pl.read_parquet(cli_run / "fused.parquet"), str(QRELS), metrics)
    assert evaluated.means == printed
    assert evaluated.per_query.aggregate("count(*)").fetchall() == [(300,)]


LOC_LINES = [
    {"instance_id": "a", "found_files": ["x.py", "g.py"], "found_modules": ["g.py:G"],
     "found_entities": ["g.py:G.__init__"], "raw_output_loc": []},
    {"instance_id": "b", "found_files": ["h.py"], "found_modules": [], "found_entities": [],
     "raw_output_loc": []},
]  # fmt: skip
LOC_GOLD = pd.DataFrame(
    {"instance_id": ["a", "a", "a", "b", "c"], "level": ["file", "module", "function", "file", "file"],
     "location": ["g.py", "g.py:G", "g.py:G", "h.py", "c.py"]}
)  # fmt: skip


def test_eval_loc_gives_the_commands_means(tmp_path: Path) -> None:
    """By hand, file level (k 1, 3): a finds g.py second, b h.py first, c has no line: Acc@1
    1/3, Acc@3 2/3, MAP@3 (1/2 / 3 + 1/1 / 3 + 0) / 3. Function level: a's G.__init__ is G."""
    loc = tmp_path / "loc_outputs.jsonl"
    loc.write_text("".join(json.dumps(line) + "\n" for line in LOC_LINES), encoding="utf-8")
    gold = tmp_path / "gold.csv"
    LOC_GOLD.to_csv(gold, index=False)
    options = ("--k", "file=1,3", "--k", "module=1", "--k", "function=1")
    printed = cli_ok("eval", "--loc", str(loc), "--gold", str(gold), *options, "--json")
    evaluated = ds.eval_loc(loc, LOC_GOLD, k=["file=1,3", "module=1", "function=1"])
    assert json.dumps(evaluated.means.as_record()) == printed.strip()
    file = evaluated.means.file
    assert file is not None
    assert (file["Acc@1"], file["Acc@3"]) == (1 / 3, 2 / 3)
    assert file["MAP@3"] == pytest.approx((1 / 2 / 3 + 1 / 3) / 3, abs=1e-15)
    assert evaluated.means.function == {"Acc@1": 1.0, "NDCG@1": 1.0, "P@1": 1.0,
                                        "Recall@1": 1.0, "MAP@1": 1.0}  # fmt: skip
    assert (evaluated.summaries["file"].evaluated, evaluated.ignored) == (3, 0)
    assert evaluated.per_query.filter("level = 'file'").order("instance_id").project(
        'instance_id, "Acc@3"'
    ).fetchall() == [("a", 1.0), ("b", 1.0), ("c", 0.0)]
    only_files = ds.eval_loc(loc, gold, levels="file")
    assert only_files.means.as_record() == json.loads(
        cli_ok("eval", "--loc", str(loc), "--gold", str(gold), "--levels", "file", "--json")
    )
    assert only_files.means.module is None and only_files.means.function is None


def test_eval_loc_reads_a_code_runs_lines_as_they_are_returned(tmp_path: Path) -> None:
    """A run's `loc_outputs` (the lines as dicts) is evaluated as its file is; a bad line is
    refused naming its position in the list."""
    loc = tmp_path / "loc_outputs.jsonl"
    loc.write_text("".join(json.dumps(line) + "\n" for line in LOC_LINES), encoding="utf-8")
    from_file = ds.eval_loc(loc, LOC_GOLD, levels="file,module")
    from_lines = ds.eval_loc(LOC_LINES, LOC_GOLD, levels="file,module")
    assert from_lines.means == from_file.means and from_lines.means.module is not None
    with pytest.raises(InputError, match=r"^--loc \(<list>, line 2\): found_files is not a list"):
        ds.eval_loc(
            [LOC_LINES[0], {**LOC_LINES[1], "found_files": "h.py"}], LOC_GOLD, levels="file"
        )


def test_answers_give_the_commands_rows(tmp_path: Path) -> None:
    folder = FIXTURES / "answers"
    tables = {name: str(folder / f"{name}.csv") for name in ("answers", "citations", "chunks")}
    cli_ok("answers", *(a for n, p in tables.items() for a in (f"--{n}", p)), "--out",
           str(tmp_path / "cli"))  # fmt: skip
    con = ds.connect()
    answered = ds.answers(
        pd.read_csv(tables["answers"], dtype=str).astype({"retrieved_count": int}),
        tables["citations"],
        tables["chunks"],
        con=con,
    )
    assert same_rows(
        con, answered.answers.sql_query(), f"FROM '{tmp_path / 'cli' / 'answers.parquet'}'"
    )


def test_answer_v2_inputs_give_the_commands_rows(tmp_path: Path) -> None:
    folder = FIXTURES / "answers"
    tables = {name: str(folder / f"{name}.csv") for name in ("answers", "citations", "chunks")}
    logprobs = pd.DataFrame({"answer_id": ["seed_high"] * 3 + ["seed_low"] * 2,
                             "token_index": [0, 1, 2, 0, 1],
                             "logprob": [-0.1, -0.5, -2.0, -3.0, -0.2]})  # fmt: skip
    feedback = pd.DataFrame({"answer_id": ["seed_medium", "seed_low"], "rating": [1.0, -1.0],
                             "given_at": pd.to_datetime(["2024-04-01", "2024-04-20"])})  # fmt: skip
    logprobs.to_csv(tmp_path / "logprobs.csv", index=False)
    feedback.to_parquet(tmp_path / "feedback.parquet")
    cli_ok("answers", *(a for n, p in tables.items() for a in (f"--{n}", p)), "--policy",
           "answer_v2", "--logprobs", str(tmp_path / "logprobs.csv"), "--feedback",
           str(tmp_path / "feedback.parquet"), "--as-of", "2024-05-01", "--out",
           str(tmp_path / "cli"))  # fmt: skip
    con = ds.connect()
    answered = ds.answers(*tables.values(), policy="answer_v2", logprobs=logprobs,
                          feedback=feedback, as_of="2024-05-01", con=con)  # fmt: skip
    assert same_rows(
        con, answered.answers.sql_query(), f"FROM '{tmp_path / 'cli' / 'answers.parquet'}'"
    )
    # the inputs were read: their columns are not those of answer_v2 without them
    plain = ds.answers(*tables.values(), policy="answer_v2", con=con)
    assert not same_rows(con, plain.answers.sql_query(), answered.answers.sql_query())


def test_connect_loads_the_macro_pack(tmp_path: Path) -> None:
    assert ds.connect().execute("SELECT ds_rrf(1) = 1 / 61").fetchall() == [(True,)]
    db = tmp_path / "analysis.duckdb"
    ds.connect(db, prefix="x_").close()
    with duckdb.connect(str(db)) as reopened:
        assert reopened.execute("SELECT x_policy().recipe").fetchall() == [("canonical_rrf",)]


def test_a_bad_input_is_one_error_naming_it() -> None:
    with pytest.raises(InputError, match=r"^--log: cannot read an object of type int \("):
        ds.fuse(42)
    with pytest.raises(InputError, match=r"^--log \(<DataFrame>\): missing column 'source'"):
        ds.fuse(pd.DataFrame({"query_id": ["q"], "item_id": ["i"], "parent_id": ["p"]}))


def test_the_functions_stay_functions_after_the_subpackages_load() -> None:
    code = (
        "import duckscore.fusion.pipeline, duckscore.runner.pipeline\n"
        "import duckscore as ds\n"
        "print(all(callable(getattr(ds, n)) and type(getattr(ds, n)).__name__ == 'function'"
        " for n in ('fuse', 'score', 'run', 'eval', 'answers', 'connect')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stderr


def test_calls_on_one_connection_replace_each_others_stages() -> None:
    """A stage is a table or a view as its log needs (fuse_hits: a view with ranks, a table
    without), and `parent_features` is a stage's table or the typed view of score's input: on
    one connection each call replaces what the one before left, whatever its kind."""
    con = duckdb.connect()
    without_rank = pd.read_parquet(LOG).drop(columns=["rank"])
    ranked = ds.fuse(str(LOG), con=con)
    unranked = ds.fuse(without_rank, con=con)
    assert ranked.fused.count("*").fetchall() == unranked.fused.count("*").fetchall()
    scored = ds.score(ranked.parent_features, con=con)
    assert ds.fuse(str(LOG), con=con).parent_features.count("*").fetchall() == (
        scored.parents.count("*").fetchall()
    )
