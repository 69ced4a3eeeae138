"""`duckscore entities`: the table written whole with its column types, in any table format by
the suffix; a bad --repo, --rev or --out refused in one line, exit status 2, the output as it
was."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from .repos import FIRST, git, write

SCHEMA = pa.schema(
    [("revision", pa.string()), ("file_path", pa.string()), ("kind", pa.string()),
     ("qualified_name", pa.string()), ("module_id", pa.string()), ("entity_id", pa.string()),
     ("start_line", pa.int32()), ("end_line", pa.int32())]
)  # fmt: skip


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_the_table_of_a_folder_as_parquet(tmp_path: Path) -> None:
    write(tmp_path / "repo", {"b.py": FIRST, "a.py": "class A:\n    x = 1\n"})
    out = tmp_path / "out" / "entities.parquet"
    done = invoke("entities", "--repo", str(tmp_path / "repo"), "--out", str(out))
    assert done.exit_code == 0, done.stderr
    assert done.stderr == f"duckscore: wrote 2 entities of 2 files to {out}\n" and done.stdout == ""
    table = pq.read_table(out)
    assert table.schema.remove_metadata() == SCHEMA
    assert table.to_pylist() == [
        {"revision": None, "file_path": "a.py", "kind": "file", "qualified_name": "",
         "module_id": None, "entity_id": "a.py", "start_line": 1, "end_line": 2},
        {"revision": None, "file_path": "a.py", "kind": "class", "qualified_name": "A",
         "module_id": "a.py:A", "entity_id": "a.py:A", "start_line": 1, "end_line": 2},
        {"revision": None, "file_path": "b.py", "kind": "file", "qualified_name": "",
         "module_id": None, "entity_id": "b.py", "start_line": 1, "end_line": 2},
        {"revision": None, "file_path": "b.py", "kind": "function", "qualified_name": "greet",
         "module_id": "b.py:greet", "entity_id": "b.py:greet", "start_line": 1, "end_line": 2},
    ]  # fmt: skip


def test_revisions_as_csv_and_a_warning_for_a_file_that_does_not_parse(
    repository: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, first, _ = repository
    write(repo, {"broken.py": "def f(:\n"})
    git(repo, "add", "broken.py")
    git(repo, "commit", "-q", "-m", "broken")
    out = tmp_path / "entities.csv"
    done = invoke("entities", "--repo", str(repo), "--rev", first, "--rev", "HEAD",
                  "--exclude", "src/*", "--out", str(out))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert done.stderr.splitlines() == [
        "duckscore: warning: HEAD:broken.py:1: does not parse (invalid syntax): kept as a file "
        "row, its entities unknown",
        f"duckscore: wrote 0 entities of 1 file at 2 revisions to {out}",
    ]
    assert out.read_text().splitlines() == [
        "revision,file_path,kind,qualified_name,module_id,entity_id,start_line,end_line",
        'HEAD,broken.py,file,"",,broken.py,1,1',  # '': the name; empty: NULL,
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rev", "v9"], "--rev v9: no such commit in {repo}"),
        (["--rev", "HEAD", "--rev", "nope"], "--rev nope: no such commit in {repo}"),
        (
            ["--include", "docs/*"],
            "--repo {repo}: no Python file (*.py) to read (--include docs/*)",
        ),
    ],
)
def test_a_bad_revision_or_repository_is_one_line_and_the_output_is_kept(
    repository: tuple[Path, str, str], tmp_path: Path, args: list[str], message: str
) -> None:
    repo = repository[0]
    out = tmp_path / "entities.parquet"
    out.write_bytes(b"before")
    done = invoke("entities", "--repo", str(repo), *args, "--out", str(out))
    assert done.exit_code == 2
    assert done.stderr == f"duckscore: error: {message.format(repo=repo)}\n"
    assert out.read_bytes() == b"before" and sorted(p.name for p in tmp_path.iterdir()) == [
        "entities.parquet", "repo",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("repo_name", "out_name", "message"),
    [
        ("missing", "e.parquet", "--repo {tmp}/missing: no such folder"),
        (
            "plain",
            "e.parquet",
            "--repo {tmp}/plain: not a git repository (--rev reads a repository's history)",
        ),
        ("plain", "e.txt", "--out {tmp}/e.txt: unknown file type (use "),
        ("plain", "", "Invalid value for '--out': is empty: give the output a name"),
    ],
)
def test_a_bad_repo_or_out_is_refused_before_anything_is_written(
    tmp_path: Path, repo_name: str, out_name: str, message: str
) -> None:
    write(tmp_path / "plain", {"a.py": FIRST})
    out = str(tmp_path / out_name) if out_name else ""
    done = invoke("entities", "--repo", str(tmp_path / repo_name), "--rev", "HEAD", "--out", out)
    assert done.exit_code == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"duckscore: error: {message.format(tmp=tmp_path)}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]
