"""Every example a --help prints works as printed (issue 47 §4: the `--set-recipe` example of
`run --help` was refused with the default policy).

Two kinds of example are found by walking the command line, so a new command's are checked too:

- the `KEY=VALUE` examples of `--set` and `--set-recipe` (`e.g. fusion.k=20`), each run on its
  command with a small log; `sources.<source>` stands for a source of that log, and an example
  the help gives `with --allow-recipe-mismatch` is run with that flag (and refused without it,
  naming the flag: the help says why it is there);
- the command lines a help shows (`duckscore sql score > score.sql`), run in a scratch folder
  holding the files they name.

A command left out of BASE cannot be run here and fails, until it is added (or to SKIPPED, with
the reason and where its examples are checked instead)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import duckdb
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from ..helpers import FIXTURES, SCIFACT
from .test_success_lines import LOG

EXAMPLE = re.compile(r"e\.g\. (?P<examples>[^;]*?)(?:\)|$)")
KEY_VALUE = re.compile(r"(?<![\w-])[A-Za-z_<][\w.<>]*=[^\s,;)]+")
MISMATCH = "--allow-recipe-mismatch"
SCRIPTS = Path(sysconfig.get_path("scripts"))
SCIFACT_LOG = SCIFACT / "retrieval_log.parquet"
# the files the command lines of the helps name, by their names there
NAMED_FILES = {
    "logs/retrieval_log.parquet": SCIFACT_LOG,
    "qrels.parquet": SCIFACT / "qrels.parquet",
}
# commands whose examples cannot run here: the reason, and what checks them instead
SKIPPED = {
    "calibrate": "a calibration takes a minute; its --set-recipe help is fuse's, run on fuse",
    "pull": "needs a Phoenix server: tests/integrations/test_phoenix.py runs these",
    "export annotations": "needs a scored trace run (tests/export) or a Phoenix server",
}


def commands(group: click.Group = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def option_examples() -> list[tuple[str, str, str, bool]]:
    """(command, option, KEY=VALUE, given with --allow-recipe-mismatch) of every help."""
    found = []
    for name, command in commands():
        for param in command.params:
            option = next((o for o in param.opts if o in ("--set", "--set-recipe")), None)
            help_text = getattr(param, "help", None) or ""
            if option is None or not (match := EXAMPLE.search(help_text)):
                continue
            for example in KEY_VALUE.findall(match.group("examples")):
                found.append((name, option, example, MISMATCH in help_text))
    return found


def command_lines() -> list[tuple[str, str]]:
    """(command, line) of every `duckscore …` line a command's help shows."""
    return [
        (name, line.strip())
        for name, command in commands()
        for line in (command.help or "").splitlines()
        if line.strip().startswith("duckscore ")
    ]


