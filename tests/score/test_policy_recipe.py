"""A policy knows its recipe (issue 32): a calibrated policy records the recipe its features
were fused with; `run` fuses with it when --recipe is not given, refuses another in one line
(unless --allow-recipe-mismatch), and `score` refuses features that `fuse` wrote with another
recipe. A policy that records none fuses with the default recipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.common.defaults import DEFAULT_RECIPE
from duckscore.core.resources import policies_dir

from ..helpers import SCIFACT

LOG = str(SCIFACT / "retrieval_log.parquet")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def recipe_of(out: Path) -> str:
    return str(json.loads((out / "manifest.json").read_text())["policy"]["recipe_id"])


def policy_recording(tmp_path: Path, recipe: dict[str, str] | None) -> Path:
    """overall_v2 with a probability-free copy of the packaged default's metadata.recipe."""
    document = yaml.safe_load((policies_dir("score") / "overall_v2.yaml").read_text())
    document["score_policy_version"] = "recorded"
    document["metadata"] = {} if recipe is None else {"recipe": recipe}
    path = tmp_path / "recorded.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def packaged_record() -> dict[str, str]:
    document = yaml.safe_load((policies_dir("score") / "overall_v3.yaml").read_text())
    return dict(document["metadata"]["recipe"])


@pytest.mark.slow
def test_run_fuses_with_the_policys_recipe_and_refuses_another(tmp_path: Path) -> None:
    policy = str(policy_recording(tmp_path, {**packaged_record(), "recipe_id": "canonical_rrf"}))
    assert (
        invoke("run", "--log", LOG, "--policy", policy, "--out", str(tmp_path / "a")).exit_code == 0
    )
    assert recipe_of(tmp_path / "a") == "canonical_rrf"

    refused = invoke(
        "run",
        "--log",
        LOG,
        "--policy",
        policy,
        "--recipe",
        "hybrid_v1",
        "--out",
        str(tmp_path / "b"),
    )
    assert refused.exit_code == 2
    [line] = refused.stderr.splitlines()
    assert line.startswith(
        "duckscore: error: --recipe: recipe hybrid_v1 is not the recipe policy recorded"
    )
    assert "--allow-recipe-mismatch" in line
    assert not (tmp_path / "b").exists()

    allowed = invoke(
        "run", "--log", LOG, "--policy", policy, "--recipe", "hybrid_v1",
        "--allow-recipe-mismatch", "--out", str(tmp_path / "c"),
    )  # fmt: skip
    assert allowed.exit_code == 0 and recipe_of(tmp_path / "c") == "hybrid_v1"


def test_a_recipe_with_other_overrides_is_refused(tmp_path: Path) -> None:
    policy = str(policy_recording(tmp_path, packaged_record()))
    refused = invoke(
        "run", "--log", LOG, "--policy", policy, "--set-recipe", "fusion.k=20",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert refused.exit_code == 2
    assert "--set-recipe: recipe canonical_rrf+" in refused.stderr
    assert not (tmp_path / "out").exists()


def test_a_policy_without_a_record_fuses_with_the_default(tmp_path: Path) -> None:
    policy = str(policy_recording(tmp_path, None))
    assert (
        invoke("run", "--log", LOG, "--policy", policy, "--out", str(tmp_path / "a")).exit_code == 0
    )
    assert recipe_of(tmp_path / "a") == DEFAULT_RECIPE


def test_a_recorded_recipe_file_that_is_gone_is_named(tmp_path: Path) -> None:
    policy = str(
        policy_recording(
            tmp_path,
            {
                "recipe_id": "mine",
                "parameters_sha256": "0" * 64,
                "source": str(tmp_path / "mine.yaml"),
            },
        )
    )
    refused = invoke("run", "--log", LOG, "--policy", policy, "--out", str(tmp_path / "out"))
    assert refused.exit_code == 2
    assert (
        "calibrated with recipe 'mine'" in refused.stderr
        and "give it with --recipe" in refused.stderr
    )


@pytest.mark.slow
def test_score_refuses_features_of_another_recipe(tmp_path: Path) -> None:
    policy = str(policy_recording(tmp_path, packaged_record()))
    for recipe in ("hybrid_v1", "canonical_rrf"):
        fused = invoke("fuse", "--log", LOG, "--recipe", recipe, "--out", str(tmp_path / recipe))
        assert fused.exit_code == 0
    features = tmp_path / "hybrid_v1" / "parent_features.parquet"
    refused = invoke(
        "score", "--features", str(features), "--policy", policy, "--out", str(tmp_path / "s")
    )
    assert refused.exit_code == 2
    assert "--features: recipe hybrid_v1 is not the recipe policy recorded" in refused.stderr
    assert not (tmp_path / "s").exists()
    ok = tmp_path / "canonical_rrf" / "parent_features.parquet"
    assert (
        invoke(
            "score", "--features", str(ok), "--policy", policy, "--out", str(tmp_path / "t")
        ).exit_code
        == 0
    )
    allowed = invoke(
        "score", "--features", str(features), "--policy", policy, "--allow-recipe-mismatch",
        "--out", str(tmp_path / "u"),
    )  # fmt: skip
    assert allowed.exit_code == 0
    bare = tmp_path / "bare.parquet"  # no manifest beside it: taken as it is
    bare.write_bytes(features.read_bytes())
    assert (
        invoke(
            "score", "--features", str(bare), "--policy", policy, "--out", str(tmp_path / "v")
        ).exit_code
        == 0
    )
