"""Runs that share a spill base (`.tmp` in one working folder, or one --temp-dir): one run's
end cannot take the base away from another, nor can it make another's start fail
(docs/outputs.md, "Spill")."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckscore.core.connection import (
    DEFAULT_SPILL_BASE,
    SPILL_PREFIX,
    EngineSettings,
    spill_folder,
)
from duckscore.core.session import Session


def test_a_run_s_spill_folder_is_made_at_its_start_and_keeps_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base is removed by a run that ends when it is empty: a run still going has its
    folder there from its start (DuckDB, spilling later, would make the folder, not the base)."""
    monkeypatch.chdir(tmp_path)
    base = tmp_path / DEFAULT_SPILL_BASE
    with Session() as going:
        mine = going._spill
        assert mine is not None and mine.is_dir() and mine.parent == Path(DEFAULT_SPILL_BASE)
        Session().close()  # another run, ended
        assert mine.is_dir()
        going.con.execute("SET memory_limit = '20MB'")
        going.con.execute("SET threads = 1")  # a sort's per-thread buffers alone passed 20 MB
        going.con.execute("SET preserve_insertion_order = false")
        spilled = going.con.execute(
            "SELECT count(*) FROM (SELECT i, i::VARCHAR AS t FROM range(2000000) r(i) ORDER BY t)"
        ).fetchone()
        assert spilled == (2000000,)
    assert not base.exists()  # the last run to end removes it


def test_a_base_removed_while_it_is_read_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run ending removes the base between the check that it exists and its listing
    (Path.glob then raises FileNotFoundError): the new run makes its folder all the same."""
    base = tmp_path / "spill"
    base.mkdir()

    def vanished(self: Path, pattern: str) -> list[Path]:
        self.rmdir()
        raise FileNotFoundError(2, "No such file or directory", str(self))

    monkeypatch.setattr(Path, "glob", vanished)
    folder = spill_folder(EngineSettings(temp_dir=base))
    monkeypatch.undo()
    assert folder.parent == base and folder.name.startswith(SPILL_PREFIX)
    with Session(EngineSettings(temp_dir=base)) as session:
        assert session._spill is not None and session._spill.is_dir()


def test_a_session_stopped_while_it_connects_leaves_no_spill_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal (KeyboardInterrupt) landing after connect made the run's spill folder but before
    the session exists: no `with` block will close it, so the constructor removes the folder."""
    monkeypatch.chdir(tmp_path)
    import duckscore.core.session as session_module

    def interrupted(settings: object, spill: Path) -> None:
        spill.mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(session_module, "connect", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Session()
    assert not (tmp_path / DEFAULT_SPILL_BASE).exists()
