"""Seed 000 §9.1: the calibration set covers the query kinds (推荐 / 教学 / 问答, 宽泛 / 细节). A
`kind` column of the labels (comma-separated kinds) is counted into the policy file's
`metadata.label_kinds`, and a seed kind missing or under MIN_LABELS_PER_KIND is a warning."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml
from click.testing import CliRunner

from duckscore.calibrate.tables import MIN_LABELS_PER_KIND
from duckscore.cli import cli

from .test_calibrate import _overlapping
from .test_refusals import SEPARATED, _files

OPTIONS = ["--thresholds", "precision", "--folds", "2", "--passes", "1"]
OPTIONS += ["--target-precision", "0.8"]


def calibrated(tmp_path: Path, labels: pd.DataFrame) -> tuple[dict, list[str]]:
    """The policy file's metadata and the warnings of `duckscore calibrate` on `labels`."""
    features, _ = _overlapping(lead=SEPARATED)
    tmp_path.mkdir(exist_ok=True)
    out = tmp_path / "p.yaml"
    args = [*_files(tmp_path, features, labels), "--out", str(out), *OPTIONS]
    result = CliRunner().invoke(cli, ["calibrate", *args])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    return yaml.safe_load(out.read_text(encoding="utf-8"))["metadata"], warnings


def test_kinds_are_counted_and_thin_ones_warned(tmp_path: Path) -> None:
    _, labels = _overlapping(lead=SEPARATED)  # 70 queries q0 … q69
    number = labels["query_id"].str[1:].astype(int)
    # qa for all 70; broad for q0 … q49, detailed for the other 20; tutorial for q0 … q4 (5);
    # a kind of our own, `howto`, and none named recommendation; one query without a kind
    kinds = ["qa," + ("broad" if i < 50 else "detailed") for i in number]
    kinds = [
        k + (", Tutorial" if i < 5 else "") + (",howto" if i == 7 else "")
        for k, i in zip(kinds, number)
    ]
    kinds[69] = None
    metadata, warnings = calibrated(tmp_path, labels.assign(kind=kinds))
    assert metadata["label_kinds"] == {
        "recommendation": 0, "tutorial": 5, "qa": 69, "broad": 50, "detailed": 19, "howto": 1,
    }  # fmt: skip
    assert warnings == [
        "duckscore: warning: --labels: seed 000 §9.1's query kinds are covered unevenly: "
        f"recommendation 0, tutorial 5 labels (fewer than {MIN_LABELS_PER_KIND}); thresholds "
        "fitted on them may not hold for those queries"
    ]


def test_every_kind_covered_is_no_warning_and_without_kinds_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    _, labels = _overlapping(lead=SEPARATED)
    seed = ["recommendation", "tutorial", "qa"]
    kinds = [f"{seed[i % 3]},{'broad' if i % 2 else 'detailed'}" for i in range(len(labels))]
    metadata, warnings = calibrated(tmp_path / "a", labels.assign(kind=kinds))
    assert warnings == []
    assert metadata["label_kinds"] == {
        "recommendation": 24, "tutorial": 23, "qa": 23, "broad": 35, "detailed": 35,
    }  # fmt: skip
    metadata, warnings = calibrated(tmp_path / "b", labels)
    assert "label_kinds" not in metadata and warnings == []