class Inputs:
    """The inputs the commands are run on, made when first asked for, in one scratch folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def path(self, name: str, make: Callable[[Path], None]) -> str:
        target = self.folder / name
        if not target.exists():
            make(target)
        return str(target)

    def log(self) -> str:  # two sources, bm25 and vec
        return self.path("log.csv", lambda p: p.write_text(LOG, encoding="utf-8"))

    def features(self) -> str:
        def make(path: Path) -> None:
            done = invoke("fuse", "--log", self.log(), "--out", str(self.folder / "fused"))
            assert done.exit_code == 0, done.stderr
            shutil.copy(self.folder / "fused" / "parent_features.parquet", path)

        return self.path("features.parquet", make)

    def partitioned(self) -> str:
        """A `run --partition-by dt` output of the log as one day."""

        def make(path: Path) -> None:
            day = self.folder / "logs" / "dt=2024-01-01"
            day.mkdir(parents=True)
            duckdb.execute(
                f"COPY (FROM read_csv('{self.log()}')) TO '{day / 'part-0.parquet'}' (FORMAT parquet)"
            )
            done = invoke(
                "run", "--log", str(day.parent), "--out", str(path), "--partition-by", "dt"
            )
            assert done.exit_code == 0, done.stderr

        return self.path("partitioned", make)


ANSWERS = FIXTURES / "answers"
TENDER = FIXTURES / "bids" / "tender"
QRELS = SCIFACT / "qrels.parquet"
# how each command runs, given the scratch inputs and a fresh output path
BASE: dict[str, Callable[[Inputs, Path], list[str]]] = {
    "run": lambda i, out: ["--log", i.log(), "--out", str(out)],
    "fuse": lambda i, out: ["--log", i.log(), "--out", str(out)],
    "score": lambda i, out: ["--features", i.features(), "--out", str(out)],
    "answers": lambda i, out: [
        *("--answers", str(ANSWERS / "answers.csv"), "--citations", str(ANSWERS / "citations.csv")),
        *("--chunks", str(ANSWERS / "chunks.csv"), "--out", str(out)),
    ],
    "bids": lambda i, out: ["--input", str(TENDER), "--out", str(out)],
    "status": lambda i, out: ["--out", i.partitioned(), "--log", str(i.folder / "logs")],
    "serve": lambda i, out: [],  # the server itself is replaced: see run_example
    "dbt package": lambda i, out: ["--log", str(SCIFACT_LOG), "--out", str(out)],
    "recalibrate": lambda i, out: [
        *("--policy", "overall_v3", "--log", i.log(), "--out", f"{out}.yaml"),
    ],
    "tune": lambda i, out: [
        *("--log", str(SCIFACT_LOG), "--qrels", str(QRELS), "--grid", "fusion.k=10,20"),
        *("--out", f"{out}.yaml"),
    ],
    "learn": lambda i, out: [
        *("--log", str(SCIFACT_LOG), "--qrels", str(QRELS), "--model", "linear"),
        *("--features", "present,rrf", "--folds", "2", "--out", f"{out}.yaml"),
    ],
    "macros install": lambda i, out: ["--db", f"{out}.duckdb"],
    "sql fuse": lambda i, out: [],
    "sql score": lambda i, out: [],
    "sql answers": lambda i, out: [],
    "sql macros": lambda i, out: [],
}
# SciFact's (the default --sources' too); the others read the small log's bm25 and vec
SOURCE = dict.fromkeys(
    ("tune", "learn", "dbt package", "macros install", "sql fuse", "sql macros"), "dense"
)


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def run_example(
    name: str, option: str, example: str, flags: list[str], tmp_path: Path, monkeypatch: Any
) -> Result:
    if name == "serve":  # the server is not started: the scorer is made as a worker makes it
        from duckscore.serve import server

        monkeypatch.setattr(
            server, "serve", lambda settings, *args, **kwargs: settings.make_scorer().close()
        )
    example = example.replace("<source>", SOURCE.get(name, "bm25"))
    args = BASE[name](Inputs(tmp_path), tmp_path / "out")
    return invoke(*name.split(), *args, option, example, *flags)


@pytest.mark.parametrize(
    ("name", "option", "example", "needs_flag"),
    [example for example in option_examples() if example[0] not in SKIPPED],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_every_key_value_example_of_a_help_runs_as_printed(
    name: str, option: str, example: str, needs_flag: bool, tmp_path: Path, monkeypatch: Any
) -> None:
    flags = [MISMATCH] if needs_flag else []
    done = run_example(name, option, example, flags, tmp_path, monkeypatch)
    assert done.exit_code == 0, (done.stdout[-500:], done.stderr)
    if needs_flag:  # and without it, refused by the reason the help gives
        refused = run_example(name, option, example, [], tmp_path / "again", monkeypatch)
        assert refused.exit_code == 2 and MISMATCH in refused.stderr, refused.stderr


def test_the_examples_are_found_and_the_skipped_ones_are_checked_elsewhere() -> None:
    found = option_examples()
    names = {name for name, *_ in found}
    # the default policy refuses a changed recipe: every scoring command's help says so
    for name in ("run", "serve", "dbt package", "recalibrate"):
        assert (name, "--set-recipe", "fusion.k=20", True) in found
    for name in ("fuse", "tune", "sql fuse", "macros install", "status"):
        assert (name, "--set-recipe", "fusion.k=20", False) in found
    assert ("serve", "--set", "risk_flags.single_spike.max_score_norm_at_least=0.9", False) in found
    assert names <= set(BASE) | set(SKIPPED)
    by_command = dict(commands())

    def recipe_help(name: str) -> str:
        return next(p.help for p in by_command[name].params if "--set-recipe" in p.opts)

    assert recipe_help("calibrate") == recipe_help("fuse")
    assert {name for name, _ in command_lines()} - set(SKIPPED) == {
        "dbt package", "learn", "macros install", "sql answers", "sql macros", "sql score",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "line"),
    [
        # learn's example fits fusion models on SciFact (27 s): make test's 15 minutes
        pytest.param(*example, marks=pytest.mark.extended) if example[0] == "learn" else example
        for example in command_lines()
        if example[0] not in SKIPPED
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("duckscore") else None,
)
def test_every_command_line_of_a_help_runs_as_printed(name: str, line: str, tmp_path: Path) -> None:
    for named, source in NAMED_FILES.items():
        (tmp_path / named).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, tmp_path / named)
    env = {**os.environ, "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["sh", "-c", line], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, (line, done.stderr)
