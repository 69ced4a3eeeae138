"""`duckscore calibrate` fails in one line naming the option, file and value at fault, never with a
traceback or a degenerate policy (issue 32): label floors stated before any work with what would
work instead, labels that do not occur in the input, weights that all went to 0, candidates that
make the score constant."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from duckscore.calibrate.ablation import candidate_values
from duckscore.calibrate.folds import check_label_counts
from duckscore.calibrate.pipeline import calibrate
from duckscore.calibrate.settings import CalibrationError, CalibrationSettings
from duckscore.cli import cli

from ..helpers import SCIFACT
from .test_calibrate import _overlapping

FAST = CalibrationSettings(folds=2, passes=1, thresholds="precision", target_precision=0.8)
SEPARATED = {"good": 0.002, "ambiguous": 0.001}  # parent_rrf leads: the classes separate
TUNED = ["alpha", "beta", "w1", "w2", "w3", "w_agreement", "w_separation"]


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["calibrate", *args])
    return result.exit_code, result.output


def _files(tmp_path: Path, features: pd.DataFrame, labels: pd.DataFrame) -> list[str]:
    features.to_parquet(tmp_path / "f.parquet")
    labels.to_parquet(tmp_path / "l.parquet")
    return ["--features", str(tmp_path / "f.parquet"), "--labels", str(tmp_path / "l.parquet")]


def test_tuning_w1_after_every_other_weight_went_to_0() -> None:
    """Was KeyError: 'w2' in candidate_values."""
    state = {"alpha": 1.0, "beta": 0.5, "w1": 1.0} | dict.fromkeys(TUNED[3:], 0.0)
    assert candidate_values(state, "w1", TUNED) == [{"w1": 1.0} | dict.fromkeys(TUNED[3:], 0.0)]
    for change in candidate_values(state, "w2", TUNED):
        merged = state | change
        assert math.isclose(sum(merged[w] for w in TUNED[2:]), 1.0) and merged["w1"] > 0


def test_a_candidate_that_makes_every_score_the_same_is_never_chosen(tmp_path: Path) -> None:
    """parent_rrf ranks bad above good, so every α > 0 has an AUROC below 0.5; α = 0 leaves
    max_score, 1 for every best parent: every score 0 and an AUROC of exactly 0.5. It was chosen,
    and the refusal named its symptom (no `ambiguous` query has a top-2 ratio)."""
    features, labels = _overlapping(lead={"bad": 0.002, "ambiguous": 0.001})
    settings = CalibrationSettings(folds=2, passes=1, thresholds="precision", target_precision=0.3)
    result = calibrate(labels, tmp_path / "p.yaml", features=features, settings=settings)
    assert all(step["value"] > 0 for fit in result.fits.values() for step in fit.steps[:1])
    assert result.predictions.groupby("fit")["best_overall_score"].nunique().min() > 1


def test_when_every_value_makes_the_score_constant_the_parameter_is_named(tmp_path: Path) -> None:
    features, labels = _overlapping()
    features["parent_rrf"] = 0.03 - 0.004 * features["parent_id"].str[1:].astype(int)
    code, output = _invoke(*_files(tmp_path, features, labels), "--out", str(tmp_path / "p.yaml"))
    assert code == 2 and len(output.strip().splitlines()) == 1
    assert (
        "fit all: every value of alpha tried (0 to 1) gives every labelled query of the fit "
        "the same score: the features do not tell them apart" in output
    )
    assert not (tmp_path / "p.yaml").exists()


def test_no_labelled_query_in_the_features(tmp_path: Path) -> None:
    """Was KeyError: 'all' (the reference bounds of a fit without queries)."""
    features, labels = _overlapping()
    labels["query_id"] = "x" + labels["query_id"]
    args = _files(tmp_path, features, labels)
    code, output = _invoke(*args, "--out", str(tmp_path / "p.yaml"))
    assert code == 2 and len(output.strip().splitlines()) == 1
    assert (
        f"--labels ({tmp_path / 'l.parquet'}): none of the 70 labelled query ids occurs in "
        f"--features ({tmp_path / 'f.parquet'}); labelled e.g. 'xq0', 'xq1', 'xq10', "
        "there e.g. 'q0', 'q1', 'q10'" in output
    )
    assert not (tmp_path / "p.yaml").exists()


def test_no_labelled_query_in_the_log_refuses_before_fusing(tmp_path: Path) -> None:
    _, labels = _overlapping()
    labels["query_id"] = "x" + labels["query_id"]
    labels.to_parquet(tmp_path / "l.parquet")
    log = SCIFACT / "retrieval_log.parquet"
    code, output = _invoke(
        "--log", str(log), "--labels", str(tmp_path / "l.parquet"), "--out", str(tmp_path / "p")
    )
    assert code == 2 and len(output.strip().splitlines()) == 1
    assert (
        f"none of the 70 labelled query ids occurs in --log ({log}); labelled e.g. 'xq0'" in output
    )


def test_labels_not_in_the_input_are_counted_said_and_recorded(tmp_path: Path) -> None:
    """A partial overlap ran silently, the missing queries scored 0 (a much worse fit)."""
    features, labels = _overlapping(lead=SEPARATED)
    extra = pd.DataFrame({"query_id": [f"z{i}" for i in range(40)], "label": "good"})
    args = _files(tmp_path, features, pd.concat([labels, extra]))
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(
        cli, ["calibrate", *args, "--out", str(out), "--thresholds", "precision", "--folds", "2",
              "--passes", "1", "--target-precision", "0.8"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    warning = (
        "duckscore: warning: --labels: 40 of 110 labelled query ids do not occur in --features; "
        "calibrating on the other 70"
    )
    assert warning in result.stderr.splitlines()
    metadata = yaml.safe_load(out.read_text(encoding="utf-8"))["metadata"]
    assert metadata["labels_not_in_log"] == 40
    assert metadata["label_counts"] == {"good": 30, "ambiguous": 10, "bad": 30}


def test_the_floors_run_on_the_labels_the_input_has(tmp_path: Path) -> None:
    features, labels = _overlapping(lead=SEPARATED)
    features = features[~features["query_id"].isin([f"q{i}" for i in range(30, 35)])]
    with pytest.raises(
        CalibrationError,
        match=r"--labels \(<DataFrame>\): T_low \(the P90 of the `bad` queries' scores, under "
        r"either --thresholds\) needs at least 29 `bad` queries; you have 25 in --features "
        r"\(30 labelled\): label at least 4 more$",
    ):
        calibrate(labels, tmp_path / "p.yaml", features=features, settings=FAST)
    assert not (tmp_path / "p.yaml").exists()


def test_the_floors_are_checked_before_the_log_is_read(tmp_path: Path) -> None:
    _, labels = _overlapping(n_per_class=12)
    with pytest.raises(CalibrationError, match=r"you have 12: label at least 17 more$"):
        calibrate(labels, tmp_path / "p.yaml", log=tmp_path / "no-such-log.parquet")


@pytest.mark.parametrize(
    ("counts", "settings", "message"),
    [
        (
            {"good": 20, "ambiguous": 10, "bad": 30},
            CalibrationSettings(),
            "--labels: T_high by --thresholds quantile (the P10 of the `good` queries' scores) "
            "needs at least 29 `good` queries; you have 20: use --thresholds precision (T_high "
            "by --target-precision needs no quantile of `good`) or label at least 9 more",
        ),
        (
            {"good": 30, "ambiguous": 7, "bad": 30},
            CalibrationSettings(),
            "--labels: R_hitl (the P70 of the `ambiguous` queries' top-2 ratios, --hitl-quantile "
            "0.7) needs at least 9 `ambiguous` queries; you have 7: use --hitl-quantile 0.65 "
            "(needs 7) or label at least 2 more",
        ),
        (
            {"good": 30, "ambiguous": 3, "bad": 30},
            CalibrationSettings(hitl_quantile=0.6),
            "--labels: R_hitl (the P60 of the `ambiguous` queries' top-2 ratios, --hitl-quantile "
            "0.6) needs at least 6 `ambiguous` queries; you have 3: label at least 3 more "
            "(--hitl-quantile 0.5 needs 5)",
        ),
        (
            {"good": 30, "ambiguous": 9, "bad": 30},
            CalibrationSettings(folds=10),
            "--folds 10: more folds than the 9 `ambiguous` queries; use --folds 9 or fewer "
            "(every fold tests at least one query of each label)",
        ),
    ],
)
def test_each_floor_says_what_would_work(
    counts: dict[str, int], settings: CalibrationSettings, message: str
) -> None:
    with pytest.raises(CalibrationError) as raised:
        check_label_counts(counts, settings, "--labels")
    assert str(raised.value) == message


def test_the_precision_method_needs_no_floor_of_good() -> None:
    counts = {"good": 3, "ambiguous": 9, "bad": 29}
    check_label_counts(counts, CalibrationSettings(thresholds="precision", folds=3), "--labels")
