"""Moving a finished staging folder into place: at once where the file system allows it, and
all-or-nothing everywhere.

- A new output: one rename of the staging folder.
- An existing output: its entries that this run does not write and no earlier run wrote (a
  user's notes, say: not what the old manifest.json lists) are moved into the staging folder, then the two folders are exchanged in one `renameat2(RENAME_EXCHANGE)`
  (Linux); where that call is missing, the old folder is renamed aside and the new one renamed
  in, which leaves a moment without the folder but never a mix.
- An output that cannot be renamed (a mount point, or its parent is read-only): the staging folder
  lives inside it, and each entry of the run replaces the one of the same name; if any move fails,
  every move done so far is undone.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}


def exchange(first: Path, second: Path) -> bool:
    """Swap two paths atomically; False where the system or file system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(second))


def publish_folder(staging: Path, destination: Path, aside: Path) -> None:
    """Make `staging` the folder `destination` (see the module doc); afterwards the old content
    is at `staging` or `aside`, for the caller to remove."""
    if not os.path.lexists(destination):
        os.rename(staging, destination)
        return
    adopted = _adopt_foreign(destination, staging)
    try:
        if exchange(staging, destination):
            return
        os.rename(destination, aside)
        try:
            os.rename(staging, destination)
        except OSError:
            os.rename(aside, destination)
            raise
    except OSError:
        for name in adopted:
            os.rename(staging / name, destination / name)
        raise


def publish_in_place(staging: Path, destination: Path, aside: Path) -> None:
    """Move each entry of `staging` (inside `destination`) over its namesake, the old one into
    `aside`; undo every move if one fails."""
    aside.mkdir()
    replaced: list[str] = []
    moved: list[str] = []
    try:
        for entry in sorted(staging.iterdir()):
            target = destination / entry.name
            if os.path.lexists(target):
                os.rename(target, aside / entry.name)
                replaced.append(entry.name)
            os.rename(entry, target)
            moved.append(entry.name)
    except OSError:
        for name in reversed(moved):
            os.rename(destination / name, staging / name)
        for name in reversed(replaced):
            os.rename(aside / name, destination / name)
        raise


def _adopt_foreign(destination: Path, staging: Path) -> list[str]:
    """Move the entries of `destination` that `staging` does not have into `staging` — a user's
    own files, not an earlier run's outputs (those its manifest.json lists): the folder is
    replaced whole, so a table this run does not write (spans.parquet of an earlier run on
    trace spans, parents.parquet before a `fuse`) does not survive into it."""
    earlier = _earlier_outputs(destination)
    adopted: list[str] = []
    try:
        for entry in sorted(destination.iterdir()):
            if entry.name not in earlier and not os.path.lexists(staging / entry.name):
                os.rename(entry, staging / entry.name)
                adopted.append(entry.name)
    except OSError:
        for name in adopted:
            os.rename(staging / name, destination / name)
        raise
    return adopted


def _earlier_outputs(destination: Path) -> set[str]:
    """The entries an earlier run wrote into `destination`: the outputs its manifest.json
    counts, with the manifest and sql/ (none when there is no readable manifest)."""
    try:
        outputs = json.loads((destination / "manifest.json").read_text(encoding="utf-8"))["outputs"]
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    return {str(name).split("/")[0] for name in outputs} | {"manifest.json", "sql"}
