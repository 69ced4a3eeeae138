"""`duckscore labels` against a plain pandas re-implementation, hand-made edge cases, SciFact and
the command line.

* Random runs and qrels (seeded): score ties and rank ties, runs ordered by rank, by score or
  holding both, every document column spelling, graded relevance 0-3, queries only in the run,
  only in the qrels, or judged with no relevant document. The oracle sorts with pandas by the
  documented order (rank ascending, else score descending; ties by doc id ascending as text) and
  labels in Python; every row must match exactly.
* Edge cases by hand: relevant at rank 1, at rank k, at rank k + 1, a judged query absent from the
  run, a run query without judgment, graded relevance, ties broken by doc id (as text).
* SciFact: the reference RRF run against the qrels at k = 10, counted independently with pandas.
* The CLI: Parquet and CSV outputs, the one-line summary, one-line errors with exit status 2 and
  nothing written.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import click
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import DuckscoreGroup, cli
from duckscore.cli.metrics import labels_command
from duckscore.core.check import check_sql
from duckscore.core.errors import DuckscoreError, InputError
from duckscore.metrics.labels import (
    COLUMNS,
    STAGES,
    CutoffError,
    make_labels,
    render_labels,
    run_labels,
)
from duckscore.metrics.retrieval import evaluate
from duckscore.metrics.tables import QRELS_DOC_COLUMNS, RUN_DOC_COLUMNS

from ..helpers import SCIFACT

QRELS = str(SCIFACT / "qrels.parquet")
RRF = str(SCIFACT / "reference_rrf_k60.parquet")


# ---------------------------------------------------------------------------------------------
# the oracle: plain pandas and Python, written from the documented rules


def oracle_labels(run: pd.DataFrame, qrels: pd.DataFrame, k: int) -> pd.DataFrame:
    run_doc = next(c for c in RUN_DOC_COLUMNS if c in run.columns)
    qrels_doc = next(c for c in QRELS_DOC_COLUMNS if c in qrels.columns)
    run = run.rename(columns={run_doc: "doc_id"}).astype({"query_id": str, "doc_id": str})
    qrels = qrels.rename(columns={qrels_doc: "doc_id"}).astype({"query_id": str, "doc_id": str})
    if "rank" in run.columns:
        ordered = run.sort_values(["query_id", "rank", "doc_id"], ascending=[True, True, True])
    else:
        ordered = run.sort_values(["query_id", "score", "doc_id"], ascending=[True, False, True])
    relevant = {
        (q, d) for q, d, r in zip(qrels["query_id"], qrels["doc_id"], qrels["relevance"]) if r > 0
    }
    docs_of: dict[str, list[str]] = {}
    for query, doc in zip(ordered["query_id"], ordered["doc_id"]):
        docs_of.setdefault(query, []).append(doc)
    rows = []
    for query in sorted(set(qrels["query_id"])):
        docs = docs_of.get(query, [])
        first = next((i + 1 for i, d in enumerate(docs) if (query, d) in relevant), None)
        label = "good" if first == 1 else ("bad" if first is None or first > k else "ambiguous")
        rows.append(
            {
                "query_id": query,
                "label": label,
                "top1_doc_id": docs[0] if docs else None,
                "first_relevant_rank": first,
                "n_relevant": sum(1 for q, _ in relevant if q == query),
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def as_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows with None for every null, ints as int: a comparison blind to pandas dtypes."""
    records = []
    for row in frame.to_dict("records"):
        records.append(
            {
                c: (
                    None if pd.isna(v) else (int(v) if c.endswith(("rank", "relevant")) else str(v))
                )
                for c, v in row.items()
            }
        )
    return records


# ---------------------------------------------------------------------------------------------
# random cases


def random_case(seed: int) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(rng.randint(1, 14))]  # d1 < d10 < d2 as text: order is text
    queries = [f"q{i}" for i in range(rng.randint(1, 7))]
    order = rng.choice(["score", "rank", "both"])
    doc_column = rng.choice(RUN_DOC_COLUMNS)
    qrels_column = rng.choice(QRELS_DOC_COLUMNS)
    run_rows, qrels_rows = [], []
    for query in queries:
        kind = rng.random()
        if kind > 0.15:  # in the run (else qrels only)
            for doc in rng.sample(pool, rng.randint(1, len(pool))):
                row: dict[str, Any] = {"query_id": query, doc_column: doc}
                if order in ("score", "both"):
                    row["score"] = float(rng.choice([0.5, 1.0, 1.5, 2.0, rng.random()]))
                if order in ("rank", "both"):
                    row["rank"] = rng.randint(1, 4)  # ties in rank
                run_rows.append(row)
        if kind < 0.85:  # judged (else run only)
            for doc in rng.sample(pool, rng.randint(1, len(pool))):
                qrels_rows.append(
                    {"query_id": query, qrels_column: doc, "relevance": rng.choice([0, 0, 1, 2, 3])}
                )
    if not run_rows:
        row = {"query_id": "only_run", doc_column: "d0", "score": 1.0, "rank": 1}
        run_rows.append(
            {
                c: v
                for c, v in row.items()
                if c in ("query_id", doc_column)
                or (c == "score" and order != "rank")
                or (c == "rank" and order != "score")
            }
        )
    if not qrels_rows:
        qrels_rows.append({"query_id": queries[0], qrels_column: pool[0], "relevance": 1})
    return pd.DataFrame(run_rows), pd.DataFrame(qrels_rows), rng.randint(1, 6)


