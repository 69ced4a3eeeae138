"""An output whose folder cannot be written in is refused in one line naming that folder and the
cause (issue 47 §4: a read-only parent said `cannot lock (Permission denied)`, no folder)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from duckscore.cli import cli

from ..cli.test_success_lines import LOG
from ..helpers import SCIFACT
from ..instincts.test_reading import unwritable

# a user's folder without write permission, or root's immutable one
CAUSE = r"\((Permission denied|Operation not permitted)\)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("fuse", "--log", "log.csv", "--out", "ro/new"),
         "--out ro/new: cannot lock: the folder {ro}, where the lock goes, is not writable by "
         "this user {cause}; write the output elsewhere"),
        (("run", "--log", "log.csv", "--out", "ro/a/b"),
         "--out ro/a/b: cannot create: the folder {ro} is not writable by this user {cause}; "
         "write the output elsewhere"),
        (("eval", "--run", str(SCIFACT / "reference_rrf_k60.parquet"),
          "--qrels", str(SCIFACT / "qrels.parquet"), "--per-query", "ro/pq.parquet"),
         "--per-query ro/pq.parquet: cannot lock: the folder {ro}, where the lock goes, is not "
         "writable by this user {cause}; write the output elsewhere"),
    ],
)  # fmt: skip
def test_an_unwritable_folder_is_named_with_the_cause(
    args: tuple[str, ...], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("log.csv").write_text(LOG, encoding="utf-8")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    (read_only / "keep.txt").write_text("mine", encoding="utf-8")
    with unwritable(read_only):
        done = CliRunner().invoke(cli, ["-q", *args])
    assert done.exit_code == 2 and done.stdout == "", done.stderr
    expected = re.escape(f"duckscore: error: {message}\n").replace(
        r"\{ro\}", re.escape(str(read_only))
    )
    assert re.fullmatch(expected.replace(r"\{cause\}", CAUSE), done.stderr), done.stderr
    assert sorted(p.name for p in read_only.iterdir()) == ["keep.txt"]
