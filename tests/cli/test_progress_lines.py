"""The command line's reports (cli/reporting.py, docs/errors.md): with --progress a line
`duckscore [  0.4s] step` per step on stderr, none with --no-progress, the warnings unless -q.
Its handler on the logger `duckscore` lives for one command: commands run one after another in
one process (as here, through CliRunner) print each line once, and leave the logger as they
found it, after a failure too. A partitioned run says its partitions, not their runs' steps.

The oracles are the data: tests/run/test_partitions.py's days of ten SciFact queries, under
thresholds no query reaches (a warning of ten queries or more)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from ..run.test_partitions import day, write_days

STRICT = ("--set", "T_low=0.99", "--set", "T_high=0.999")
STEP = re.compile(r"duckscore \[ *(?P<seconds>\d+\.\d)s\] (?P<message>.+)")
WARNING = "duckscore: warning: "


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("logs")
    write_days(logs, 1, 3)
    return logs


def run(*flags: str, log: Path, out: Path, more: tuple[str, ...] = STRICT) -> Result:
    done = CliRunner().invoke(cli, [*flags, "run", "--log", str(log), "--out", str(out), *more])
    assert done.exit_code == 0, done.stderr
    assert done.stdout == ""
    return done


def steps(stderr: str) -> list[str]:
    matched = [STEP.fullmatch(line) for line in stderr.splitlines()]
    seconds = [float(m["seconds"]) for m in matched if m]
    assert seconds == sorted(seconds), stderr  # elapsed since the command started
    return [m["message"] for m in matched if m]


def warnings(stderr: str) -> list[str]:
    return [line.removeprefix(WARNING) for line in stderr.splitlines() if line.startswith(WARNING)]


def test_progress_lines_and_the_warning(days: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    said = run("--progress", log=days / f"dt={day(1)}", out=out).stderr
    told = steps(said)
    assert told[0].startswith("checking the log (recipe canonical_rrf, policy overall_v3+")
    assert re.fullmatch(rf"done: 10 queries, [\d,]+ parents -> {re.escape(str(out))}", told[-1])
    [warning] = warnings(said)
    assert re.fullmatch(r"policy overall_v3\+\w+ rates all 10 queries low: .+", warning)
    assert said.splitlines()[-1].startswith("duckscore: 10 queries: high 0, medium 0, low 10 ")


@pytest.mark.parametrize(("flag", "warned"), [("--no-progress", 1), ("-q", 0)])
def test_no_progress_keeps_the_warnings_and_quiet_drops_them(
    days: Path, tmp_path: Path, flag: str, warned: int
) -> None:
    said = run(flag, log=days / f"dt={day(1)}", out=tmp_path / "scored").stderr
    assert len(warnings(said)) == said.count("\n") == warned  # the warnings and nothing else


def test_commands_one_after_another_print_each_line_once(days: Path, tmp_path: Path) -> None:
    logger = logging.getLogger("duckscore")
    before = (list(logger.handlers), logger.level)
    log = days / f"dt={day(1)}"
    first, second = (
        run("--progress", log=log, out=tmp_path / name).stderr for name in ("first", "second")
    )
    assert len(warnings(first)) == len(warnings(second)) == 1
    renamed = [s.replace(str(tmp_path / "first"), str(tmp_path / "second")) for s in steps(first)]
    assert steps(second) == renamed
    assert len(second.splitlines()) == len(first.splitlines())
    failed = CliRunner().invoke(cli, ["--progress", "run", "--log", str(tmp_path / "nowhere")])
    assert failed.exit_code == 2 and failed.stderr.count("duckscore: error:") == 1
    assert (list(logger.handlers), logger.level) == before


def test_a_partitioned_run_says_its_partitions_not_their_runs(days: Path, tmp_path: Path) -> None:
    more = ("--partition-by", "dt", *STRICT)
    said = run("--progress", log=days, out=tmp_path / "scored", more=more).stderr
    assert steps(said) == [
        "3 partitions by dt: 3 to compute, 0 kept",
        *(f"dt={day(n)} ({n}/3): fusing and scoring" for n in (1, 2, 3)),
    ]
    [warning] = warnings(said)
    assert " rates all 30 queries low: " in warning
