"""`duckscore drift` (issue 51's monitoring) on the bundled logs scored by the default policy:
SciFact, its calibration's own domain, shows no shift; CISI a moved scale. The JSON is checked
against calibrate/shift.py's diagnose() fed from the files by hand — the policy YAML's recorded
quantiles and its beta map written out in numpy, queries.parquet read with pandas — and the
refusals are one line, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner, Result

from duckscore.calibrate.shift import Reference, diagnose
from duckscore.cli import cli
from duckscore.core.resources import policies_dir

from ..helpers import FIXTURES, SCIFACT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("drift")]

CISI = FIXTURES / "cisi"
DEFAULT = policies_dir("score") / "overall_v3.yaml"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def scored(out: Path, log: Path, *options: str) -> Path:
    result = invoke("run", "--log", str(log), "--out", str(out), "--no-explain", *options)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("drift")
    return {
        "scifact": scored(work / "scifact", SCIFACT / "retrieval_log.parquet"),
        "cisi": scored(work / "cisi", CISI / "retrieval_log.parquet"),
    }


def calibration() -> tuple[Reference, np.ndarray, float]:
    """overall_v3's calibration as its file records it: the best scores split by its beta map
    σ(c + a·ln s + b·ln(1 − s)) written out here, the top-2 ratio's quantiles, the base rate."""
    document = yaml.safe_load(DEFAULT.read_text(encoding="utf-8"))
    recorded = document["metadata"]["score_distribution"]
    beta = document["parameters"]["probability"]["beta"]

    def p_good(s: np.ndarray) -> np.ndarray:
        s = np.clip(s, 1e-6, 1 - 1e-6)
        z = beta["intercept"] + beta["ln_score"] * np.log(s)
        return 1 / (1 + np.exp(-(z + beta["ln_one_minus_score"] * np.log(1 - s))))

    reference = Reference.recorded(recorded["best_score_quantiles"], recorded["queries"], p_good)
    return reference, np.array(recorded["top2_ratio_quantiles"]), recorded["base_rate"]


@pytest.mark.parametrize(("collection", "shift"), [("scifact", "none"), ("cisi", "scale")])
def test_the_json_is_the_diagnosis_of_the_runs_best_scores(
    runs: dict[str, Path], collection: str, shift: str
) -> None:
    result = invoke("drift", "--run", str(runs[collection]), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    queries = pd.read_parquet(runs[collection] / "queries.parquet")
    reference, ratio_quantiles, base_rate = calibration()
    ratios = queries["top2_ratio"].fillna(0.0).to_numpy()  # no second candidate: 0
    expected = diagnose(
        reference, queries["best_overall_score"].to_numpy(), (ratio_quantiles, ratios)
    )
    assert expected.ratio_ks is not None
    assert found["shift"] == expected.shift == shift
    assert found["shifted"] is (shift != "none")
    for key, value in expected.as_record().items():
        assert found["diagnosis"][key] == pytest.approx(value, abs=1e-9), key
    assert found["p_good_mean"] == pytest.approx(np.mean(queries["p_good"]), abs=1e-12)
    assert found["calibration_rate"] == base_rate
    assert found["policy"] == "overall_v3"


def test_scifact_fits_and_cisi_has_moved(runs: dict[str, Path]) -> None:
    fits = invoke("drift", "--run", str(runs["scifact"]), "--check")
    assert fits.exit_code == 0, fits.output
    lines = dict(line.split(None, 1) for line in fits.stdout.splitlines())
    assert lines["shift"].startswith("none:")
    assert lines["todo"] == "nothing to do: the policy fits this log"
    assert lines["p_good_mean"].split()[0] == "0.540"
    moved = invoke("drift", "--run", str(runs["cisi"]), "--check")
    assert moved.exit_code == 1, moved.output
    lines = dict(line.split(None, 1) for line in moved.stdout.splitlines())
    assert lines["shift"].startswith("scale:")
    # the diagnosis does not refute the shipped map's rate: labels settle it, and the command
    # they go to names the run's policy and log
    assert lines["adapt"].startswith("keep")
    assert "label 30" in lines["todo"]
    log = str(CISI / "retrieval_log.parquet")
    assert f"duckscore recalibrate --policy overall_v3 --log {log} --labels" in lines["todo"]
    assert invoke("drift", "--run", str(runs["cisi"])).exit_code == 0  # no --check: 0


def test_a_log_is_scored_first_as_run_scores_it(runs: dict[str, Path]) -> None:
    by_log = invoke("drift", "--log", str(CISI / "retrieval_log.parquet"), "--json")
    by_run = invoke("drift", "--run", str(runs["cisi"]), "--json")
    assert by_log.exit_code == by_run.exit_code == 0, by_log.output
    assert json.loads(by_log.stdout) == json.loads(by_run.stdout)


def test_a_policy_without_a_map_is_refused(tmp_path: Path) -> None:
    for args in (
        ["--run", str(scored(tmp_path / "v1", CISI / "retrieval_log.parquet", "--policy", "overall_v1"))],
        ["--log", str(CISI / "retrieval_log.parquet"), "--policy", "overall_v1"],
    ):  # fmt: skip
        result = invoke("drift", *args)
        assert result.exit_code == 2
        [line] = result.stderr.splitlines()
        assert "overall_v1 has no p_good map" in line and result.stdout == ""


def test_a_policy_file_is_reloaded_from_the_manifest_or_named(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run scored with a policy file given relative to where it ran: found from there; from
    elsewhere it must be named, and what is named must hash to the run's parameters."""
    shutil.copy(DEFAULT, tmp_path / "mine.yaml")
    monkeypatch.chdir(tmp_path)
    run = scored(tmp_path / "run", CISI / "retrieval_log.parquet", "--policy", "mine.yaml")
    from_there = invoke("drift", "--run", str(run), "--json")
    assert from_there.exit_code == 0, from_there.output
    assert (
        json.loads(from_there.stdout)["diagnosis"]
        == json.loads(invoke("drift", "--run", str(runs["cisi"]), "--json").stdout)["diagnosis"]
    )
    monkeypatch.chdir(tmp_path.parent)
    lost = invoke("drift", "--run", str(run))
    assert lost.exit_code == 2 and "mine.yaml, is not found from here" in lost.stderr
    named = invoke("drift", "--run", str(run), "--policy", str(tmp_path / "mine.yaml"))
    assert named.exit_code == 0, named.output
    other = invoke("drift", "--run", str(run), "--policy", "overall_v2")
    assert other.exit_code == 2 and "parameters_sha256 differs" in other.stderr


def test_one_of_run_and_log(runs: dict[str, Path]) -> None:
    assert invoke("drift").exit_code == 2
    both = invoke("drift", "--run", str(runs["cisi"]), "--log", str(CISI / "retrieval_log.parquet"))
    assert both.exit_code == 2 and "one of --run and --log" in both.stderr


def test_a_policy_that_records_no_calibration_is_refused(tmp_path: Path) -> None:
    document = yaml.safe_load(DEFAULT.read_text(encoding="utf-8"))
    del document["metadata"]["score_distribution"]
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    result = invoke("drift", "--log", str(CISI / "retrieval_log.parquet"), "--policy",
                    str(tmp_path / "bare.yaml"))  # fmt: skip
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert "does not record the score distribution it was calibrated on" in line