@pytest.mark.parametrize("seed", range(30))
def test_random_runs_match_the_pandas_oracle(seed: int) -> None:
    run, qrels, k = random_case(seed)
    labels = make_labels(run, qrels, k)
    assert list(labels.columns) == list(COLUMNS)
    assert as_records(labels) == as_records(oracle_labels(run, qrels, k))


# ---------------------------------------------------------------------------------------------
# hand-made edges


def edge_inputs() -> tuple[pd.DataFrame, pd.DataFrame]:
    run = pd.DataFrame(
        [
            # (query, doc, score)
            ("at1", "a", 3.0),
            ("at1", "b", 2.0),
            ("at1", "c", 1.0),
            ("at1", "d", 0.5),
            ("atk", "a", 3.0),
            ("atk", "b", 2.0),
            ("atk", "c", 1.0),
            ("atk", "d", 0.5),
            ("atk1", "a", 3.0),
            ("atk1", "b", 2.0),
            ("atk1", "c", 1.0),
            ("atk1", "d", 0.5),
            ("unjudged", "a", 1.0),
            ("graded", "a", 3.0),
            ("graded", "b", 2.0),
            ("tie_good", "d2", 1.0),
            ("tie_good", "d10", 1.0),  # 'd10' < 'd2' as text: d10 first
            ("tie_amb", "x", 1.0),
            ("tie_amb", "y", 1.0),
            ("no_rel", "a", 1.0),
        ],
        columns=["query_id", "doc_id", "score"],
    )
    qrels = pd.DataFrame(
        [
            ("at1", "a", 1),
            ("atk", "c", 1),
            ("atk1", "d", 1),
            ("absent", "a", 2),
            ("graded", "a", 0),
            ("graded", "b", 2),
            ("graded", "z", 3),
            ("tie_good", "d10", 1),
            ("tie_amb", "y", 1),
            ("no_rel", "a", 0),
        ],
        columns=["query_id", "doc_id", "relevance"],
    )
    return run, qrels


EDGE_EXPECTED = {  # k = 3: query -> (label, top1_doc_id, first_relevant_rank, n_relevant)
    "absent": ("bad", None, None, 1),
    "at1": ("good", "a", 1, 1),
    "atk": ("ambiguous", "a", 3, 1),
    "atk1": ("bad", "a", 4, 1),
    "graded": ("ambiguous", "a", 2, 2),
    "no_rel": ("bad", "a", None, 0),
    "tie_amb": ("ambiguous", "x", 2, 1),
    "tie_good": ("good", "d10", 1, 1),
}


def test_edge_cases_at_k_3() -> None:
    run, qrels = edge_inputs()
    labels = make_labels(run, qrels, k=3)
    got = {
        r["query_id"]: (r["label"], r["top1_doc_id"], r["first_relevant_rank"], r["n_relevant"])
        for r in as_records(labels)
    }
    assert got == EDGE_EXPECTED
    assert list(labels["query_id"]) == sorted(EDGE_EXPECTED)  # ordered; 'unjudged' has no label
    assert as_records(labels) == as_records(oracle_labels(run, qrels, 3))
    assert str(labels["first_relevant_rank"].dtype) == "Int64"


def test_k_moves_the_bad_ambiguous_boundary() -> None:
    run, qrels = edge_inputs()
    at = {
        k: dict(
            zip(make_labels(run, qrels, k=k)["query_id"], make_labels(run, qrels, k=k)["label"])
        )
        for k in (1, 2, 4)
    }
    assert at[4]["atk1"] == "ambiguous" and at[2]["atk"] == "bad" and at[2]["graded"] == "ambiguous"
    assert "ambiguous" not in at[1].values()  # k = 1: the top-1 document decides
    assert at[1]["at1"] == "good" and at[1]["tie_good"] == "good"


