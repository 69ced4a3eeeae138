"""Reading a store: a file the user may not write can be read (top, report), and a tier that the
store's policy does not have is refused, not answered with an empty list (issue 35 §5)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from duckscore.core.errors import OptionError
from duckscore.instincts.report import write_report
from duckscore.instincts.store import ingest, init_store, top

from .test_store import START, ids, new_instincts


@contextmanager
def unwritable(folder: Path) -> Iterator[None]:
    """`folder` and its files read-only, for root too (which file modes do not stop: the
    immutable attribute does)."""
    paths = [*folder.iterdir(), folder]
    modes = {path: path.stat().st_mode for path in paths}
    root = os.geteuid() == 0
    try:
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
            if root:
                subprocess.run(["chattr", "+i", str(path)], check=True)
        with pytest.raises(OSError):
            (folder / "probe").write_text("x")
        yield
    finally:
        for path in reversed(paths):
            if root:
                subprocess.run(["chattr", "-i", str(path)], check=True)
            path.chmod(modes[path])


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "store" / "instincts.duckdb"
    assert init_store(db) == "created"
    ingest(db, new_instincts=new_instincts(ids(3)), now=START)
    return db


def test_a_store_the_user_may_not_write_can_be_read(store: Path, tmp_path: Path) -> None:
    with unwritable(store.parent):
        assert len(top(store)) == 3
        write_report(store, tmp_path / "report", 12)
    assert (tmp_path / "report" / "report.html").is_file()


def test_an_unknown_tier_is_refused(store: Path) -> None:
    with pytest.raises(OptionError, match=r"--tier 'gold': not a tier of policy instinct_v1 "):
        top(store, "gold")
    assert len(top(store, "moderate")) + len(top(store, "tentative")) <= 3
