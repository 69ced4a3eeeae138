"""One declaration per setting (issue 48 §2): a `Job`'s and an `Engine`'s fields carry their flag,
help and constraints (core/setting.py); `job_options` and `dataclass_options` make the options
of every command that builds one, and hand the command the built object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.cli.declared import dataclass_options, job_options
from duckscore.core.connection import EngineSettings
from duckscore.core.errors import OptionError
from duckscore.core.setting import settings_of
from duckscore.runner.job import RECIPE_OVERRIDE_HELP, Engine, Job


def built(decorate: Any, args: list[str]) -> dict[str, Any]:
    """What a command decorated by `decorate` is handed for `args`."""
    handed: dict[str, Any] = {}

    @click.command()
    @decorate
    def command(**kwargs: Any) -> None:
        handed.update(kwargs)

    done = CliRunner().invoke(command, args)
    assert done.exit_code == 0, done.output
    return handed


def test_the_flags_build_the_job_they_name(tmp_path: Path) -> None:
    args = ["--recipe", "hybrid_v1", "--policy", "overall_v1", "--set-recipe", "fusion.k=20",
            "--set-recipe", "fusion.k=30", "--set", "T_high=0.9", "--top-n", "3", "--no-explain",
            "--allow-recipe-mismatch", "--unsorted", "--threads", "2", "--temp-dir",
            str(tmp_path)]  # fmt: skip
    expected = Job(
        recipe="hybrid_v1", policy="overall_v1", recipe_overrides=("fusion.k=20", "fusion.k=30"),
        policy_overrides=("T_high=0.9",), top_n=3, explain=False, allow_recipe_mismatch=True,
        settings=EngineSettings(threads=2, temp_dir=tmp_path), sorted_outputs=False,
    )  # fmt: skip
    assert built(job_options(), args) == {"job": expected}
    assert built(job_options(), []) == {"job": Job(settings=EngineSettings())}


def test_a_command_without_some_settings_gets_the_defaults_for_them() -> None:
    handed = built(job_options("explain", "settings", "sorted_outputs"), ["--top-n", "2"])
    assert handed == {"job": Job(top_n=2)}
    for flag in ("--no-explain", "--threads", "--unsorted"):
        done = CliRunner().invoke(cli, ["serve", flag])
        assert done.exit_code == 2 and f"No such option '{flag}'" in done.output


def test_the_engine_options_build_the_engine() -> None:
    args = ["--engine", "spark", "--shards", "3", "--partition-by", "dt", "--incremental"]
    handed = built(dataclass_options(Engine, "how"), args)
    assert handed == {"how": Engine(engine="spark", shards=3, partition_by="dt", incremental=True)}


@pytest.mark.parametrize(
    ("name", "left_out"),
    [("run", ()), ("serve", ("explain", "settings", "sorted_outputs")),
     ("status", ("allow_recipe_mismatch", "settings", "sorted_outputs"))],
)  # fmt: skip
def test_each_command_shows_the_declared_help(name: str, left_out: tuple[str, ...]) -> None:
    options = {param.name: param for param in cli.commands[name].params}
    for field, declared in settings_of(Job).items():
        if field in left_out:
            assert field not in options
            continue
        shown = getattr(options[field], "help", None)
        if field == "recipe_overrides" and "allow_recipe_mismatch" in left_out:
            assert shown == RECIPE_OVERRIDE_HELP  # no flag of the command to send the user to
        else:
            assert shown == declared.help, field
        assert declared.flag.split("/")[0] in options[field].opts


@pytest.mark.parametrize(
    ("made", "message"),
    [
        (lambda: Job(top_n=0), "--top-n must be at least 1, got 0"),
        (lambda: Engine(shards=0), "--shards must be at least 1, got 0"),
        (lambda: Engine(engine="trino"), "--engine 'trino': one of duckdb, spark"),
    ],
)
def test_a_constraint_holds_however_the_object_is_built(made: Any, message: str) -> None:
    with pytest.raises(OptionError) as refused:
        made()
    assert str(refused.value) == message


def test_a_job_is_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        Job("canonical_rrf")  # type: ignore[misc]
