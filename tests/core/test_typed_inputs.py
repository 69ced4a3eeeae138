"""Inputs are read with their contract's types: a valid file is never refused, and no value
changes on the way in.

DuckDB's CSV and JSON readers guess types: a text column whose values look like numbers,
booleans, dates or UUIDs is typed so (a JSON timestamp string comes back with a space for its
`T`, an upper-case UUID in lower case). Id and text columns are read as written; a number column that holds one word names that
row; a column the contract lets be NULL accepts empty cells.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from ..helpers import SCIFACT

ANSWERS = "answer_id,query_id,answer_text,retrieved_count\n"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def contract_ids(out: Path) -> list[str]:
    lines = (out / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted(json.loads(line)["query_id"] for line in lines)


def test_json_ids_are_kept_as_written(tmp_path: Path) -> None:
    # DuckDB's JSON reader types these UUIDs as UUID, and UUID prints in lower case
    upper = "6F9619FF-8B86-D011-B42D-00CF4FC964FF"
    features = tmp_path / "features.jsonl"
    rows = [
        {"query_id": upper, "parent_id": "p1", "rrf_sum": 0.05, "max_score": 0.9, "coverage": 3,
         "total_chunks": 10, "coverage_ratio": 0.3},
        {"query_id": upper, "parent_id": 2, "rrf_sum": 0.04, "max_score": 0.8, "coverage": 2,
         "total_chunks": 8, "coverage_ratio": 0.25},
    ]  # fmt: skip
    features.write_text("".join(json.dumps(row) + "\n" for row in rows))
    # the seed's seven columns: overall_v1's (the default overall_v3 also reads parent_rrf)
    out = ["--out", str(tmp_path / "out"), "--policy", "overall_v1"]
    done = invoke("score", "--features", str(features), *out)
    assert done.exit_code == 0, done.stderr
    assert contract_ids(tmp_path / "out") == [upper]
    parents = duckdb.sql(f"SELECT parent_id FROM '{tmp_path / 'out' / 'parents.parquet'}'")
    assert sorted(row[0] for row in parents.fetchall()) == ["2", "p1"]


def answers_folder(tmp_path: Path, answers: str, suffix: str = "csv") -> list[str]:
    (tmp_path / f"answers.{suffix}").write_text(answers, encoding="utf-8")
    (tmp_path / "citations.csv").write_text("answer_id,chunk_id\n")
    (tmp_path / "chunks.csv").write_text("answer_id,chunk_id,rerank_score\n")
    return [
        "answers", "--answers", str(tmp_path / f"answers.{suffix}"),
        "--citations", str(tmp_path / "citations.csv"), "--chunks", str(tmp_path / "chunks.csv"),
        "--out", str(tmp_path / "out"),
    ]  # fmt: skip


@pytest.mark.parametrize("text", ["42", "t", "2024-01-01", "1e3", "2024-01-01 10:00:00"])
def test_csv_text_that_looks_like_another_type_is_text(tmp_path: Path, text: str) -> None:
    # every answer the same text, so the CSV reader types the whole column by it
    rows = "".join(f"a{i},q{i},{text},3\n" for i in range(3))
    done = invoke(*answers_folder(tmp_path, ANSWERS + rows))
    assert done.exit_code == 0, done.stderr
    lengths = duckdb.sql(f"SELECT answer_length FROM '{tmp_path / 'out' / 'answers.parquet'}'")
    assert {row[0] for row in lengths.fetchall()} == {len(text)}


@pytest.mark.parametrize("text", ["2024-01-01T10:00:00", "2024-01-01", "true"])
def test_json_strings_that_look_like_another_type_are_text(tmp_path: Path, text: str) -> None:
    rows = "".join(
        json.dumps({"answer_id": i if i else "a0", "query_id": f"q{i}", "answer_text": text,
                    "retrieved_count": 3}) + "\n"
        for i in range(3)
    )  # fmt: skip
    done = invoke(*answers_folder(tmp_path, rows, "jsonl"))
    assert done.exit_code == 0, done.stderr
    lengths = duckdb.sql(f"SELECT answer_length FROM '{tmp_path / 'out' / 'answers.parquet'}'")
    assert {row[0] for row in lengths.fetchall()} == {len(text)}


def test_one_word_in_a_number_column_names_its_row(tmp_path: Path) -> None:
    rows = "".join(f"a{i},q{i},text,{'lots' if i == 3 else 3}\n" for i in range(6))
    done = invoke(*answers_folder(tmp_path, ANSWERS + rows))
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [
        f"duckscore: error: --answers ({tmp_path / 'answers.csv'}, row 4, answer_id='a3', "
        "value lots): column 'retrieved_count' is text, not a whole number"
    ]
    assert not (tmp_path / "out").exists()


def test_numbers_written_as_json_strings_are_named(tmp_path: Path) -> None:
    rows = "".join(
        json.dumps({"answer_id": f"a{i}", "query_id": "q", "answer_text": "x",
                    "retrieved_count": "3"}) + "\n"
        for i in range(2)
    )  # fmt: skip
    done = invoke(*answers_folder(tmp_path, rows, "jsonl"))
    assert done.exit_code == 2
    assert "column 'retrieved_count' has type VARCHAR; expected a whole number (numbers " in (
        done.stderr
    )


def test_instinct_columns_the_store_lets_be_null_take_empty_cells(tmp_path: Path) -> None:
    db = str(tmp_path / "store.duckdb")
    instinct = "00000000-0000-0000-0000-000000000001"
    user = "00000000-0000-0000-0000-0000000f4240"
    (tmp_path / "new.csv").write_text(
        "id,trigger_text,action_text,domain,user_id,project_id,source\n"
        f"{instinct},when 2024,act,2024,{user},,\n"
    )
    (tmp_path / "events.csv").write_text(
        "event_id,instinct_id,event_type,occurred_at,session_id,outcome,description,signals\n"
        f"e1,{instinct},applied_successfully,2026-01-05 10:00:00,,,,\n"
        f"e2,{instinct},user_accepted,2026-01-05 11:00:00,,,,\n"
    )
    assert invoke("instincts", "init", "--db", db).exit_code == 0
    done = CliRunner().invoke(
        cli,
        [
            "instincts",
            "ingest",
            "--db",
            db,
            "--instincts",
            str(tmp_path / "new.csv"),
            "--events",
            str(tmp_path / "events.csv"),
            "--now",
            "2026-01-06",
        ],
    )  # fmt: skip  (not -q: its message, on stderr)
    assert done.exit_code == 0, done.stderr
    assert "2 events applied" in done.stderr
    with duckdb.connect(db, read_only=True) as con:
        stored = con.execute("SELECT domain, project_id, source FROM instincts").fetchall()
        applied = con.execute("SELECT outcome FROM instinct_applications").fetchall()
    assert stored == [("2024", None, "observation")]
    assert applied == [("positive",)]


def test_an_empty_granularity_cell_is_derived_as_if_the_column_were_absent(
    tmp_path: Path,
) -> None:
    log = duckdb.sql(
        f"SELECT query_id, source, item_id, parent_id, score, rank FROM "
        f"'{SCIFACT / 'retrieval_log.parquet'}' WHERE query_id IN (SELECT DISTINCT query_id FROM "
        f"'{SCIFACT / 'retrieval_log.parquet'}' ORDER BY query_id LIMIT 3)"
    )
    without = tmp_path / "without.csv"
    log.write_csv(str(without))
    with_empty = tmp_path / "with_empty.csv"
    lines = without.read_text().splitlines()
    with_empty.write_text(
        "\n".join([lines[0] + ",granularity"] + [line + "," for line in lines[1:]]) + "\n"
    )
    for given in (without, with_empty):
        out = tmp_path / given.stem
        done = invoke("fuse", "--log", str(given), "--out", str(out))
        assert done.exit_code == 0, done.stderr
    read = "SELECT * FROM '{}' ORDER BY ALL"
    assert (
        duckdb.sql(read.format(tmp_path / "without" / "parent_features.parquet")).fetchall()
        == duckdb.sql(read.format(tmp_path / "with_empty" / "parent_features.parquet")).fetchall()
    )


def test_lines_of_large_json_files_are_numbered_in_file_order(tmp_path: Path) -> None:
    """A window over a multi-threaded scan numbers rows as its threads finish: a 5,000-line file
    came out numbered out of order in one run of three. Each line here carries its number."""
    from duckscore.core.inputs import create_numbered_view
    from duckscore.core.validate import FILE_COLUMN, ROW_COLUMN

    paths = []
    for name, lines in (("a.jsonl", 60_000), ("b.jsonl", 30_000)):
        path = tmp_path / name
        path.write_text("".join(json.dumps({"n": n}) + "\n" for n in range(1, lines + 1)))
        paths.append(str(path))
    con = duckdb.connect()
    con.execute("SET threads = 4")
    scan = f"read_json_objects({paths!r}, format = 'auto', filename = '{FILE_COLUMN}')"
    for _ in range(3):
        create_numbered_view(con, "lines", scan)
        counts = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE \"{ROW_COLUMN}\" <> CAST(json->>'n' AS BIGINT)) "
            "FROM lines"
        ).fetchall()
        assert counts == [(90_000, 0)]
