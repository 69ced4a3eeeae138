"""An interrupt that arrives while an output moves in waits for the move (core/interrupts.py):
the output is then the new one, whole — a user's own files in the folder kept — and the one
line the command prints says so. Before, a Ctrl-C between the steps of the move left a mix (or
deleted the user's files adopted into the staging folder) and said the output was as it was;
and one right after the move said the same of the new output (CI, issue 52's session)."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from duckscore.core import interrupts, locks, outputs, swap
from duckscore.core.interrupts import interrupt_message, signals_held


@pytest.fixture(autouse=True)
def fresh_command() -> Iterator[None]:
    interrupts.command_started()
    yield
    interrupts.command_started()


def interrupting(real: Callable[..., Any]) -> Callable[..., Any]:
    """`real`, with a Ctrl-C sent to this process just before it runs."""

    def call(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    return call


def write_output(out: Path, text: str) -> None:
    with outputs.atomic_output_dir(out) as staging:
        (staging / "manifest.json").write_text('{"outputs": {"rows.txt": {}}}')
        (staging / "rows.txt").write_text(text)


def test_a_ctrl_c_inside_the_exchange_waits_and_the_users_files_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_output(out, "old")
    (out / "notes.txt").write_text("mine")  # not in the manifest: adopted into the new folder
    monkeypatch.setattr(swap, "exchange", interrupting(swap.exchange))
    with pytest.raises(KeyboardInterrupt):
        write_output(out, "new")
    assert (out / "rows.txt").read_text() == "new"
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging or old folder
    assert interrupt_message() == (
        "interrupted; --out " + str(out) + " was already written, whole",
        130,
    )


def test_a_ctrl_c_as_a_single_file_moves_in_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "labels.csv"
    monkeypatch.setattr(os, "replace", interrupting(os.replace))
    with pytest.raises(KeyboardInterrupt), outputs.atomic_output_file(path) as staging:
        staging.write_text("a\n1\n")
    assert path.read_text() == "a\n1\n"
    assert interrupt_message()[0] == f"interrupted; --out {path} was already written, whole"


def test_before_the_move_the_output_is_left_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_output(out, "old")
    interrupts.command_started()  # the old output was an earlier command's
    with pytest.raises(KeyboardInterrupt), outputs.atomic_output_dir(out) as staging:
        (staging / "rows.txt").write_text("new")
        os.kill(os.getpid(), signal.SIGINT)
    assert (out / "rows.txt").read_text() == "old"
    assert interrupt_message() == ("interrupted; the output was left as it was", 130)


def test_a_partitioned_runs_note_is_what_it_kept() -> None:
    interrupts.published("--out out")
    stopped = KeyboardInterrupt()
    stopped.add_note("the 3 partitions it finished")
    assert interrupt_message(stopped)[0] == (
        "interrupted; the output keeps the 3 partitions it finished, each whole, and the rest as "
        "it was"
    )


def test_every_output_already_moved_in_is_named() -> None:
    for shown in ("--out policy.yaml", "--report report.md", "--out policy.yaml", "--json x"):
        interrupts.published(shown)
    assert interrupt_message()[0] == (
        "interrupted; --out policy.yaml, --report report.md and --json x were already written, "
        "whole"
    )


def test_sigterm_is_told_apart_and_a_new_command_forgets_the_last() -> None:
    interrupts._RECEIVED.append(signal.SIGTERM)
    interrupts.published("--out out")
    assert interrupt_message() == (
        "terminated (SIGTERM); --out out was already written, whole",
        143,
    )
    interrupts.command_started()
    assert interrupt_message() == ("interrupted; the output was left as it was", 130)


def test_held_signals_nest_and_act_once_at_the_outer_end() -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), signals_held():
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("inner finished")
        steps.append("outer finished")
    assert steps == ["inner finished", "outer finished"]


def test_a_ctrl_c_while_the_old_output_is_removed_leaves_none_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    write_output(out, "old")
    monkeypatch.setattr(shutil, "rmtree", interrupting(shutil.rmtree))
    with pytest.raises(KeyboardInterrupt):
        write_output(out, "new")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert (out / "rows.txt").read_text() == "new"


def test_a_ctrl_c_while_the_lock_is_taken_leaves_no_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locks, "_same_file", interrupting(locks._same_file))
    with pytest.raises(KeyboardInterrupt):
        write_output(tmp_path / "out", "new")
    assert list(tmp_path.iterdir()) == []
