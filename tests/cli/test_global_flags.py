"""The group's flags where users type them, and a reader that stops reading (issue 35 §5)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli, hoist_global_flags

from ..helpers import FIXTURES

LOG = str(FIXTURES / "scifact" / "retrieval_log.parquet")


@pytest.mark.parametrize(
    ("typed", "parsed"),
    [
        (["sql", "score", "-q"], ["-q", "sql", "score"]),
        (
            ["fuse", "--log", "x", "--no-progress", "--out", "o"],
            ["--no-progress", "fuse", "--log", "x", "--out", "o"],
        ),
        (["-q", "run", "--progress"], ["-q", "--progress", "run"]),
        # after `--` every argument is a value
        (["sql", "score", "--", "-q"], ["sql", "score", "--", "-q"]),
    ],
)
def test_global_flags_move_before_the_command(typed: list[str], parsed: list[str]) -> None:
    assert hoist_global_flags(typed) == parsed


def test_quiet_after_the_command_silences_the_success_line(tmp_path) -> None:
    command = [
        sys.executable,
        "-m",
        "duckscore",
        "fuse",
        "--log",
        LOG,
        "--out",
        str(tmp_path / "o"),
    ]
    loud = subprocess.run(command, capture_output=True, text=True, check=False)
    quiet = subprocess.run(
        [*command[:-2], "--out", str(tmp_path / "q"), "-q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert loud.returncode == quiet.returncode == 0, (loud.stderr, quiet.stderr)
    assert "duckscore: fused" in loud.stderr + loud.stdout
    assert quiet.stderr == quiet.stdout == ""


def test_a_closed_stdout_is_no_failure() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "duckscore", "sql", "fuse"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the command prints
    errors = process.stderr.read().decode()
    assert process.wait() == 0 and errors == ""


def test_click_runner_still_parses_flags_before_the_command() -> None:
    done = CliRunner().invoke(cli, ["-q", "sql", "score"])
    assert done.exit_code == 0 and done.output.startswith("WITH")
