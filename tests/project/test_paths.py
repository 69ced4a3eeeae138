"""Nothing in the repository refers to a file outside it.

A test, script, doc or configuration that reaches a file through one machine's working copy
passes there and fails for every other user (a console script once was found at an absolute
path into one checkout's virtual environment). Every tracked text file is read for:

- absolute paths under the roots where working copies and shared folders live;
- relative paths that climb out of the repository (`../…` from the file's folder);
- the repository's own location on this machine.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ..helpers import ROOT

TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".sql",
    ".yaml",
    ".yml",
    ".toml",
    ".txt",
    ".json",
    ".csv",
    ".sh",
    ".cfg",
    ".ini",
    ".html",
}
TEXT_NAMES = {"Makefile", "run", ".gitignore"}
# where working copies, home folders and mounted shares live; system paths (/usr, /etc, /tmp,
# /dev, /proc) are the same on every machine and stay allowed
OUTSIDE_ROOTS = ("work", "home", "root", "Users", "mnt", "srv", "opt", "media", "data", "shared")
ABSOLUTE = re.compile(
    r"(?<![\w.$}}~:/-])/(?:{})(?:/[^\s\"'`)\]>|,;]*)?".format("|".join(OUTSIDE_ROOTS))
)
CLIMBING = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.*-][^\s\"'`)\]>|,;]*)")


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:  # not a git checkout (an unpacked archive): every file below
        paths = [
            p
            for p in ROOT.rglob("*")
            if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts
        ]
    else:
        paths = [ROOT / name for name in listed.stdout.decode().split("\0") if name]
    return sorted(
        p for p in paths if p.is_file() and (p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES)
    )


def outside_references(path: Path, text: str, root: Path = ROOT) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in ABSOLUTE.finditer(line):
            found.append(f"{number}: absolute path {match.group(0)!r}")
        for match in CLIMBING.finditer(line):
            target = (path.parent / match.group(1)).resolve()
            if not target.is_relative_to(root.resolve()):
                found.append(f"{number}: {match.group(1)!r} climbs out of the repository")
        if str(root.resolve()) in line:  # (its parent may be /tmp or a home: those are allowed)
            found.append(f"{number}: names this checkout's location {str(root.resolve())!r}")
    return found


FILES = tracked_text_files()


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    assert outside_references(path, text) == []


def test_every_kind_of_file_is_read() -> None:
    read = {p.relative_to(ROOT).as_posix() for p in FILES}
    for expected in (
        "Makefile",
        ".ci/run",
        "pyproject.toml",
        "README.md",
        "tests/helpers.py",
        "sql/score/parents.sql",
        "sql/score/policies/overall_v1.yaml",
    ):
        assert expected in read, expected
    assert any(p.startswith("docs/") and p.endswith(".md") for p in read)


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    here = repo / "tests" / "test_x.py"
    checkout = "/" + "work/main"  # assembled, so that this file names no such path itself
    text = "\n".join(
        [
            f'SCRIPT = Path("{checkout}/.venv/bin/duckscore")',  # a path into one checkout
            "see ../shared/DESIGN.md for the design",  # from tests/: the repository root
            'DATA = "../../outside/data.parquet"',
            'FIXTURE = "../fixtures/scifact/qrels.parquet"',  # stays inside: allowed
            "initdb lives in /usr/lib/postgresql/15/bin",  # a system path: allowed
            "https://github.com/AmenRa/ranx/blob/master/x.py",  # a URL: allowed
            f"cd {repo}/tests",  # this checkout's own location
        ]
    )
    found = outside_references(here, text, root=repo)
    assert [f.split(":")[0] for f in found] == ["1", "3", "7"], found
    assert outside_references(repo / "README.md", "see ../shared/DESIGN.md", root=repo) != []
