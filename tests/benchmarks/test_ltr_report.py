"""benchmarks/results/ltr.json (docs/learn.md's table) reproduces: SciFact's held-out figures of
both learned models, of RRF and of the tuned weighted RRF, their p-values and the recipes'
versions (the same inputs, the same recipe on any machine)."""

from __future__ import annotations

import json

import pytest

from benchmarks.ltr_report import measure

from ..helpers import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.extended]  # two minutes of learned fusion
RESULTS = json.loads((ROOT / "benchmarks" / "results" / "ltr.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("model", ["trees", "linear"])
def test_the_scifact_figures_reproduce(model: str) -> None:
    (recorded,) = [c for c in RESULTS["collections"] if c["collection"] == "scifact"]
    found = measure("scifact", recorded["log"], recorded["qrels"], (model,))
    assert found["grid"] == recorded["grid"]
    assert found["queries"] == recorded["queries"] == 300
    for figure in ("rrf", "tuned"):
        assert found[figure] == pytest.approx(recorded[figure], rel=1e-9)
    got, expected = found[model], recorded[model]
    assert got["recipe_id"] == expected["recipe_id"]
    assert got["held_out"] == pytest.approx(expected["held_out"], rel=1e-9)
    for against in ("against_rrf", "against_tuned"):
        assert got[against]["p_value"] == expected[against]["p_value"]
        assert got[against]["difference"] == pytest.approx(
            expected[against]["difference"], rel=1e-9
        )
    assert len(got["per_fold"]) == len(expected["per_fold"]) == 5
    for fold, recorded_fold in zip(got["per_fold"], expected["per_fold"]):
        assert fold == pytest.approx(recorded_fold, rel=1e-9)
