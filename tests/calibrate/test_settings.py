"""A calibration's settings are declared once, with CalibrationSettings' fields (issue 48 §2):
`duckscore calibrate` takes each as the one flag declared, `recalibrate` its --folds and --seed,
and a value is refused in the same line whether it comes from Python keywords or the flags."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from duckscore.calibrate.recalibrate import recalibrate
from duckscore.calibrate.settings import DEFAULT_SETTINGS, CalibrationSettings
from duckscore.cli import cli
from duckscore.core.errors import OptionError
from duckscore.core.setting import settings_of

SEED_QUANTILES = ("bad_quantile", "good_quantile")  # §9.2's, no flag of their own


def test_calibrate_takes_each_declared_setting_as_its_one_flag() -> None:
    declared = settings_of(CalibrationSettings)
    fields = [f.name for f in dataclasses.fields(CalibrationSettings)]
    assert list(declared) == [name for name in fields if name not in SEED_QUANTILES]
    params = cli.commands["calibrate"].params
    for name, setting in declared.items():
        [param] = [param for param in params if setting.flag in param.opts]  # declared once
        assert param.name == name
        assert getattr(param, "help", None) == setting.help
        assert param.default == getattr(DEFAULT_SETTINGS, name)


@pytest.mark.parametrize(
    ("flag", "help_", "shown"),
    [("--folds", "With --labels: cross-validation folds (at most the count of the rarer "
      "outcome).", "[default: 5; x>=2]"),
     ("--seed", "Fold seed.", "[default: 0; 0<=x<=4294967295]")],
)  # fmt: skip
def test_recalibrate_takes_the_declared_folds_and_seed(flag: str, help_: str, shown: str) -> None:
    name = flag[2:]
    [param] = [param for param in cli.commands["recalibrate"].params if flag in param.opts]
    assert param.name == name and getattr(param, "help", None) == help_
    assert param.default == getattr(DEFAULT_SETTINGS, name)
    listed = " ".join(CliRunner().invoke(cli, ["recalibrate", "--help"]).output.split())
    assert shown in listed[listed.index(f"{flag} INTEGER RANGE") :]
    assert settings_of(CalibrationSettings)[name].flag == flag


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"folds": 1}, "--folds must be at least 2, got 1"),
        ({"seed": -1}, "--seed must be in [0, 4294967295], got -1"),
        ({"seed": 2**32}, "--seed must be in [0, 4294967295], got 4294967296"),
        ({"passes": 0}, "--passes must be at least 1, got 0"),
        ({"thresholds": "median"}, "--thresholds 'median': one of quantile, precision"),
        ({"target_precision": 1.0}, "--target-precision must be in (0, 1), got 1.0"),
        ({"target_precision": 0}, "--target-precision must be in (0, 1), got 0"),
        ({"hitl_quantile": 0.8}, "--hitl-quantile must be in [0.5, 0.7], got 0.8"),
        ({"probability": "logit"}, "--probability 'logit': one of auto, platt, beta, isotonic, none"),
        ({"levels": "p"}, "--levels 'p': one of score, probability"),
        ({"p_high": 1.5}, "--p-high must be in [0, 1], got 1.5"),
        ({"p_low": -0.1}, "--p-low must be in [0, 1], got -0.1"),
    ],
)  # fmt: skip
def test_a_bad_value_from_python_is_refused_in_one_line(
    given: dict[str, Any], message: str
) -> None:
    with pytest.raises(OptionError) as refused:
        CalibrationSettings(**given)
    assert str(refused.value) == message
    with pytest.raises(OptionError) as replaced:
        dataclasses.replace(DEFAULT_SETTINGS, **given)
    assert str(replaced.value) == message


@pytest.mark.parametrize(
    ("given", "args", "message"),
    [({"levels": "probability", "probability": "none"}, ["--levels", "probability",
      "--probability", "none"], "--levels probability needs a probability map, not "
      "--probability none"),
     ({"p_low": 0.9}, ["--p-low", "0.9"], "--p-low (0.9) must be at most --p-high (0.85)"),
     ({"p_low": 0.6, "p_high": 0.55}, ["--p-low", "0.6", "--p-high", "0.55"],
      "--p-low (0.6) must be at most --p-high (0.55)")],
)  # fmt: skip
def test_values_that_do_not_go_together_are_refused_alike_by_python_and_the_command(
    tmp_path: Path, given: dict[str, Any], args: list[str], message: str
) -> None:
    with pytest.raises(OptionError) as refused:
        CalibrationSettings(**given)
    assert str(refused.value) == message
    out = tmp_path / "p.yaml"
    done = CliRunner().invoke(
        cli,
        ["calibrate", "--features", str(tmp_path / "f.parquet"), "--labels",
         str(tmp_path / "l.parquet"), "--out", str(out), *args],
    )  # fmt: skip
    assert done.exit_code == 2 and done.stderr == f"duckscore: error: {message}\n"
    assert not out.exists()


def test_recalibrate_refuses_a_seed_out_of_range_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(OptionError) as refused:
        recalibrate("overall_v3", tmp_path / "no-such-log.parquet", tmp_path / "p.yaml", seed=-1)
    assert str(refused.value) == "--seed must be in [0, 4294967295], got -1"
    assert not (tmp_path / "p.yaml").exists()
