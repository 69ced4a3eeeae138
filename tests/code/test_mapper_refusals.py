"""What a code run refuses, in one line naming where, exit status 2, nothing written: lines a
block does not have, ids that are not `path:start:end` among ids that are, lines that run
backwards or past their file, files the entities table does not hold (most of them: another
repository), a block id given two spans or a span two ids, a source of mixed granularities."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli

from .tables import entities, hits

BLOCKS = [
    ("q1", "s1", "pkg/a.py:8:12", 9.0),
    ("q1", "s1", "pkg/b.py:9:13", 8.0),
    ("q1", "s2", "pkg/a.py:8:12", 5.0),
]


def refused(log: pd.DataFrame, tmp_path: Path, table: pd.DataFrame | None = None) -> str:
    """`duckscore fuse --entities` of `log`: its one-line error (it must fail)."""
    log_file, table_file = tmp_path / "log.parquet", tmp_path / "entities.parquet"
    log.to_parquet(log_file)
    (entities() if table is None else table).to_parquet(table_file)
    out = tmp_path / "out"
    done = CliRunner().invoke(
        cli,
        ["fuse", "--log", str(log_file), "--entities", str(table_file), "--recipe",
         "code_rrf_v1", "--out", str(out)],
    )  # fmt: skip
    assert done.exit_code == 2, done.output
    assert not out.exists()
    message = done.output.strip()
    assert message.startswith("duckscore: error: ") and "\n" not in message
    return message.removeprefix("duckscore: error: ").replace(f"{tmp_path}/", "")


def test_a_block_without_lines(tmp_path: Path) -> None:
    log = hits(BLOCKS)
    log.loc[1, "end_line"] = pd.NA
    assert refused(log, tmp_path) == (
        "--log (log.parquet, row 2, query_id='q1', source='s1', item_id='pkg/b.py:9:13'): "
        "a 'block' hit of a code log needs its lines: start_line or end_line "
        "is NULL"
    )


def test_an_id_not_of_the_form_among_ids_that_are(tmp_path: Path) -> None:
    log = hits(BLOCKS).drop(columns=["file_path", "start_line", "end_line"])
    log.loc[1, "item_id"] = "pkg/b.py#9"
    assert refused(log, tmp_path) == (
        "--log (log.parquet, row 2, query_id='q1', source='s1', item_id='pkg/b.py#9'): item_id 'pkg/b.py#9' is not of the form path:start:end, as the log's "
        "other block ids are"
    )


def test_an_id_whose_lines_no_integer_holds(tmp_path: Path) -> None:
    log = hits(BLOCKS).drop(columns=["file_path", "start_line", "end_line"])
    log.loc[1, "item_id"] = "pkg/b.py:9:99999999999999999999"
    assert refused(log, tmp_path).endswith(
        "item_id 'pkg/b.py:9:99999999999999999999' is not of the form path:start:end, as the "
        "log's other block ids are"
    )


def test_block_ids_without_lines_at_all(tmp_path: Path) -> None:
    log = hits(BLOCKS).drop(columns=["file_path", "start_line", "end_line"])
    log["item_id"] = ["a#1", "b#1", "a#1"]
    assert refused(log, tmp_path).endswith(
        "a 'block' hit of a code log needs its lines: give start_line and end_line, or ids of "
        "the form path:start:end (docs/code.md) (3 rows in all)"
    )


@pytest.mark.parametrize("parsed", [False, True], ids=["columns", "ids"])
def test_lines_that_run_backwards(parsed: bool, tmp_path: Path) -> None:
    log = hits(BLOCKS)
    log.loc[1, ["item_id", "start_line", "end_line"]] = ["pkg/b.py:13:9", 13, 9]
    if parsed:
        log = log.drop(columns=["file_path", "start_line", "end_line"])
    problem = (
        "item_id 'pkg/b.py:13:9': its start line is after its end line"
        if parsed
        else "lines '13-9' run backwards: start_line is after end_line"
    )
    assert refused(log, tmp_path) == (
        f"--log (log.parquet, row 2, query_id='q1', source='s1', item_id='pkg/b.py:13:9'): {problem}"
    )


def test_a_file_the_entities_do_not_hold(tmp_path: Path) -> None:
    log = hits([*BLOCKS, ("q2", "s1", "pkg/z.py:1:5", 1.0)])
    assert refused(log, tmp_path) == (
        "--log (log.parquet, query_id='q2', source='s1', item_id='pkg/z.py:1:5'): file "
        "'pkg/z.py' is not in --entities (entities.parquet) at revision 'r1'"
    )


def test_entities_of_another_repository(tmp_path: Path) -> None:
    """Most of the log's files unknown at its revisions: the message asks."""
    other = entities().assign(file_path=lambda t: "lib/" + t["file_path"])
    assert refused(hits(BLOCKS), tmp_path, other) == (
        "--log (log.parquet, query_id='q1', source='s1', item_id='pkg/a.py:8:12'): file "
        "'pkg/a.py' is not in --entities (entities.parquet) at revision 'r1': 2 of the log's 2 "
        "files are not, are they of another repository or revision?"
    )


def test_another_revision_is_another_file(tmp_path: Path) -> None:
    message = refused(hits(BLOCKS), tmp_path, entities(revision="r0"))
    assert "file 'pkg/a.py' is not in --entities (entities.parquet) at revision 'r1'" in message


def test_lines_past_the_end_of_the_file(tmp_path: Path) -> None:
    log = hits([*BLOCKS, ("q1", "s2", "pkg/b.py:11:30", 2.0)])
    assert refused(log, tmp_path) == (
        "--log (log.parquet, query_id='q1', source='s2', item_id='pkg/b.py:11:30'): lines "
        "11-30 run past the end of pkg/b.py, 20 lines at revision 'r1'"
    )


def test_one_id_two_spans(tmp_path: Path) -> None:
    log = hits([*BLOCKS, ("q2", "s1", "pkg/a.py:8:12", 1.0)])
    log.loc[3, "end_line"] = 14
    assert refused(log, tmp_path) == (
        "--log (log.parquet, query_id='q1', source='s1', item_id='pkg/a.py:8:12'): the source "
        "gives this item_id more than one line range (one is pkg/a.py:8-12)"
    )


def test_one_span_two_ids(tmp_path: Path) -> None:
    log = hits([*BLOCKS, ("q2", "s1", "pkg/a.py:8:12", 1.0)])
    log.loc[3, "item_id"] = "block-7"
    assert refused(log, tmp_path) == (
        "--log (log.parquet, query_id='q1', source='s1', item_id='block-7'): pkg/a.py lines "
        "8-12 also has the item_id 'pkg/a.py:8:12' in this source: one span, one id"
    )


def test_a_source_of_two_granularities(tmp_path: Path) -> None:
    log = hits([*BLOCKS, ("q1", "s1", "pkg/c.py", 1.0)])
    assert refused(log, tmp_path) == (
        "--log (log.parquet, row 4, query_id='q1', source='s1', item_id='pkg/c.py'): source 's1' mixes granularities: 'file' here, 'block' in its first row (a "
        "source's hits are all of one level)"
    )
