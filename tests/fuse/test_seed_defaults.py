"""Seed 003 §12.1's v1.0 configuration and §6.3's normaliser advice: the seed's names accepted as
aliases (recorded as the names they stand for), weighted_sum's normaliser when a recipe names
none, and the caution on minmax."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore import fuse
from duckscore.cli import cli
from duckscore.core.policy import load_policy
from duckscore.fusion.recipe import FUSE_RECIPE

from ..helpers import SCIFACT

# hybrid_v1's parameters_sha256 before the aliases existed: an alias changes no recipe
HYBRID_V1_SHA256 = "499bc5da1d519795a4cc75245132407512b7340342f9e98393ffaaee693a089f"
# two sources of scores, x and y in both (sigmoid(s) = 1 / (1 + e^-s), center 0, scale 1)
LOG = pd.DataFrame(
    {
        "query_id": "q",
        "source": ["a", "a", "b", "b"],
        "item_id": ["x", "y", "x", "y"],
        "parent_id": ["x", "y", "x", "y"],
        "score": [2.0, -1.0, 0.5, 3.0],
    }
)


def sigmoid(s: float) -> float:
    return 1.0 / (1.0 + math.exp(-s))


def record(recipe: str, *overrides: str) -> dict:
    return load_policy(FUSE_RECIPE, recipe, list(overrides)).as_record()


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_sum_decay_is_max_decay_in_a_file_and_an_override(tmp_path: Path) -> None:
    """§12.1's `sum_decay` aligner is `max_decay`: recorded under that name, with the same
    parameters (and, as an override, the same version) as `max_decay`."""
    assert record("hybrid_v1")["parameters_sha256"] == HYBRID_V1_SHA256
    seed = record(write(tmp_path / "seed.yaml", "aligner: {method: sum_decay}\n"))
    ours = record(write(tmp_path / "ours.yaml", "aligner: {method: max_decay}\n"))
    assert seed["parameters"]["aligner"]["method"] == "max_decay"
    assert (seed["recipe_id"], seed["parameters_sha256"]) == (
        ours["recipe_id"],
        ours["parameters_sha256"],
    )
    assert seed["parameters_sha256"] == HYBRID_V1_SHA256  # hybrid_v1's aligner already
    over = record("canonical_rrf", "aligner.method=sum_decay")
    assert over["overrides"] == {"aligner.method": "max_decay"}
    assert over == record("canonical_rrf", "aligner.method=max_decay")


def test_fusion_type_is_accepted_as_an_override() -> None:
    assert record("hybrid_v1", "fusion.type=combsum") == record(
        "hybrid_v1", "fusion.method=combsum"
    )
    both = CliRunner().invoke(
        cli,
        ["fuse", "--log", str(SCIFACT / "retrieval_log.parquet"), "--out", "unused"]
        + ["--set-recipe", "fusion.type=rrf", "--set-recipe", "fusion.method=rrf"],
    )
    assert both.exit_code == 2 and both.stderr.count("\n") == 1
    assert "--set-recipe: fusion: give `method` or seed 003's `type`, not both" in both.stderr


def test_weighted_sum_without_a_normaliser_takes_sigmoid(tmp_path: Path) -> None:
    """§6.3 / §12.1: weighted_sum normalises by sigmoid unless the recipe says otherwise; the
    fused score is Σ w·sigmoid(s), computed here by hand."""
    said = fuse(LOG, "hybrid_v1", ["fusion.method=weighted_sum"], features=False)
    assert said.recipe.policy.parameters["source_defaults"]["normalize"] == "sigmoid"
    got = dict(said.fused.df()[["item_id", "fused_score"]].itertuples(index=False))
    assert got == pytest.approx(
        {"x": sigmoid(2.0) + sigmoid(0.5), "y": sigmoid(-1.0) + sigmoid(3.0)}, abs=1e-12
    )
    partial = record(write(tmp_path / "w.yaml", "fusion: {type: weighted_sum}\n"))
    assert partial["parameters"]["source_defaults"]["normalize"] == "sigmoid"
    assert partial["parameters"] == record("hybrid_v1", "fusion.method=weighted_sum")["parameters"]


def test_a_normaliser_the_recipe_names_is_kept(tmp_path: Path) -> None:
    kept = record("hybrid_v1", "fusion.method=weighted_sum", "source_defaults.normalize=rank")
    assert kept["parameters"]["source_defaults"]["normalize"] == "rank"
    text = "fusion: {method: weighted_sum}\nsource_defaults: {normalize: zscore}\n"
    assert record(write(tmp_path / "z.yaml", text))["parameters"]["source_defaults"] == {
        **record("hybrid_v1")["parameters"]["source_defaults"],
        "normalize": "zscore",
    }
    # a packaged score-fusion recipe says its normaliser: none (Elasticsearch's linear default)
    linear = record("elasticsearch_linear")["parameters"]
    assert (linear["fusion"]["method"], linear["source_defaults"]["normalize"]) == (
        "weighted_sum",
        "none",
    )
    # a file that extends it and restates nothing of the method keeps it
    extended = record(write(tmp_path / "e.yaml", "extends: elasticsearch_linear\nfusion: {k: 5}\n"))
    assert extended["parameters"]["source_defaults"]["normalize"] == "none"


def test_minmax_where_scores_are_fused_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    sets = ["fusion.method=weighted_sum", "source_defaults.normalize=minmax"]
    with caplog.at_level(logging.WARNING, logger="duckscore"):
        fuse(LOG, "hybrid_v1", sets, features=False)
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith("recipe hybrid_v1+")
    assert "sources a, b normalize by minmax" in warning and "seed 003 §6.3" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="duckscore"):
        # RRF reads ranks: the normaliser does not enter the score
        fuse(LOG, "hybrid_v1", ["source_defaults.normalize=minmax"], features=False)
        fuse(LOG, "hybrid_v1", ["fusion.method=weighted_sum"], features=False)
    assert caplog.records == []


def test_the_command_line_prints_the_minmax_warning(tmp_path: Path) -> None:
    log = write(tmp_path / "log.csv", LOG.to_csv(index=False))
    args = ["fuse", "--log", log, "--out", str(tmp_path / "out")]
    sets = [
        "--set-recipe",
        "fusion.method=weighted_sum",
        "--set-recipe",
        "sources.b.normalize=minmax",
    ]
    result = CliRunner().invoke(cli, [*args, *sets])
    assert result.exit_code == 0, result.output
    [warning] = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warning.startswith("duckscore: warning: recipe canonical_rrf+")  # the default
    assert "sources b normalize by minmax" in warning
    quiet = CliRunner().invoke(cli, ["-q", *args, *sets])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_the_seeds_sum_top_n_recipe_sums_a_parents_three_best_hits() -> None:
    """Seed 003 §7.1's default aligner as the packaged recipe seed003_sum_top_n: a parent's score
    in a source is the sum of its three best hits, then RRF (k = 60). By hand, in source a:
    x's hits 5, 4, 3, 2 sum to 12 (14 with all four), y's one hit is 13, z's is 6 — the three
    best rank y, x, z, where max ranks y, z, x and a sum of all x, y, z."""
    hits = {"x": [5.0, 4.0, 3.0, 2.0], "y": [13.0], "z": [6.0]}
    log = pd.DataFrame(
        [
            {"query_id": "q", "source": "a", "item_id": f"{parent}#{i}", "parent_id": parent,
             "score": score}
            for parent, scores in hits.items()
            for i, score in enumerate(scores)
        ]
    )  # fmt: skip
    assert record("seed003_sum_top_n")["parameters"]["aligner"]["top_n"] == 3
    fused = fuse(log, "seed003_sum_top_n", features=False).fused.df().sort_values("rank")
    assert list(fused["item_id"]) == ["y", "x", "z"]
    assert list(fused["fused_score"]) == pytest.approx([1 / 61, 1 / 62, 1 / 63], abs=1e-15)
