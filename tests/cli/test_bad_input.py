"""Bad input, bad policy and bad options: every one is ONE line `duckscore: error: ...` on stderr,
exit status 2, a message that names what is wrong and where, and an untouched --out folder.

Each case starts from a small valid parent_features table built here, breaks one thing, and runs
`duckscore score` in-process through click's CliRunner (stderr is captured separately). Progress
lines are switched off with -q so stderr holds the error alone; the subprocess tests at the end
look at the installed console script as a user runs it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import re
import subprocess
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.core.connection import EngineSettings
from duckscore.core.errors import DuckscoreError
from duckscore.core.resources import policies_dir
from duckscore.scoring.pipeline import score as run_score

# The script pip installed beside the interpreter running the tests (the venv's bin/), never a
# path into one checkout: a fresh clone has its own.
CONSOLE_SCRIPT = Path(sysconfig.get_path("scripts")) / "duckscore"

COLUMNS = (
    "query_id",
    "parent_id",
    "rrf_sum",
    "max_score",
    "coverage",
    "total_chunks",
    "coverage_ratio",
)
# The seed's seven columns are overall_v1's; the default overall_v3 also reads parent_rrf and
# score_lead, and refuses them. The runs that must succeed name it.
SEED_POLICY = ("--policy", "overall_v1")

# Five valid rows, two queries. Row-level cases break data row 4 (index 3), whose key
# (q2, p1) shares its parent_id with row 1, so the message must carry both key columns.
BAD_INDEX = 3
BAD_ROW = BAD_INDEX + 1
BAD_KEY = ("q2", "p1")


def valid_columns() -> dict[str, list[Any]]:
    return {
        "query_id": ["q1", "q1", "q1", "q2", "q2"],
        "parent_id": ["p1", "p2", "p3", "p1", "p4"],
        "rrf_sum": [0.05, 0.03, 0.01, 0.04, 0.02],
        "max_score": [0.9, 0.5, 0.2, 0.8, 0.6],
        "coverage": [3.0, 1.0, 0.0, 2.0, 5.0],
        "total_chunks": [10, 4, 1, 8, 60],
        "coverage_ratio": [0.3, 0.25, 0.0, 0.25, 0.08],
    }


def with_value(column: str, value: Any, index: int = BAD_INDEX) -> dict[str, list[Any]]:
    cols = valid_columns()
    cols[column][index] = value
    return cols


# ---------------------------------------------------------------------------------------------
# writers: parquet through pyarrow (so NaN stays NaN and None is null), CSV and JSONL by hand


def write_parquet(
    path: Path, cols: dict[str, list[Any]], types: dict[str, pa.DataType] | None = None
) -> Path:
    types = types or {}
    table = pa.table(
        {name: pa.array(values, type=types.get(name)) for name, values in cols.items()}
    )
    pq.write_table(table, path)
    return path


def write_csv(path: Path, cols: dict[str, list[Any]]) -> Path:
    names = list(cols)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for row in zip(*cols.values()):
            writer.writerow(["" if v is None else v for v in row])
    return path


def write_jsonl(path: Path, cols: dict[str, list[Any]]) -> Path:
    names = list(cols)
    with open(path, "w", encoding="utf-8") as handle:
        for row in zip(*cols.values()):
            handle.write(json.dumps(dict(zip(names, row))) + "\n")
    return path


WRITERS: dict[str, Callable[[Path, dict[str, list[Any]]], Path]] = {
    "parquet": write_parquet,
    "csv": write_csv,
    "jsonl": write_jsonl,
}


def write(
    tmp_path: Path, cols: dict[str, list[Any]], fmt: str = "parquet", stem: str = "features"
) -> Path:
    return WRITERS[fmt](tmp_path / f"{stem}.{fmt}", cols)


# ---------------------------------------------------------------------------------------------
# the --out folder: absent (must stay absent) or existing with files (must stay byte-identical)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


class OutFolder:
    def __init__(self, path: Path, mode: str) -> None:
        self.path = path
        self.mode = mode
        self.before: dict[str, tuple[bytes, int]] | None = None
        if mode == "existing":
            path.mkdir()
            (path / "keep.txt").write_bytes(b"written before the run\n")
            (path / "parents.parquet").write_bytes(b"an older output that must survive\x00\xff")
            (path / "sql").mkdir()
            (path / "sql" / "old.sql").write_text("SELECT 1\n", encoding="utf-8")
            self.before = snapshot(path)

    def assert_untouched(self) -> None:
        if self.mode == "absent":
            assert not self.path.exists(), f"--out {self.path} was created by a failing run"
        else:
            assert self.path.is_dir()
            assert snapshot(self.path) == self.before, "--out folder changed by a failing run"
        leftovers = [p.name for p in self.path.parent.iterdir() if ".tmp-" in p.name]
        assert not leftovers, f"staging folders left behind: {leftovers}"


@pytest.fixture(params=["absent", "existing"])
def out(request: pytest.FixtureRequest, tmp_path: Path) -> OutFolder:
    return OutFolder(tmp_path / "out", request.param)


# ---------------------------------------------------------------------------------------------
# running and checking


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def score_cli(features: Path | str, out: OutFolder, *extra: str) -> Result:
    return invoke("score", "--features", str(features), "--out", str(out.path), *extra)


def word(text: str) -> str:
    """A regex matching `text` as a whole word (identifiers, file names)."""
    return r"(?<![\w])" + re.escape(text) + r"(?![\w])"


def assert_one_line_error(result: Result, *mentions: str) -> str:
    """Exit 2, nothing on stdout, exactly one stderr line `duckscore: error: ...` naming each of
    `mentions` as a whole word. Returns the line."""
    detail = f"exit {result.exit_code}, exception {result.exception!r}, stderr {result.stderr!r}"
    assert result.exit_code == 2, detail
    assert result.stdout == "", detail
    lines = result.stderr.splitlines()
    assert len(lines) == 1, detail
    line = lines[0]
    assert line.startswith("duckscore: error: "), detail
    for mention in mentions:
        assert re.search(word(mention), line), f"{mention!r} not named in {line!r}"
    return line


def wording(line: str) -> str:
    """The message with every absolute path replaced by <path>: pytest's tmp folders are named after
    the test ("test_corrupt_parquet0"), so checking the wording must not look inside paths."""
    return re.sub(r"/[^\s,()']+", "<path>", line)


def assert_names_row(line: str, row: int, key: tuple[str, str] | None) -> None:
    line = wording(line)
    assert re.search(rf"\brow {row}\b", line), f"row {row} not named in {line!r}"
    if key is not None:
        query_id, parent_id = key
        assert re.search(rf"\bquery_id\s*[=:]\s*'?{re.escape(query_id)}\b", line), line
        assert re.search(rf"\bparent_id\s*[=:]\s*'?{re.escape(parent_id)}\b", line), line


def assert_row_error(
    result: Result,
    out: OutFolder,
    path: Path,
    column: str,
    row: int = BAD_ROW,
    key: tuple[str, str] | None = BAD_KEY,
) -> str:
    line = assert_one_line_error(result, path.name, column)
    assert_names_row(line, row, key)
    out.assert_untouched()
    return line


# ---------------------------------------------------------------------------------------------
# the baseline is valid (otherwise every failure below would prove nothing)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_valid_baseline_scores(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path, valid_columns(), fmt)
    result = invoke("score", "--features", str(path), "--out", str(tmp_path / "out"), *SEED_POLICY)
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert result.stderr == ""
    parents = pd.read_parquet(tmp_path / "out" / "parents.parquet")
    assert len(parents) == 5
    lines = (tmp_path / "out" / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["query_id"] for line in lines) == ["q1", "q2"]


# ---------------------------------------------------------------------------------------------
# table-level problems


def test_missing_column(tmp_path: Path, out: OutFolder) -> None:
    cols = valid_columns()
    del cols["coverage"]
    path = write(tmp_path, cols)
    line = assert_one_line_error(score_cli(path, out), path.name, "coverage")
    assert "missing" in wording(line)
    out.assert_untouched()


def test_wrong_type_string_rrf_sum(tmp_path: Path, out: OutFolder) -> None:
    cols = valid_columns()
    cols["rrf_sum"] = ["high", "low", "mid", "high", "low"]
    path = write(tmp_path, cols)
    line = assert_one_line_error(score_cli(path, out), path.name, "rrf_sum")
    assert re.search(r"VARCHAR|string|text|type", wording(line), re.IGNORECASE), line
    out.assert_untouched()


def test_empty_parquet_with_schema(tmp_path: Path, out: OutFolder) -> None:
    types = {
        "query_id": pa.string(),
        "parent_id": pa.string(),
        "rrf_sum": pa.float64(),
        "max_score": pa.float64(),
        "coverage": pa.float64(),
        "total_chunks": pa.int64(),
        "coverage_ratio": pa.float64(),
    }
    path = write_parquet(tmp_path / "zero_rows.parquet", {c: [] for c in COLUMNS}, types)
    assert pq.read_table(path).num_rows == 0
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert re.search(r"no rows|empty", wording(line)), line
    out.assert_untouched()


def test_empty_csv_with_header(tmp_path: Path, out: OutFolder) -> None:
    # DuckDB types every column of a header-only CSV as VARCHAR; the message must still say
    # "no rows", not "rrf_sum has type VARCHAR".
    path = tmp_path / "header_only.csv"
    path.write_text(",".join(COLUMNS) + "\n", encoding="utf-8")
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert re.search(r"no rows|empty", wording(line)), line
    out.assert_untouched()


def test_empty_jsonl(tmp_path: Path, out: OutFolder) -> None:
    # A 0-byte JSONL file has no schema at all (DuckDB reports one column `json`).
    path = tmp_path / "zero_bytes.jsonl"
    path.write_bytes(b"")
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert re.search(r"no rows|empty", wording(line)), line
    assert "missing column" not in line and "type" not in wording(line), line
    out.assert_untouched()


def test_nonexistent_path(tmp_path: Path, out: OutFolder) -> None:
    path = tmp_path / "absent_features.parquet"
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert re.search(r"no such file|not found|does not exist", wording(line)), line
    out.assert_untouched()


def test_glob_matching_nothing(tmp_path: Path, out: OutFolder) -> None:
    write(tmp_path, valid_columns())  # features.parquet exists but does not match
    pattern = str(tmp_path / "nothing_*.parquet")
    line = assert_one_line_error(score_cli(pattern, out))
    assert pattern in line
    assert re.search(r"no files|match", wording(line)), line
    out.assert_untouched()


def test_unknown_extension(tmp_path: Path, out: OutFolder) -> None:
    csv_path = write(tmp_path, valid_columns(), "csv")
    path = csv_path.rename(tmp_path / "features.txt")  # valid CSV content, unknown suffix
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert re.search(r"unknown file type|file type|extension", wording(line)), line
    out.assert_untouched()


def test_corrupt_parquet(tmp_path: Path, out: OutFolder) -> None:
    path = tmp_path / "garbage.parquet"
    path.write_bytes(random.Random(0).randbytes(512))
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert re.search(r"cannot read|corrupt|invalid|magic", wording(line), re.IGNORECASE), line
    out.assert_untouched()


# ---------------------------------------------------------------------------------------------
# row-level problems (Parquet): the message names file, row, key and column


def test_null_value(tmp_path: Path, out: OutFolder) -> None:
    path = write(tmp_path, with_value("rrf_sum", None))
    line = assert_row_error(score_cli(path, out), out, path, "rrf_sum")
    assert "null" in wording(line).lower()


def test_nan_value(tmp_path: Path, out: OutFolder) -> None:
    cols = valid_columns()
    path = tmp_path / "features.parquet"
    arrays = {name: pa.array(values) for name, values in cols.items()}
    arrays["max_score"] = pa.array([0.9, 0.5, 0.2, float("nan"), 0.6])
    pq.write_table(pa.table(arrays), path)
    stored = pq.read_table(path).column("max_score")
    assert stored.null_count == 0 and math.isnan(stored[BAD_INDEX].as_py())  # a real NaN, not null
    line = assert_row_error(score_cli(path, out), out, path, "max_score")
    assert "nan" in wording(line).lower()


@pytest.mark.parametrize("value", [math.inf, -math.inf], ids=["plus_inf", "minus_inf"])
def test_infinite_value(tmp_path: Path, out: OutFolder, value: float) -> None:
    path = write(tmp_path, with_value("rrf_sum", value))
    line = assert_row_error(score_cli(path, out), out, path, "rrf_sum")
    assert "inf" in wording(line).lower()


def test_negative_total_chunks(tmp_path: Path, out: OutFolder) -> None:
    path = write(tmp_path, with_value("total_chunks", -3))
    line = assert_row_error(score_cli(path, out), out, path, "total_chunks")
    assert "-3" in wording(line)


def test_non_integer_total_chunks(tmp_path: Path, out: OutFolder) -> None:
    cols = with_value("total_chunks", 2.5)
    cols["total_chunks"] = [float(v) for v in cols["total_chunks"]]
    path = write(tmp_path, cols)
    line = assert_row_error(score_cli(path, out), out, path, "total_chunks")
    assert "2.5" in wording(line)


@pytest.mark.parametrize("value", [1.5, -0.25], ids=["above_1", "below_0"])
def test_coverage_ratio_out_of_range(tmp_path: Path, out: OutFolder, value: float) -> None:
    path = write(tmp_path, with_value("coverage_ratio", value))
    line = assert_row_error(score_cli(path, out), out, path, "coverage_ratio")
    assert repr(value) in line


def test_negative_coverage(tmp_path: Path, out: OutFolder) -> None:
    path = write(tmp_path, with_value("coverage", -1.0))
    assert_row_error(score_cli(path, out), out, path, "coverage")


@pytest.mark.parametrize("column", ["query_id", "parent_id"])
def test_empty_string_id(tmp_path: Path, out: OutFolder, column: str) -> None:
    path = write(tmp_path, with_value(column, ""))
    key = ("", BAD_KEY[1]) if column == "query_id" else (BAD_KEY[0], "")
    line = assert_one_line_error(score_cli(path, out), path.name, column)
    assert re.search(rf"\brow {BAD_ROW}\b", wording(line)), line
    other = "parent_id" if column == "query_id" else "query_id"
    other_value = key[1] if column == "query_id" else key[0]
    assert re.search(rf"\b{other}\s*[=:]\s*'?{other_value}\b", line), line
    assert "empty" in wording(line)
    out.assert_untouched()


def test_duplicate_key_names_both_rows(tmp_path: Path, out: OutFolder) -> None:
    cols = valid_columns()
    cols["query_id"][4], cols["parent_id"][4] = "q1", "p2"  # row 5 repeats row 2's key
    path = write(tmp_path, cols)
    line = assert_one_line_error(score_cli(path, out), path.name, "query_id", "parent_id")
    assert "duplicate" in wording(line)
    assert re.search(r"\brow 2\b", wording(line)) and re.search(r"\brow 5\b", wording(line)), line
    assert "'q1'" in wording(line) and "'p2'" in wording(line)
    out.assert_untouched()


# ---------------------------------------------------------------------------------------------
# the same checks through CSV and JSONL: row numbers are 1-based data rows


ROW_CASES = {
    "null_rrf_sum": ("rrf_sum", lambda: with_value("rrf_sum", None)),
    "negative_total_chunks": ("total_chunks", lambda: with_value("total_chunks", -3)),
    "coverage_ratio_above_1": ("coverage_ratio", lambda: with_value("coverage_ratio", 1.5)),
    "negative_coverage": ("coverage", lambda: with_value("coverage", -1.0)),
}


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("case", sorted(ROW_CASES))
def test_row_problem_in_text_formats(tmp_path: Path, out: OutFolder, fmt: str, case: str) -> None:
    column, build = ROW_CASES[case]
    path = write(tmp_path, build(), fmt)
    assert_row_error(score_cli(path, out), out, path, column)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_missing_column_in_text_formats(tmp_path: Path, out: OutFolder, fmt: str) -> None:
    cols = valid_columns()
    del cols["coverage_ratio"]
    path = write(tmp_path, cols, fmt)
    line = assert_one_line_error(score_cli(path, out), path.name, "coverage_ratio")
    assert "missing" in wording(line)
    out.assert_untouched()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_wrong_type_in_text_formats(tmp_path: Path, out: OutFolder, fmt: str) -> None:
    cols = valid_columns()
    cols["rrf_sum"] = ["high", "low", "mid", "high", "low"]
    path = write(tmp_path, cols, fmt)
    assert_one_line_error(score_cli(path, out), path.name, "rrf_sum")
    out.assert_untouched()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_duplicate_key_in_text_formats(tmp_path: Path, out: OutFolder, fmt: str) -> None:
    cols = valid_columns()
    cols["query_id"][4], cols["parent_id"][4] = "q1", "p2"
    path = write(tmp_path, cols, fmt)
    line = assert_one_line_error(score_cli(path, out), path.name, "query_id", "parent_id")
    assert re.search(r"\brow 2\b", wording(line)) and re.search(r"\brow 5\b", wording(line)), line
    out.assert_untouched()


def test_empty_string_id_in_jsonl(tmp_path: Path, out: OutFolder) -> None:
    path = write(tmp_path, with_value("parent_id", ""), "jsonl")
    line = assert_one_line_error(score_cli(path, out), path.name, "parent_id")
    assert re.search(rf"\brow {BAD_ROW}\b", wording(line)) and "empty" in wording(line), line
    out.assert_untouched()


def test_empty_field_id_in_csv(tmp_path: Path, out: OutFolder) -> None:
    # CSV cannot tell "" from a missing value: DuckDB reads an empty field as NULL. Either
    # wording is fine as long as the row and the column are named.
    path = write(tmp_path, with_value("parent_id", ""), "csv")
    line = assert_one_line_error(score_cli(path, out), path.name, "parent_id")
    assert re.search(rf"\brow {BAD_ROW}\b", wording(line)) and re.search(
        r"empty|null", wording(line)
    ), line
    out.assert_untouched()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_row_number_is_the_data_row_in_a_larger_file(tmp_path: Path, fmt: str) -> None:
    # Regression: row numbers once came from row_number() OVER (PARTITION BY file) with no
    # ORDER BY; with parallel reads of a file of this size the reported row was often wrong
    # (e.g. 'row 13616' for data row 30000), depending on thread scheduling.
    n = 30_000
    cols = {
        "query_id": [f"q{i}" for i in range(n)],
        "parent_id": ["p"] * n,
        "rrf_sum": [0.5] * n,
        "max_score": [0.5] * n,
        "coverage": [1.0] * n,
        "total_chunks": [3] * n,
        "coverage_ratio": [0.5] * n,
    }
    cols["coverage_ratio"][n - 1] = 1.5
    path = write(tmp_path, cols, fmt)
    # The misnumbering depended on thread scheduling: try several times, stop at the first miss.
    for attempt in range(12):
        with pytest.raises(DuckscoreError) as caught:
            run_score(str(path), tmp_path / f"out{attempt}", settings=EngineSettings(threads=8))
        message = str(caught.value)
        assert f"query_id='q{n - 1}'" in message
        assert re.search(rf"\brow {n}\b", message), message


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_row_number_in_the_second_of_two_larger_files(tmp_path: Path, fmt: str) -> None:
    # Row numbers restart in every file, also when both files are read in parallel.
    n = 20_000
    for name in ("a", "b"):
        cols = {
            "query_id": [f"{name}{i}" for i in range(n)],
            "parent_id": ["p"] * n,
            "rrf_sum": [0.5] * n,
            "max_score": [0.5] * n,
            "coverage": [1.0] * n,
            "total_chunks": [3] * n,
            "coverage_ratio": [0.5] * n,
        }
        if name == "b":
            cols["coverage_ratio"][n - 1] = 1.5
        write(tmp_path, cols, fmt, stem=name)
    for attempt in range(6):
        with pytest.raises(DuckscoreError) as caught:
            run_score(
                str(tmp_path / f"*.{fmt}"),
                tmp_path / f"out{attempt}",
                settings=EngineSettings(threads=8),
            )
        message = str(caught.value)
        assert re.search(word(f"b.{fmt}"), message) and f"query_id='b{n - 1}'" in message, message
        assert re.search(rf"\brow {n}\b", wording(message)), message


# ---------------------------------------------------------------------------------------------
# folders, globs, hive partitions


def test_bad_row_in_second_file_of_a_folder(tmp_path: Path, out: OutFolder) -> None:
    folder = tmp_path / "features"
    folder.mkdir()
    cols = valid_columns()
    first = {c: v[:3] for c, v in cols.items()}
    second = {c: v[3:] for c, v in cols.items()}
    second["coverage_ratio"][1] = 2.0  # data row 2 of b.parquet, key (q2, p4)
    write_parquet(folder / "a.parquet", first)
    bad = write_parquet(folder / "b.parquet", second)
    line = assert_row_error(
        score_cli(folder, out), out, bad, "coverage_ratio", row=2, key=("q2", "p4")
    )
    assert not re.search(word("a.parquet"), line), line


def test_bad_row_in_second_file_of_a_glob(tmp_path: Path, out: OutFolder) -> None:
    cols = valid_columns()
    write_parquet(tmp_path / "part-1.parquet", {c: v[:3] for c, v in cols.items()})
    second = {c: v[3:] for c, v in cols.items()}
    second["rrf_sum"][0] = None
    bad = write_parquet(tmp_path / "part-2.parquet", second)
    assert_row_error(
        score_cli(tmp_path / "part-*.parquet", out), out, bad, "rrf_sum", row=1, key=BAD_KEY
    )


def test_duplicate_key_across_two_files_names_both(tmp_path: Path, out: OutFolder) -> None:
    folder = tmp_path / "features"
    folder.mkdir()
    cols = valid_columns()
    write_parquet(folder / "a.parquet", cols)
    again = write_parquet(folder / "b.parquet", {c: [v[1]] for c, v in cols.items()})  # row 2 of a
    line = assert_one_line_error(score_cli(folder, out), "a.parquet", "b.parquet")
    assert "duplicate" in wording(line)
    assert re.search(r"\brow 2\b", wording(line)) and re.search(r"\brow 1\b", wording(line)), line
    assert again.name in line
    out.assert_untouched()


def test_folder_mixing_file_types(tmp_path: Path, out: OutFolder) -> None:
    folder = tmp_path / "features"
    folder.mkdir()
    cols = valid_columns()
    write_parquet(folder / "a.parquet", {c: v[:3] for c, v in cols.items()})
    write_csv(folder / "b.csv", {c: v[3:] for c, v in cols.items()})
    line = assert_one_line_error(score_cli(folder, out))
    assert "csv" in wording(line) and "parquet" in wording(line), line
    out.assert_untouched()


def test_nan_text_in_csv(tmp_path: Path, out: OutFolder) -> None:
    path = write(tmp_path, with_value("max_score", "NaN"), "csv")
    line = assert_row_error(score_cli(path, out), out, path, "max_score")
    assert "nan" in wording(line).lower()


def test_a_column_named_twice_in_a_csv_header(tmp_path: Path, out: OutFolder) -> None:
    # DuckDB renamed the second `max_score` to max_score_1 and the first was read silently
    path = write(tmp_path, valid_columns(), "csv")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines = [f"{line},{line.split(',')[3]}" for line in lines]  # max_score again, other values
    lines[0] = (
        lines[0].replace(",max_score", ",MAX_SCORE", 2).replace(",MAX_SCORE", ",max_score", 1)
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert "column 'MAX_SCORE' appears twice in the header" in line, line
    out.assert_untouched()


def test_a_latin1_csv_names_the_encoding_and_the_line(tmp_path: Path, out: OutFolder) -> None:
    # DuckDB says only "CSV Error on Line: 3"
    path = write(tmp_path, with_value("parent_id", "pé", index=1), "csv")
    path.write_bytes(path.read_text(encoding="utf-8").encode("latin-1"))
    line = assert_one_line_error(score_cli(path, out), path.name)
    assert "line 3): not UTF-8 text (byte 0xe9); save the file as UTF-8" in line, line
    out.assert_untouched()


def test_out_is_an_existing_file(tmp_path: Path) -> None:
    features = write(tmp_path, valid_columns())
    target = tmp_path / "out"
    target.write_bytes(b"not a folder\n")
    result = invoke("score", "--features", str(features), "--out", str(target), *SEED_POLICY)
    line = assert_one_line_error(result, "--out")
    assert "folder" in wording(line) or "directory" in wording(line), line
    assert target.read_bytes() == b"not a folder\n"
    assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_hive_partitioned_folder_scores(tmp_path: Path) -> None:
    cols = valid_columns()
    folder = tmp_path / "features"
    for query_id in ("q1", "q2"):
        keep = [i for i, q in enumerate(cols["query_id"]) if q == query_id]
        part = {c: [v[i] for i in keep] for c, v in cols.items() if c != "query_id"}
        (folder / f"query_id={query_id}").mkdir(parents=True)
        write_parquet(folder / f"query_id={query_id}" / "part.parquet", part)
    out_dir = tmp_path / "out"
    result = invoke("score", "--features", str(folder), "--out", str(out_dir), *SEED_POLICY)
    assert result.exit_code == 0, (result.stderr, result.exception)
    parents = pd.read_parquet(out_dir / "parents.parquet")
    got = sorted(zip(parents["query_id"], parents["parent_id"]))
    assert got == sorted(zip(cols["query_id"], cols["parent_id"]))
    # the values travelled with their keys
    by_key = dict(zip(zip(parents["query_id"], parents["parent_id"]), parents["rrf_sum"]))
    for q, p, r in zip(cols["query_id"], cols["parent_id"], cols["rrf_sum"]):
        assert by_key[(q, p)] == r
    contract = [json.loads(line) for line in (out_dir / "contract.jsonl").read_text().splitlines()]
    assert [c["query_id"] for c in contract] == ["q1", "q2"]
    for name in ("queries.parquet", "manifest.json"):
        assert (out_dir / name).is_file()


def test_hive_partitioned_glob_scores(tmp_path: Path) -> None:
    cols = valid_columns()
    folder = tmp_path / "features"
    for query_id in ("q1", "q2"):
        keep = [i for i, q in enumerate(cols["query_id"]) if q == query_id]
        (folder / f"query_id={query_id}").mkdir(parents=True)
        write_parquet(
            folder / f"query_id={query_id}" / "part.parquet",
            {c: [v[i] for i in keep] for c, v in cols.items() if c != "query_id"},
        )
    out_dir = tmp_path / "out"
    result = invoke(
        "score",
        *("--features", str(folder / "query_id=*" / "*.parquet")),
        *("--out", str(out_dir), *SEED_POLICY),
    )
    assert result.exit_code == 0, (result.stderr, result.exception)
    parents = pd.read_parquet(out_dir / "parents.parquet")
    assert sorted(zip(parents["query_id"], parents["parent_id"])) == sorted(
        zip(cols["query_id"], cols["parent_id"])
    )


@pytest.mark.parametrize("given", ["file", "glob", "folder"])
def test_key_value_folder_above_the_input_is_not_hive(tmp_path: Path, given: str) -> None:
    # Regression: hive partitioning was switched on when ANY ancestor folder contained '=', and
    # the folder's value (here rrf_sum=0) silently replaced the file's column.
    folder = tmp_path / "rrf_sum=0"
    folder.mkdir()
    cols = valid_columns()
    path = write_parquet(folder / "features.parquet", cols)
    features = {"file": str(path), "glob": str(folder / "*.parquet"), "folder": str(folder)}[given]
    out_dir = tmp_path / "out"
    result = invoke("score", "--features", features, "--out", str(out_dir), *SEED_POLICY)
    assert result.exit_code == 0, result.stderr
    parents = pd.read_parquet(out_dir / "parents.parquet")
    by_key = dict(zip(zip(parents["query_id"], parents["parent_id"]), parents["rrf_sum"]))
    assert by_key == dict(zip(zip(cols["query_id"], cols["parent_id"]), cols["rrf_sum"]))


def test_total_chunks_beyond_bigint(tmp_path: Path, out: OutFolder) -> None:
    # A whole number, so only a range check can catch it before the CAST to BIGINT in the SQL
    # (which used to fail with a DuckDB conversion error naming neither file nor row).
    cols = with_value("total_chunks", 1e20)
    cols["total_chunks"] = [float(v) for v in cols["total_chunks"]]
    path = write(tmp_path, cols)
    assert_row_error(score_cli(path, out), out, path, "total_chunks")


# ---------------------------------------------------------------------------------------------
# policy errors: exit 2, one line, the key named


@pytest.fixture
def features(tmp_path: Path) -> Path:
    return write(tmp_path, valid_columns())


def packaged_policy_text() -> str:
    return (policies_dir("score") / "overall_v1.yaml").read_text(encoding="utf-8")


def test_set_unknown_key_suggests_close_match(features: Path, out: OutFolder) -> None:
    line = assert_one_line_error(score_cli(features, out, "--set", "alpah=0.5"), "alpah")
    assert re.search(r"did you mean '?alpha'?", wording(line)), line
    out.assert_untouched()


def test_set_unknown_nested_key_suggests_close_match(features: Path, out: OutFolder) -> None:
    result = score_cli(features, out, "--set", "normalization.p_low=0.2")
    line = assert_one_line_error(result)
    assert "p_low" in wording(line) and "p_lo" in wording(line).replace("p_low", ""), line
    out.assert_untouched()


def test_set_value_out_of_range(features: Path, out: OutFolder) -> None:
    line = assert_one_line_error(score_cli(features, out, "--set", "alpha=1.5"), "alpha")
    assert "1.5" in wording(line)
    out.assert_untouched()


def test_set_weights_not_summing_to_one(features: Path, out: OutFolder) -> None:
    line = assert_one_line_error(score_cli(features, out, "--set", "w1=0.6"), "w1")
    assert re.search(r"sum", wording(line)), line
    out.assert_untouched()


def test_set_t_low_above_t_high(features: Path, out: OutFolder) -> None:
    assert_one_line_error(score_cli(features, out, "--set", "T_low=0.9"), "T_low", "T_high")
    out.assert_untouched()


def test_set_non_numeric_value(features: Path, out: OutFolder) -> None:
    line = assert_one_line_error(score_cli(features, out, "--set", "alpha=abc"), "alpha")
    assert "abc" in wording(line)
    out.assert_untouched()


def test_set_accepts_exponent_notation(tmp_path: Path, features: Path) -> None:
    # YAML 1.1 (PyYAML's default) reads `1e-6` without a dot as a string.
    result = invoke(
        "score",
        "--features",
        str(features),
        "--out",
        str(tmp_path / "out"),
        "--set",
        "normalization.eps=1e-6",
        *SEED_POLICY,
    )
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["policy"]["parameters"]["normalization"]["eps"] == 1e-6
    # and the same spelling inside a policy file
    text = packaged_policy_text()
    assert "eps: 1.0e-9" in text
    policy = tmp_path / "policy.yaml"
    policy.write_text(text.replace("eps: 1.0e-9", "eps: 1e-9"), encoding="utf-8")
    result = invoke(
        "score",
        "--features",
        str(features),
        "--out",
        str(tmp_path / "out2"),
        "--policy",
        str(policy),
    )
    assert result.exit_code == 0, result.stderr


def test_unknown_policy_name(features: Path, out: OutFolder) -> None:
    line = assert_one_line_error(score_cli(features, out, "--policy", "overall_v99"), "overall_v99")
    assert "overall_v1" in wording(line)  # lists what exists
    out.assert_untouched()


def test_policy_file_with_unknown_top_level_key(
    tmp_path: Path, features: Path, out: OutFolder
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(packaged_policy_text() + "colour: blue\n", encoding="utf-8")
    assert_one_line_error(score_cli(features, out, "--policy", str(policy)), policy.name, "colour")
    out.assert_untouched()


def test_policy_file_with_missing_parameter(tmp_path: Path, features: Path, out: OutFolder) -> None:
    text = packaged_policy_text()
    kept = [
        line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("R_hitl:")
    ]
    assert len(kept) == len(text.splitlines()) - 1
    policy = tmp_path / "policy.yaml"
    policy.write_text("".join(kept), encoding="utf-8")
    line = assert_one_line_error(
        score_cli(features, out, "--policy", str(policy)), policy.name, "R_hitl"
    )
    assert "missing" in wording(line)
    out.assert_untouched()


def test_policy_file_with_invalid_yaml_names_the_line(
    tmp_path: Path, features: Path, out: OutFolder
) -> None:
    lines = packaged_policy_text().splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines, 1) if line.lstrip().startswith("beta:"))
    lines[number - 1] = "  beta: 0.5: 0.7\n"  # "mapping values are not allowed here"
    policy = tmp_path / "policy.yaml"
    policy.write_text("".join(lines), encoding="utf-8")
    line = assert_one_line_error(score_cli(features, out, "--policy", str(policy)), policy.name)
    assert re.search(rf"(:|line ){number}\b", line), f"line {number} not named in {line!r}"
    out.assert_untouched()


def test_policy_file_not_found(tmp_path: Path, features: Path, out: OutFolder) -> None:
    missing = tmp_path / "nope.yaml"
    assert_one_line_error(score_cli(features, out, "--policy", str(missing)), missing.name)
    out.assert_untouched()


def test_policy_errors_through_sql_score() -> None:
    line = assert_one_line_error(invoke("sql", "score", "--set", "alpha=1.5"), "alpha")
    assert "1.5" in wording(line)


# ---------------------------------------------------------------------------------------------
# bad options


BAD_OPTIONS = {
    "threads_0": (["--threads", "0"], "--threads"),
    # 100,000 threads aborted DuckDB (exit 134) before the bound
    "threads_100000": (["--threads", "100000"], "--threads must be between 1 and 1024"),
    "memory_limit_nonsense": (["--memory-limit", "nonsense"], "--memory-limit"),
    "top_n_0": (["--top-n", "0"], "--top-n"),
}


# Regression for threads_0 / top_n_0: click's IntRange used to print its multi-line
# "Usage: ... Error: Invalid value" block instead of one `duckscore: error:` line.
@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_bad_option_is_one_line_error(features: Path, out: OutFolder, case: str) -> None:
    args, option = BAD_OPTIONS[case]
    line = assert_one_line_error(score_cli(features, out, *args))
    assert option in line
    out.assert_untouched()


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_bad_option_exits_2_and_writes_nothing(features: Path, out: OutFolder, case: str) -> None:
    args, option = BAD_OPTIONS[case]
    result = score_cli(features, out, *args)
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert option in result.stderr
    assert result.stdout == ""
    out.assert_untouched()


@pytest.mark.parametrize(
    "args, mentions",
    [
        (["score", "--out", "OUT"], ["--features"]),
        (["score", "--features", "FEATURES", "--out", "OUT", "--bogus"], ["--bogus"]),
        (
            ["score", "--features", "FEATURES", "--out", "OUT", "--top-n", "many"],
            ["--top-n", "many"],
        ),
        (["sql", "score", "--stage", "nope"], ["--stage", "nope"]),
        (["nosuchcommand"], ["nosuchcommand"]),
    ],
    ids=["missing_features", "unknown_option", "non_integer_top_n", "bad_stage", "unknown_command"],
)
def test_usage_errors_are_one_line(
    features: Path, out: OutFolder, args: list[str], mentions: list[str]
) -> None:
    args = [str(features) if a == "FEATURES" else str(out.path) if a == "OUT" else a for a in args]
    assert_one_line_error(invoke(*args), *mentions)
    out.assert_untouched()


def test_bad_options_through_the_python_api(features: Path, tmp_path: Path) -> None:
    with pytest.raises(DuckscoreError, match="--top-n"):
        run_score(features, tmp_path / "o1", top_n=0)
    with pytest.raises(DuckscoreError, match="--threads"):
        run_score(features, tmp_path / "o2", settings=EngineSettings(threads=0))
    with pytest.raises(DuckscoreError, match="--memory-limit"):
        run_score(features, tmp_path / "o3", settings=EngineSettings(memory_limit="nonsense"))
    assert not any((tmp_path / name).exists() for name in ("o1", "o2", "o3"))


# ---------------------------------------------------------------------------------------------
# --help


def command_at(path: list[str]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


HELP_MUST_MENTION = {
    (): ["--version", "--quiet", "--help", "score", "sql", "demo", "policy"],
    ("score",): [
        "--features",
        "--out",
        "--queries",
        "--top-n",
        "--policy",
        "--set",
        "--threads",
        "--memory-limit",
        "--temp-dir",
        "--help",
    ],
    ("sql", "score"): ["--stage", "--top-n", "--policy", "--set", "--help"],
    ("demo",): ["--out", "--threads", "--memory-limit", "--temp-dir", "--help"],
}


@pytest.mark.parametrize(
    "path", sorted(HELP_MUST_MENTION), ids=lambda p: " ".join(("duckscore",) + p)
)
def test_help_mentions_every_option(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, (result.stderr, result.exception)
    text = result.stdout
    assert text.startswith("Usage: ")
    expected = set(HELP_MUST_MENTION[path])
    for param in command_at(list(path)).params:  # and whatever options were added since
        if isinstance(param, click.Option) and not param.hidden:
            expected.update(o for o in param.opts if o.startswith("--"))
    missing = sorted(o for o in expected if not re.search(word(o), text))
    assert not missing, f"not in `{' '.join(path)} --help`: {missing}"


# ---------------------------------------------------------------------------------------------
# the installed console script, as a user runs it


def run_console(*args: str) -> subprocess.CompletedProcess[str]:
    assert CONSOLE_SCRIPT.is_file(), f"{CONSOLE_SCRIPT} is not installed"
    return subprocess.run(
        [str(CONSOLE_SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )


def test_console_script_bad_input_quiet(tmp_path: Path) -> None:
    path = write(tmp_path, with_value("coverage_ratio", 1.5))
    out_dir = tmp_path / "out"
    proc = run_console("-q", "score", "--features", str(path), "--out", str(out_dir))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.endswith("\n") and proc.stderr.count("\n") == 1, repr(proc.stderr)
    assert proc.stderr.startswith("duckscore: error: ")
    assert path.name in proc.stderr and "coverage_ratio" in proc.stderr
    assert_names_row(proc.stderr, BAD_ROW, BAD_KEY)
    assert not out_dir.exists()


def test_console_script_bad_input_default_flags(tmp_path: Path) -> None:
    # Regression: without -q a progress line used to precede the error (two lines on stderr).
    # Progress is now on only when stderr is a terminal; here it is a pipe.
    path = write(tmp_path, with_value("coverage_ratio", 1.5))
    out_dir = tmp_path / "out"
    proc = run_console("score", "--features", str(path), "--out", str(out_dir))
    assert proc.returncode == 2, proc.stderr
    assert not out_dir.exists()
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("duckscore: error: "), repr(
        proc.stderr
    )


def test_console_script_with_progress_ends_with_one_error_line(tmp_path: Path) -> None:
    path = write(tmp_path, with_value("coverage_ratio", 1.5))
    out_dir = tmp_path / "out"
    proc = run_console("--progress", "score", "--features", str(path), "--out", str(out_dir))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith("duckscore: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    assert not out_dir.exists()
