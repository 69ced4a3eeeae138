"""Issue 35 §3.1: every KEY=VALUE value (`--set`, `--set-recipe`, `tune --grid`) and every policy
file is read by one parser, with YAML 1.2 (core schema) numbers and booleans: `010` is refused
(YAML 1.1 reads it as octal 8, YAML 1.2 as 10), `0o10` and `0x10` are numbers, `1_000`, `1:30`
and `yes`/`no`/`on`/`off` are text (so a number or a flag refuses them) — nothing changes value
silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from duckscore.calibrate.tune_grid import TuneError, as_overrides, parse_axis
from duckscore.cli import cli
from duckscore.core.errors import PolicyError
from duckscore.core.policy import dump_yaml, load_policy, load_yaml, parse_overrides
from duckscore.fusion.recipe import FUSE_RECIPE
from duckscore.scoring.policy import SCORE_POLICY

from ..helpers import SCIFACT

LEADING_ZERO = "has a leading zero"


def k_of(*overrides: str) -> Any:
    return load_policy(FUSE_RECIPE, "canonical_rrf", list(overrides)).parameters["fusion"]["k"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10", 10),
        ("-7", -7),
        ("+7", 7),
        ("0", 0),
        ("0o10", 8),
        ("0x1F", 31),
        ("1e-9", 1e-9),
        ("2.50", 2.5),
        ("010.5", 10.5),
        (".5", 0.5),
        ("true", True),
        ("False", False),
        ("TRUE", True),
        ("null", None),
        ("~", None),
        # YAML 1.1 numbers and booleans that YAML 1.2 reads as text
        ("1_000", "1_000"),
        ("1:30", "1:30"),
        ("1:30.5", "1:30.5"),
        ("0b101", "0b101"),
        ("yes", "yes"),
        ("No", "No"),
        ("on", "on"),
        ("OFF", "OFF"),
        ("y", "y"),
        ("[0o10, 0x10, yes]", [8, 16, "yes"]),
    ],
)
def test_values_are_yaml_1_2(text: str, value: Any) -> None:
    assert parse_overrides([f"a={text}"]) == {"a": value}
    assert load_yaml(f"a: {text}") == {"a": value}
    if "," not in text and ":" not in text:  # a grid splits lists and reads ranges itself
        assert parse_axis(f"a={text}").values == (value,)


@pytest.mark.parametrize("text", ["010", "-010", "+010", "00", "09", "0123456789"])
def test_a_leading_zero_is_refused_naming_the_option_and_key(text: str) -> None:
    with pytest.raises(PolicyError) as refused:
        parse_overrides([f"fusion.k={text}"], option="--set-recipe")
    message = str(refused.value)
    assert message.startswith(f"--set-recipe 'fusion.k={text}': ")
    assert LEADING_ZERO in message and "\n" not in message
    with pytest.raises(TuneError) as refused_grid:
        parse_axis(f"fusion.k=20,{text}")
    assert str(refused_grid.value).startswith(f"--grid 'fusion.k=20,{text}': ")
    assert LEADING_ZERO in str(refused_grid.value)


def test_the_issue_k_010_no_longer_runs_as_8() -> None:
    with pytest.raises(PolicyError, match=LEADING_ZERO):
        k_of("fusion.k=010")
    assert k_of("fusion.k=10") == 10
    assert k_of("fusion.k=0o10") == 8  # octal, spelled as YAML 1.2 spells it
    assert k_of("fusion.k=0x10") == 16


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("fusion.k=1_000", "fusion.k: expected a number, got '1_000'"),
        ("fusion.k=1:30", "fusion.k: expected a number, got '1:30'"),
        ("sources.dense.distance=yes", "sources.dense.distance: expected true or false, got 'yes'"),
        ("sources.dense.distance=off", "sources.dense.distance: expected true or false, got 'off'"),
    ],
)
def test_yaml_1_1_spellings_are_refused_not_converted(override: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        k_of(override)
    assert k_of("sources.dense.distance=true") == 60


def test_score_policy_set_reads_the_same_way() -> None:
    with pytest.raises(PolicyError, match=f"--set 'T_high=00': 00 {LEADING_ZERO}"):
        load_policy(SCORE_POLICY, "overall_v1", ["T_high=00"])
    with pytest.raises(PolicyError, match="expected a number, got '0_5'"):
        load_policy(SCORE_POLICY, "overall_v1", ["T_high=0_5"])


def test_tune_grid_values_and_ranges() -> None:
    assert parse_axis("fusion.k=0o10,0x10,10").values == (8, 16, 10)
    assert parse_axis("fusion.k=10:30:0x0A").values == (10, 20, 30)
    with pytest.raises(TuneError, match=LEADING_ZERO):
        parse_axis("fusion.k=010:60:25")
    # a grid point written back as --set-recipe items reads as the same values
    point = {"sources.dense.normalize": "yes", "fusion.k": 8, "x": "1_000"}
    assert parse_overrides(as_overrides(point)) == point


def test_written_yaml_reads_back_as_written() -> None:
    """dump_yaml quotes a text the YAML 1.2 reader would take for a number (PyYAML's dumper,
    which follows YAML 1.1, writes `09`, `0o17` and `1e5` bare)."""
    texts = ["09", "0o17", "1e5", "00123458", "yes", "1_000", "1:30", "0x1F", "-.5", "True"]
    document = {"texts": texts, "numbers": [8, -0.5, 1e-9, 2.0], "09": True, "none": None}
    assert load_yaml(dump_yaml(document)) == document
    assert load_yaml(dump_yaml(document, flow=True, width=10_000)) == document


def test_a_policy_file_with_a_leading_zero_names_its_line(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: canonical_rrf\nfusion:\n  k: 010\n", encoding="utf-8")
    with pytest.raises(PolicyError) as refused:
        load_policy(FUSE_RECIPE, str(recipe))
    assert str(refused.value).startswith(f"{recipe}:3: 010 {LEADING_ZERO}")
    recipe.write_text("extends: canonical_rrf\nfusion:\n  k: 0o10\n", encoding="utf-8")
    assert load_policy(FUSE_RECIPE, str(recipe)).parameters["fusion"]["k"] == 8


def invoke(*args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(cli, ["-q", *args])
    return done.exit_code, done.stdout, done.stderr


def test_the_command_line_refuses_in_one_line(tmp_path: Path) -> None:
    code, _, err = invoke(
        "policy", "show", "canonical_rrf", "--capability", "fuse", "--set", "fusion.k=010"
    )
    assert code == 2 and err.count("\n") == 1
    # (a recipe's messages name --set-recipe, also from `policy show --set`: docs/policies.md)
    assert err.startswith(f"duckscore: error: --set-recipe 'fusion.k=010': 010 {LEADING_ZERO}")
    out = tmp_path / "fused"
    code, _, err = invoke(
        "fuse", "--log", str(SCIFACT / "retrieval_log.parquet"), "--out", str(out),
        "--set-recipe", "fusion.k=010",
    )  # fmt: skip
    assert code == 2 and "--set-recipe 'fusion.k=010'" in err and LEADING_ZERO in err
    assert not out.exists()
    recipe = tmp_path / "tuned.yaml"
    code, _, err = invoke(
        "tune", "--log", str(SCIFACT / "retrieval_log.parquet"),
        "--qrels", str(SCIFACT / "qrels.parquet"), "--out", str(recipe),
        "--grid", "fusion.k=010,60",
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1
    assert "--grid 'fusion.k=010,60': 010" in err and LEADING_ZERO in err
    assert not recipe.exists()
