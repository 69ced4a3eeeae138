"""Small repositories for the tests of code/: files written from a dict, a git repository of
two commits made in a test's folder."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

FIRST = "def greet(name):\n    return name\n"
SECOND = (
    "class Greeter:\n    def __init__(self):\n        pass\n\n\ndef greet(name):\n    return name\n"
)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def repository(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository of two commits: greet.py alone, then Greeter added above greet and a
    second file under a unicode name, a symlink and a hidden folder's file beside them."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write(repo, {"src/greet.py": FIRST, "README.md": "# r\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    first = git(repo, "rev-parse", "HEAD")
    write(repo, {"src/greet.py": SECOND, "src/\u00e9t\u00e9.py": "def summer(): pass\n",
                 ".github/check.py": "def hidden(): pass\n"})  # fmt: skip
    (repo / "src" / "alias.py").symlink_to("greet.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    (repo / "src" / "greet.py").write_text("def changed_on_disk(): pass\n", encoding="utf-8")
    return repo, first, git(repo, "rev-parse", "HEAD")
