"""One writer per output: an advisory lock file beside the output, held for the whole run.

`flock` locks die with their process, so a run killed outright never leaves a lock that blocks the
next one; the lock file itself is removed by the holder (and re-created by the next run if a kill
left it behind). Holding the lock also proves that staging folders of the same output are litter
from a dead run, which is what lets `remove_stale` delete them.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError
from .interrupts import signals_held


@contextmanager
def output_lock(lock_path: Path, shown: str) -> Iterator[None]:
    """Hold the lock `lock_path` or fail in one line naming the process that holds it. Taking
    and leaving it hold off interrupts (core/interrupts.py), which would leave the file behind."""
    fd: int | None = None
    try:
        with signals_held():
            fd = _locked(lock_path, shown)
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode("ascii"))
        yield
    finally:
        if fd is not None:  # not another run's lock, which we were refused
            with signals_held():
                Path(lock_path).unlink(missing_ok=True)
                os.close(fd)


def _locked(lock_path: Path, shown: str) -> int:
    """The lock file `lock_path` opened and locked (made if missing)."""
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            where = not_writable(lock_path.parent, exc, ", where the lock goes,")
            raise OutputError(
                f"{shown}: cannot lock: {where}; write the output elsewhere"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise OutputError(
                f"{shown}: another duckscore run (pid {holder}) is writing it; wait for it to "
                "finish or choose another output"
            ) from None
        if _same_file(fd, lock_path):
            return fd
        os.close(fd)  # the holder removed the file between our open and our lock: start again


def not_writable(folder: Path | str, exc: OSError, role: str = "") -> str:
    """Why a file or folder could not be made in `folder`, naming it (and its `role`, as
    `, where the lock goes,`): `the folder F is not writable by this user (Permission denied)`,
    `… is read-only (Read-only file system)`, else `cannot create a file in the folder F (…)`."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"the folder {folder}{role} is not writable by this user ({exc.strerror})"
    if exc.errno == errno.EROFS:
        return f"the folder {folder}{role} is read-only ({exc.strerror})"
    return f"cannot create a file in the folder {folder}{role} ({exc.strerror or exc})"


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def remove_stale(folder: Path, prefix: str) -> None:
    """Delete the entries of `folder` whose names start with `prefix`: staging left by dead runs
    (call only while holding the output's lock)."""
    for entry in folder.glob(f"{glob.escape(prefix)}*"):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    current = os.umask(0o022)
    os.umask(current)
    return current
