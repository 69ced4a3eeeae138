"""The packaged default policy (overall_v3) is what `duckscore calibrate` writes from SciFact with
the settings its header names: every parameter to the last digit, and the records a
recalibration needs (the recipe, the score distribution)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from duckscore.calibrate.settings import CalibrationSettings
from duckscore.cli import cli
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.resources import policies_dir

from ..helpers import SCIFACT

PACKAGED = policies_dir("score") / f"{DEFAULT_POLICY}.yaml"


def run(*args: str) -> None:
    result = CliRunner().invoke(cli, ["-q", *args])
    assert result.exit_code == 0, result.output


@pytest.mark.extended  # a full five-fold calibration of SciFact: ~25 s
def test_the_default_policy_is_reproduced_by_its_calibration(tmp_path: Path) -> None:
    labels, out = tmp_path / "scifact_labels.parquet", tmp_path / "overall_v3.yaml"
    run("labels", "--run", str(SCIFACT / "reference_rrf_k60.parquet"), "--qrels",
        str(SCIFACT / "qrels.parquet"), "--out", str(labels))  # fmt: skip
    run("calibrate", "--log", str(SCIFACT / "retrieval_log.parquet"), "--labels", str(labels),
        "--qrels", str(SCIFACT / "qrels.parquet"), "--thresholds", "precision",
        "--target-precision", "0.9", "--version", DEFAULT_POLICY, "--out", str(out))  # fmt: skip
    written = yaml.safe_load(out.read_text(encoding="utf-8"))
    packaged = yaml.safe_load(PACKAGED.read_text(encoding="utf-8"))
    assert packaged["parameters"] == written["parameters"]
    for key in ("recipe", "score_distribution", "label_set_sha256", "label_counts", "method"):
        assert packaged["metadata"][key] == written["metadata"][key]


def test_the_default_policy_records_what_recalibration_needs() -> None:
    metadata = yaml.safe_load(PACKAGED.read_text(encoding="utf-8"))["metadata"]
    assert metadata["recipe"]["recipe_id"] == "canonical_rrf"
    assert set(metadata["score_distribution"]) >= {
        "base_rate", "below_T_low", "below_T_high", "hitl", "best_score_quantiles"
    }  # fmt: skip
    assert len(metadata["score_distribution"]["best_score_quantiles"]) == 101


def test_the_settings_are_recorded_as_the_default_policy_records_them() -> None:
    """Key for key and in order: the settings its header names, as its metadata.method wrote them."""
    method = yaml.safe_load(PACKAGED.read_text(encoding="utf-8"))["metadata"]["method"]
    recorded = CalibrationSettings(thresholds="precision", target_precision=0.9).record()
    assert list(recorded.items()) == [(k, v) for k, v in method.items() if k != "tuned"]
