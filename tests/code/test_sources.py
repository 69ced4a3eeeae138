"""The files an entities table reads (code/sources.py, code/table.py): a folder's (hidden
folders, symlinks and other files left out, --include / --exclude, posix paths sorted) and a
git repository's at revisions (a throwaway repository of two commits made here, read as a work
tree and as a bare clone), the table of both read against rows written by hand."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from duckscore.code.entities import Entity
from duckscore.code.sources import Selection, folder_files, revision_files
from duckscore.code.table import entities_table
from duckscore.core.errors import InputError

from .repos import FIRST, git, write


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(
        root,
        {
            "pkg/__init__.py": "",
            "pkg/z\u00fcrich.py": "def caf\u00e9():\n    pass\n",
            "pkg/sub/deep.py": "x = 1\n",
            "pkg/notes.txt": "def not_python(): pass\n",
            "pkg/.hidden.py": "def hidden(): pass\n",
            ".venv/lib/site.py": "def hidden(): pass\n",
            "tests/test_pkg.py": "def test_it(): pass\n",
            "setup.py": "",
        },
    )
    outside = tmp_path / "outside"
    write(outside, {"linked.py": "def linked(): pass\n"})
    (root / "pkg" / "link.py").symlink_to(outside / "linked.py")
    (root / "pkg" / "linked_folder").symlink_to(outside, target_is_directory=True)
    return root


def test_a_folder_s_python_files_sorted_hidden_and_linked_ones_left_out(folder: Path) -> None:
    found = folder_files(folder, Selection())
    assert [f.path for f in found] == [
        "pkg/__init__.py", "pkg/sub/deep.py", "pkg/z\u00fcrich.py", "setup.py", "tests/test_pkg.py",
    ]  # fmt: skip
    assert found[2].data == "def caf\u00e9():\n    pass\n".encode()


@pytest.mark.parametrize(
    ("include", "exclude", "paths"),
    [
        (("pkg/*",), (), ["pkg/__init__.py", "pkg/sub/deep.py", "pkg/z\u00fcrich.py"]),
        ((), ("tests/*", "*/__init__.py"), ["pkg/sub/deep.py", "pkg/z\u00fcrich.py", "setup.py"]),
        (
            ("pkg/*", "setup.py"),
            ("*/sub/*",),
            ["pkg/__init__.py", "pkg/z\u00fcrich.py", "setup.py"],
        ),
        (("*.txt",), (), []),
    ],
)
def test_include_and_exclude_globs_match_the_whole_relative_path(
    folder: Path, include: tuple[str, ...], exclude: tuple[str, ...], paths: list[str]
) -> None:
    assert [f.path for f in folder_files(folder, Selection(include, exclude))] == paths


def test_the_folder_s_table(folder: Path) -> None:
    rows = entities_table(folder)
    assert [
        (r.revision, r.file_path, r.kind, r.entity_id, r.start_line, r.end_line) for r in rows
    ] == [
        (None, "pkg/__init__.py", "file", "pkg/__init__.py", 1, 1),
        (None, "pkg/sub/deep.py", "file", "pkg/sub/deep.py", 1, 1),
        (None, "pkg/z\u00fcrich.py", "file", "pkg/z\u00fcrich.py", 1, 2),
        (None, "pkg/z\u00fcrich.py", "function", "pkg/z\u00fcrich.py:caf\u00e9", 1, 2),
        (None, "setup.py", "file", "setup.py", 1, 1),
        (None, "tests/test_pkg.py", "file", "tests/test_pkg.py", 1, 1),
        (None, "tests/test_pkg.py", "function", "tests/test_pkg.py:test_it", 1, 1),
    ]


def test_a_repository_at_two_revisions_each_row_saying_its_own(
    repository: tuple[Path, str, str],
) -> None:
    repo, first, second = repository
    rows = entities_table(repo, ["HEAD~1", "HEAD"])
    got = [(r.revision, r.file_path, r.kind, r.entity_id, r.start_line, r.end_line) for r in rows]
    assert got == [  # sorted by revision: HEAD before HEAD~1; the file on disk is not read
        ("HEAD", "src/greet.py", "file", "src/greet.py", 1, 7),
        ("HEAD", "src/greet.py", "class", "src/greet.py:Greeter", 1, 3),
        ("HEAD", "src/greet.py", "method", "src/greet.py:Greeter.__init__", 2, 3),
        ("HEAD", "src/greet.py", "function", "src/greet.py:greet", 6, 7),
        ("HEAD", "src/\u00e9t\u00e9.py", "file", "src/\u00e9t\u00e9.py", 1, 1),
        ("HEAD", "src/\u00e9t\u00e9.py", "function", "src/\u00e9t\u00e9.py:summer", 1, 1),
        ("HEAD~1", "src/greet.py", "file", "src/greet.py", 1, 2),
        ("HEAD~1", "src/greet.py", "function", "src/greet.py:greet", 1, 2),
    ]
    assert first != second and git(repo, "rev-parse", "HEAD~1") == first


def test_a_bare_clone_and_a_subfolder_read_the_same_commit(
    repository: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, first, _ = repository
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    assert revision_files(bare, first, Selection()) == revision_files(
        repo / "src", first, Selection()
    )
    [only] = revision_files(bare, first, Selection())
    assert (only.path, only.data) == ("src/greet.py", FIRST.encode())


def test_the_table_is_rows_in_its_order(repository: tuple[Path, str, str]) -> None:
    repo, first, second = repository
    rows = entities_table(repo, [second, first, second])  # a revision given twice: read once
    assert rows == sorted(rows, key=Entity.sort_key) and len(rows) == 8
    assert [r.revision for r in rows].count(second) == 6


@pytest.mark.parametrize(
    ("revision", "message"),
    [
        ("nope", "--rev nope: no such commit in "),
        ("HEAD~5", "--rev HEAD~5: no such commit in "),
        ("HEAD:src", "--rev HEAD:src: no such commit in "),
        ("--all", "--rev --all: no such commit in "),
    ],
)
def test_a_revision_that_is_not_a_commit_is_refused_naming_it(
    repository: tuple[Path, str, str], revision: str, message: str
) -> None:
    with pytest.raises(InputError, match=f"^{message}") as raised:
        entities_table(repository[0], [revision])
    assert "\n" not in str(raised.value)


def test_a_folder_that_is_missing_or_not_a_repository_is_refused(
    folder: Path, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match=r"^--repo .*missing: no such folder$"):
        entities_table(tmp_path / "missing")
    with pytest.raises(InputError, match=r"^--repo .*missing: no such folder$"):
        entities_table(tmp_path / "missing", ["HEAD"])
    with pytest.raises(InputError, match=r"^--repo .*project: not a git repository"):
        entities_table(folder, ["HEAD"])
    with pytest.raises(
        InputError, match=r"^--repo .*: no Python file \(\*\.py\) to read \(--include \*\.txt\)$"
    ):
        entities_table(folder, selection=Selection(("*.txt",)))