def test_rank_column_orders_before_score() -> None:
    run = pd.DataFrame(
        {
            "query_id": ["q", "q", "q"],
            "parent_id": ["a", "b", "c"],
            "score": [9.0, 1.0, 5.0],
            "rank": [3, 1, 1],
        }
    )  # b and c tie at rank 1
    qrels = pd.DataFrame({"query_id": ["q"], "parent_id": ["b"], "relevance": [1]})
    [row] = as_records(make_labels(run, qrels, k=2))
    assert row == {
        "query_id": "q",
        "label": "good",
        "top1_doc_id": "b",
        "first_relevant_rank": 1,
        "n_relevant": 1,
    }


def test_integer_ids_and_files(tmp_path: Path) -> None:
    run = pd.DataFrame({"query_id": [1, 1, 2], "item_id": [10, 9, 10], "score": [1.0, 1.0, 2.0]})
    qrels = pd.DataFrame({"query_id": [1, 2], "doc_id": [9, 7], "relevance": [1, 1]})
    run.to_parquet(tmp_path / "run.parquet")
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    labels = make_labels(tmp_path / "run.parquet", str(tmp_path / "qrels.csv"), k=2)
    assert as_records(labels) == [
        {
            "query_id": "1",
            "label": "ambiguous",
            "top1_doc_id": "10",
            "first_relevant_rank": 2,
            "n_relevant": 1,
        },  # tied scores: '10' < '9' as text
        {
            "query_id": "2",
            "label": "bad",
            "top1_doc_id": "10",
            "first_relevant_rank": None,
            "n_relevant": 1,
        },
    ]


@pytest.mark.parametrize("k", [0, -1, True, 2.0, "10", 10**10])
def test_bad_k_is_refused(k: Any) -> None:
    run, qrels = edge_inputs()
    with pytest.raises(CutoffError, match="--k: must be a whole number from 1"):
        make_labels(run, qrels, k=k)
    assert issubclass(CutoffError, DuckscoreError)


def test_every_stage_passes_the_sql_check() -> None:
    from duckscore.core.inputs import schema_of
    from duckscore.core.session import Session
    from duckscore.metrics.tables import open_qrels, open_run

    run, qrels = edge_inputs()
    with Session() as session:
        open_run(session, run)
        open_qrels(session, qrels)
        con = session.con
        schema = {
            "eval_run": schema_of(con, "eval_run"),
            "eval_qrels": schema_of(con, "eval_qrels"),
        }
        judged = set(qrels["query_id"])
        rows = {  # each stage's row count, counted from the inputs
            "ranked": len(run),
            "judgments": len(qrels),
            "judged": len(judged),
            "judged_run": int(run["query_id"].isin(judged).sum()),
            "run_stats": len(judged & set(run["query_id"])),
            "labels": len(judged),
        }
        assert set(rows) == set(STAGES)
        for order_by in ("rank", "score"):
            for stage in STAGES:
                rendered = render_labels(3, order_by, final=stage)
                check_sql(rendered, schema)
                assert len(con.execute(rendered.text).fetchall()) == rows[stage], (order_by, stage)
        labels = con.execute(render_labels(3, "score").text).fetchall()
        assert {q: tuple(rest) for q, *rest in labels} == EDGE_EXPECTED


# ---------------------------------------------------------------------------------------------
# SciFact

SCIFACT_COUNTS = {"good": 162, "ambiguous": 79, "bad": 59}


def test_scifact_counts_match_an_independent_count() -> None:
    run, qrels = pd.read_parquet(RRF), pd.read_parquet(QRELS)
    result = run_labels(RRF, QRELS, k=10)
    # independent: the reference's own rank column, no doc-id tie logic, plain pandas
    relevant = qrels[qrels["relevance"] > 0][["query_id", "parent_id"]]
    hits = run.merge(relevant, on=["query_id", "parent_id"])
    first = hits.groupby("query_id")["rank"].min()
    judged = qrels["query_id"].unique()
    first = first.reindex(judged)
    expected = {
        "good": int((first == 1).sum()),
        "ambiguous": int(((first > 1) & (first <= 10)).sum()),
        "bad": int((first.isna() | (first > 10)).sum()),
    }
    assert result.counts == expected == SCIFACT_COUNTS
    assert result.queries == 300 and result.run_queries_unlabelled == 0
    assert as_records(result.labels) == as_records(oracle_labels(run, qrels, 10))
    # the same numbers as `duckscore eval`: MRR@1 and hit rate@10
    means, _ = evaluate(RRF, QRELS, "mrr@1,hit_rate@10")
    assert means["mrr@1"] * 300 == pytest.approx(expected["good"])
    assert means["hit_rate@10"] * 300 == pytest.approx(expected["good"] + expected["ambiguous"])


