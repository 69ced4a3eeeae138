"""The table macros give the commands' rows: on SciFact, in a process that imports duckdb alone,
and on small logs that stress the edges (one candidate, ties, unicode ids, a source that returns
nothing for a query, a log without its optional columns, a log with ranks but no scores).

The oracle is the command line itself run on the same input: `duckscore run`, `eval
--per-query` and `labels` write the files the macros' rows are compared with.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.pack.install import pack_script

from ..helpers import FIXTURES, SCIFACT

# every table macro against the file of the command that writes the same rows
COMPARISONS = {
    "fused": ("FROM ds_fuse('log')", "FROM 'out/fused.parquet'"),
    "parent_features": ("FROM ds_parent_features('log')", "FROM 'out/parent_features.parquet'"),
    "parents": ("FROM ds_score('features')", "FROM 'out/parents.parquet'"),
    "contract": ("FROM ds_queries('features')", "FROM read_json('out/contract.jsonl')"),
}
EVAL_METRICS = "ndcg@10,recall@10,precision@10,mrr@10,map@10,hit_rate@10,hits@10"


def cli_ok(*args: str) -> str:
    done = CliRunner().invoke(cli, ["-q", *args])
    assert done.exit_code == 0, done.stderr
    return done.stdout


def differences(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Rows of a macro's result missing from the command's file, and the other way round."""
    found = {}
    for name, (macro, written) in COMPARISONS.items():
        one_way = f"SELECT count(*) FROM ({macro} EXCEPT ALL {written})"
        other_way = f"SELECT count(*) FROM ({written} EXCEPT ALL {macro})"
        found[name] = con.execute(one_way).fetchone()[0] + con.execute(other_way).fetchone()[0]  # type: ignore[index]
    return found


def packed(folder: Path, log: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        pack_script(
            sources=sorted(
                duckdb.sql(f"SELECT DISTINCT source FROM '{log}'").fetchnumpy()["source"]
            )
        )
    )
    con.execute(f"SET file_search_path = '{folder}'")
    con.execute(f"CREATE VIEW log AS FROM '{log}'")
    con.execute(f"CREATE VIEW features AS FROM '{folder / 'out' / 'parent_features.parquet'}'")
    return con


FRESH_PROCESS = """
import json, sys, duckdb
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")  # a slow query's bar would print on stdout
con.execute(open(sys.argv[1]).read())
con.execute(f"CREATE VIEW log AS FROM '{sys.argv[2]}'")
con.execute(f"CREATE VIEW qrels AS FROM '{sys.argv[3]}'")
con.execute("CREATE VIEW features AS FROM 'out/parent_features.parquet'")
con.execute("CREATE VIEW run AS FROM 'out/fused.parquet'")
found = {}
for name, (macro, written) in json.loads(sys.argv[4]).items():
    found[name] = sum(
        con.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b})").fetchone()[0]
        for a, b in ((macro, written), (written, macro)))
found['ndcg@10'] = con.execute("SELECT sum(ndcg ORDER BY query_id) / count(*) FROM ds_eval('run', 'qrels', 10)").fetchone()[0]
found['labels'] = con.execute("SELECT count(*) FROM (FROM ds_labels('run', 'qrels') EXCEPT ALL FROM 'labels.parquet')").fetchone()[0]
found['per_query'] = con.execute('''
    SELECT max(greatest(abs(m.ndcg - f."ndcg@10"), abs(m.recall - f."recall@10"),
               abs(m.precision - f."precision@10"), abs(m.mrr - f."mrr@10"), abs(m.map - f."map@10"),
               abs(m.hit_rate - f."hit_rate@10"), abs(m.hits - f."hits@10")))
    FROM ds_eval('run', 'qrels', 10) AS m JOIN 'per_query.parquet' AS f USING (query_id)''').fetchone()[0]
print(json.dumps(found))
"""


