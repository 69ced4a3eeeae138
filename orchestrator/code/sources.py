"""The Python files an entities table reads, as (posix path, bytes) sorted by path: those of a
folder (its working tree), or those of a git repository at a revision (`git ls-tree` and `git
cat-file`, run as subprocesses: no index, no network).

A file is read when its name ends in `.py`, no part of its path is hidden (starts with `.`), it
is a file and not a symbolic link (a linked folder is not entered; a revision's symlinks and
submodules are not files), and the selection keeps it: it matches an include glob (any, when
none is given) and no exclude glob, matched with fnmatch against the whole relative path (`*`
also matches `/`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from ..core.errors import InputError

SUFFIX = ".py"
FILE_MODES = (b"100644", b"100755")  # a revision's blobs that are files (120000: a symlink)


@dataclass(frozen=True)
class Selection:
    """--include and --exclude: the globs a file's relative path must (not) match."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def keeps(self, path: str) -> bool:
        if not path.endswith(SUFFIX) or any(part.startswith(".") for part in path.split("/")):
            return False
        included = not self.include or any(fnmatchcase(path, glob) for glob in self.include)
        return included and not any(fnmatchcase(path, glob) for glob in self.exclude)


@dataclass(frozen=True)
class SourceFile:
    path: str  # posix, relative to the folder or the repository's root
    data: bytes


def folder_files(root: Path, selection: Selection) -> list[SourceFile]:
    """The files of the folder `root` the selection keeps (see the module doc)."""
    if not root.is_dir():
        raise InputError(f"--repo {root}: no such folder")
    found = []
    for folder, subfolders, names in os.walk(root):  # a linked folder is listed, never entered
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        for name in names:
            file = Path(folder) / name
            path = PurePosixPath(*file.relative_to(root).parts).as_posix()
            if selection.keeps(path) and not file.is_symlink():
                found.append(SourceFile(path, _read(file, root)))
    return sorted(found, key=lambda source: source.path)


def _read(file: Path, root: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise InputError(f"--repo {root}: cannot read {file} ({exc.strerror})") from None


def revision_files(repo: Path, revision: str, selection: Selection) -> list[SourceFile]:
    """The files of the git repository at `repo` (a work tree or a bare repository) at
    `revision` the selection keeps, by their paths from the repository's root."""
    commit = resolve(repo, revision)
    listed = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    blobs: list[tuple[str, str]] = []
    for entry in listed.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, blob = meta.split(b" ")
        path = raw_path.decode("utf-8", errors="replace")
        if kind == b"blob" and mode in FILE_MODES and selection.keeps(path):
            blobs.append((path, blob.decode("ascii")))
    contents = _blobs(repo, [blob for _, blob in blobs])
    return sorted((SourceFile(path, contents[blob]) for path, blob in blobs), key=lambda s: s.path)


def resolve(repo: Path, revision: str) -> str:
    """The commit `revision` names in `repo`; refused in one line when there is none."""
    if not repo.is_dir():
        raise InputError(f"--repo {repo}: no such folder")
    if _run(repo, "rev-parse", "--git-dir").returncode != 0:
        raise InputError(
            f"--repo {repo}: not a git repository (--rev reads a repository's history)"
        )
    found = _run(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"
    )
    if found.returncode != 0 or not found.stdout.strip():
        raise InputError(f"--rev {revision}: no such commit in {repo}")
    return found.stdout.decode("ascii").strip()


def _blobs(repo: Path, blobs: list[str]) -> dict[str, bytes]:
    """The contents of `blobs`, read by one `git cat-file --batch`."""
    out = _git(repo, "cat-file", "--batch", given="".join(f"{blob}\n" for blob in blobs))
    contents: dict[str, bytes] = {}
    at = 0
    while at < len(out):
        header_end = out.index(b"\n", at)
        blob, _, size = out[at:header_end].split(b" ")
        start = header_end + 1
        contents[blob.decode("ascii")] = out[start : start + int(size)]
        at = start + int(size) + 1  # the newline after each content
    return contents


def _git(repo: Path, *args: str, given: str | None = None) -> bytes:
    done = _run(repo, *args, given=given)
    if done.returncode != 0:
        problem = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        raise InputError(
            f"--repo {repo}: git {args[0]} failed ({problem[0] if problem else done.returncode})"
        )
    return done.stdout


def _run(repo: Path, *args: str, given: str | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            input=given.encode("ascii") if given is not None else None,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise InputError("--rev reads a git repository: git is not on the PATH") from None