# ---------------------------------------------------------------------------------------------
# the command line


def group() -> tuple[click.Group, list[str]]:
    """The real `duckscore` group once labels is registered; until then the same group class."""
    if "labels" in cli.commands:
        return cli, ["-q", "labels"]
    return DuckscoreGroup(name="duckscore", commands={"labels": labels_command}), ["labels"]


def invoke(*args: str) -> Result:
    command, prefix = group()
    return CliRunner().invoke(command, [*prefix, *args])


def test_cli_writes_parquet_and_one_summary_line(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "labels.parquet"
    result = invoke("--run", RRF, "--qrels", QRELS, "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\n") == 1
    assert "300 queries labelled at k=10: good 162, ambiguous 79, bad 59" in result.stdout
    table = pq.read_table(out)
    assert table.column_names == list(COLUMNS)
    assert str(table.schema.field("first_relevant_rank").type) == "int64"
    assert as_records(table.to_pandas()) == as_records(make_labels(RRF, QRELS))
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]


def test_cli_writes_csv_and_k(tmp_path: Path) -> None:
    run, qrels = edge_inputs()
    run.to_parquet(tmp_path / "run.parquet")
    qrels.to_parquet(tmp_path / "qrels.parquet")
    out = tmp_path / "labels.CSV"
    result = invoke(
        "--run",
        str(tmp_path / "run.parquet"),
        "--qrels",
        str(tmp_path / "qrels.parquet"),
        "--out",
        str(out),
        "--k",
        "3",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(
        "8 queries labelled at k=3: good 2, ambiguous 3, bad 3 "
        "(1 without run rows); 1 run queries without judgments"
    )
    written = pd.read_csv(out, dtype={"query_id": str, "top1_doc_id": str})
    assert list(written.columns) == list(COLUMNS)
    got = {
        r["query_id"]: (r["label"], r["top1_doc_id"], r["first_relevant_rank"], r["n_relevant"])
        for r in as_records(written)
    }
    assert got == EDGE_EXPECTED


def bad_run(tmp_path: Path) -> str:
    pd.DataFrame({"query_id": ["1"], "score": [1.0]}).to_parquet(tmp_path / "bad_run.parquet")
    return str(tmp_path / "bad_run.parquet")


def bad_qrels(tmp_path: Path) -> str:
    pd.DataFrame({"query_id": ["1"], "doc_id": ["a"]}).to_parquet(tmp_path / "bad_qrels.parquet")
    return str(tmp_path / "bad_qrels.parquet")


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda tmp: {"--k": "0"},
            "Invalid value for '--k': 0 is not in the range 1<=x<=1000000000",
        ),
        (lambda tmp: {"--k": "-3"}, "Invalid value for '--k'"),
        (lambda tmp: {"--k": "ten"}, "Invalid value for '--k': 'ten' is not a valid integer"),
        (
            lambda tmp: {"--run": bad_run(tmp)},
            "missing column 'doc_id' (or 'parent_id', 'item_id')",
        ),
        (lambda tmp: {"--qrels": bad_qrels(tmp)}, "missing column 'relevance'"),
        (lambda tmp: {"--qrels": "missing.parquet"}, "--qrels: no such file: missing.parquet"),
    ],
)
def test_cli_errors_are_one_line_and_write_nothing(
    change: Any, message: str, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "labels.parquet"
    options = {"--run": RRF, "--qrels": QRELS, "--out": str(out), **change(tmp_path)}
    result = invoke(*[x for pair in options.items() for x in pair])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("duckscore: error: ")
    assert message in result.stderr, result.stderr
    assert result.stdout == "" and not out.parent.exists()


def test_cli_out_folder_is_refused(tmp_path: Path) -> None:
    result = invoke("--run", RRF, "--qrels", QRELS, "--out", str(tmp_path))
    assert result.exit_code == 2 and result.stderr.startswith("duckscore: error: ")
    assert result.stderr.count("\n") == 1


def test_cli_failed_run_keeps_the_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "labels.parquet"
    out.write_bytes(b"previous")
    result = invoke("--run", bad_run(tmp_path), "--qrels", QRELS, "--out", str(out))
    assert result.exit_code == 2 and out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad_run.parquet", "labels.parquet"]


def test_cli_help_documents_the_rules() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for phrase in (
        "good",
        "ambiguous",
        "bad",
        "top k",
        "rank ascending",
        "ties by document id",
        "get no label",
        "first_relevant_rank",
        "--k",
        ".csv",
        "--threads",
    ):
        assert phrase in result.stdout, phrase


def test_errors_are_duckscore_errors() -> None:
    assert issubclass(InputError, DuckscoreError)