@pytest.mark.slow
def test_a_process_without_duckscore_gives_the_commands_rows_on_scifact(tmp_path: Path) -> None:
    log, qrels = SCIFACT / "retrieval_log.parquet", SCIFACT / "qrels.parquet"
    (tmp_path / "pack.sql").write_text(cli_ok("sql", "macros"))
    cli_ok("run", "--log", str(log), "--out", str(tmp_path / "out"))
    run = str(tmp_path / "out" / "fused.parquet")
    means = json.loads(
        cli_ok("eval", "--run", run, "--qrels", str(qrels), "--metrics", EVAL_METRICS, "--json",
               "--per-query", str(tmp_path / "per_query.parquet"))
    )  # fmt: skip
    cli_ok("labels", "--run", run, "--qrels", str(qrels), "--out", str(tmp_path / "labels.parquet"))
    ran = subprocess.run(
        [sys.executable, "-I", "-c", FRESH_PROCESS, "pack.sql", str(log), str(qrels),
         json.dumps(COMPARISONS)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    found = json.loads(ran.stdout)
    assert {name: found[name] for name in COMPARISONS} == dict.fromkeys(COMPARISONS, 0)
    assert found["labels"] == 0 and found["per_query"] < 1e-12
    assert found["ndcg@10"] == pytest.approx(means["ndcg@10"], abs=1e-12)


def edge_logs() -> dict[str, pd.DataFrame]:
    def hits(rows: list[tuple]) -> pd.DataFrame:
        columns = ["query_id", "source", "item_id", "parent_id", "score", "rank"]
        return pd.DataFrame(rows, columns=columns)

    full = hits(
        [("q1", "dense", "d1#1", "d1", 0.9, 1), ("q1", "dense", "d2#1", "d2", 0.5, 2),
         ("q1", "sparse", "d2#2", "d2", 12.0, 1), ("q1", "sparse", "d1#2", "d1", 7.5, 2),
         ("q2", "dense", "d3#1", "d3", 0.4, 1)]
    )  # fmt: skip
    return {
        "one candidate": hits([("q1", "dense", "d1#1", "d1", 0.7, 1)]),
        "all scores equal": hits(
            [
                ("q1", s, f"d{i}#{s}", f"d{i}", 1.0, i)
                for s in ("dense", "sparse")
                for i in (1, 2, 3)
            ]
        ),
        "unicode ids": hits(
            [
                ("问题一", "dense", "文档#1", "文档", 0.9, 1),
                ("问题一", "sparse", "ドキュメント#1", "ドキュメント", 3.0, 1),
                ("q é", "dense", "naïve#1", "naïve", 0.2, 1),
            ]
        ),
        "a source returns nothing for a query": full,
        "optional columns given": full.assign(
            granularity="block",
            block_type=["text", "table", "text", "text", "text"],
            total_chunks=[4, 4, 2, 4, 1],
            query_text="what",
            snippet="…",
        ),
        "ranks without scores": full.drop(columns="score"),
    }


@pytest.mark.parametrize("name", list(edge_logs()))
def test_table_macros_give_the_commands_rows_on_edge_logs(name: str, tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    edge_logs()[name].to_parquet(log, index=False)
    cli_ok("run", "--log", str(log), "--out", str(tmp_path / "out"))
    con = packed(tmp_path, log)
    assert differences(con) == dict.fromkeys(COMPARISONS, 0)


def test_parent_features_macro_gives_the_files_rows_in_its_order(tmp_path: Path) -> None:
    """ds_parent_features is parent_features.parquet row for row, ordered by query and parent."""
    log = SCIFACT / "retrieval_log.parquet"
    cli_ok("fuse", "--log", str(log), "--out", str(tmp_path / "out"))
    con = packed(tmp_path, log)
    written = con.execute(f"FROM '{tmp_path / 'out' / 'parent_features.parquet'}'").fetchall()
    assert con.execute("FROM ds_parent_features('log')").fetchall() == written
    keys = [(row[0], row[1]) for row in written]
    assert keys == sorted(keys)


def test_eval_and_labels_read_a_run_as_the_commands_do(tmp_path: Path) -> None:
    # a run with parent_id and a score but no rank; qrels with doc_id
    run = pd.DataFrame(
        {"query_id": ["a", "a", "a", "b", "b"], "parent_id": ["x", "y", "z", "x", "w"],
         "score": [0.2, 0.9, 0.9, 0.5, 0.1]}
    )  # fmt: skip
    qrels = pd.DataFrame(
        {"query_id": ["a", "a", "b"], "doc_id": ["z", "x", "w"], "relevance": [1, 2, 1]}
    )
    run.to_parquet(tmp_path / "run.parquet", index=False)
    qrels.to_parquet(tmp_path / "qrels.parquet", index=False)
    per_query = tmp_path / "per_query.parquet"
    cli_ok("eval", "--run", str(tmp_path / "run.parquet"), "--qrels", str(tmp_path / "qrels.parquet"),
           "--metrics", "ndcg@2,recall@2,mrr@2,map@2", "--per-query", str(per_query))  # fmt: skip
    cli_ok("labels", "--run", str(tmp_path / "run.parquet"), "--qrels", str(tmp_path / "qrels.parquet"),
           "--k", "2", "--out", str(tmp_path / "labels.parquet"))  # fmt: skip
    con = duckdb.connect()
    con.execute(pack_script())
    con.execute(f"CREATE VIEW run AS FROM '{tmp_path / 'run.parquet'}'")
    con.execute(f"CREATE VIEW qrels AS FROM '{tmp_path / 'qrels.parquet'}'")
    got = con.execute(
        f"""SELECT max(greatest(abs(m.ndcg - f."ndcg@2"), abs(m.recall - f."recall@2"),
                   abs(m.mrr - f."mrr@2"), abs(m.map - f."map@2"))), count(*)
            FROM ds_eval('run', 'qrels', 2) AS m JOIN '{per_query}' AS f USING (query_id)"""
    ).fetchone()
    assert got is not None and got[0] < 1e-15 and got[1] == 2
    labels = (
        f"FROM ds_labels('run', 'qrels', k := 2) EXCEPT ALL FROM '{tmp_path / 'labels.parquet'}'"
    )
    assert con.execute(f"SELECT count(*) FROM ({labels})").fetchone() == (0,)


@pytest.mark.parametrize("with_events", [False, True])
def test_answers_macros_give_the_commands_rows(with_events: bool, tmp_path: Path) -> None:
    folder = FIXTURES / "answers"
    tables = ["answers", "citations", "chunks", *(["events"] if with_events else [])]
    options = [arg for table in tables for arg in (f"--{table}", str(folder / f"{table}.csv"))]
    cli_ok("answers", *options, "--out", str(tmp_path / "out"))
    con = duckdb.connect()
    con.execute(pack_script())
    for table in tables:  # as typed as the command reads them
        con.execute(
            f"CREATE VIEW {table} AS FROM read_csv('{folder / table}.csv', all_varchar = true)"
        )
    macro = "ds_answers_with_events" if with_events else "ds_answers"
    rows = f"FROM {macro}({', '.join(repr(t) for t in tables)})"
    written = f"FROM '{tmp_path / 'out' / 'answers.parquet'}'"
    assert con.execute(f"SELECT count(*) FROM ({rows} EXCEPT ALL {written})").fetchone() == (0,)
    assert con.execute(f"SELECT count(*) FROM ({written} EXCEPT ALL {rows})").fetchone() == (0,)
