"""What `duckscore recalibrate` and `run` warn about a policy on a log it does not fit (issue 47
§3): a band that collapses in recalibration (T_low = T_high: no `medium`), and the packaged
default on a log whose best scores are on another scale than its calibration's (SciFact with
one of its three retrievers dropped: p_good ≈ 0.002 for every query) — a warning naming that
cause and `duckscore recalibrate`, whose command, run as printed, ends it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.resources import policies_dir
from duckscore.scoring.scale import OFF_SCALE, off_scale, share_below

from ..helpers import FIXTURES, SCIFACT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("recalibrate_warnings")]

CISI_LOG = FIXTURES / "cisi" / "retrieval_log.parquet"
SCALE_WARNING = "this log's best scores are on another scale than its calibration's"


def invoke(*args: str) -> Result:
    """The command with its warnings on stderr (and no progress nor `done` lines)."""
    return CliRunner().invoke(cli, ["--no-progress", *args])


def warnings_of(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("duckscore: warning:")]


def recorded() -> dict:
    document = yaml.safe_load((policies_dir("score") / f"{DEFAULT_POLICY}.yaml").read_text())
    return document["metadata"]["score_distribution"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recalibrate_warnings")


@pytest.fixture(scope="module")
def two_retrievers(work: Path) -> Path:
    """SciFact's log without its dense retriever: another app's two-retriever log."""
    log = pd.read_parquet(SCIFACT / "retrieval_log.parquet")
    path = work / "two_retrievers.parquet"
    log[log["source"] != "dense"].to_parquet(path)
    return path


def test_share_below_reads_the_recorded_quantiles() -> None:
    rng = np.random.default_rng(0)
    sample = rng.beta(5, 2, 10_000)
    quantiles = [float(v) for v in np.quantile(sample, np.linspace(0, 1, 101))]
    for score in (0.3, 0.5, 0.7, 0.9):  # the empirical share below, to the grid's resolution
        assert share_below(score, quantiles) == pytest.approx((sample < score).mean(), abs=0.01)
    assert share_below(-1.0, quantiles) == 0.0 and share_below(2.0, quantiles) == 1.0
    tied = [0.0] * 21 + [float(v) for v in np.linspace(0.1, 1.0, 80)]  # a fifth score 0
    assert share_below(0.0, tied) == pytest.approx(0.1)  # the middle of the tied levels
    assert share_below(0.55, [0.0, 0.5, 0.6, 1.0]) == pytest.approx((1 + 0.5) / 3)
    assert off_scale(0.5, quantiles) is None
    low = float(np.quantile(sample, OFF_SCALE / 2))
    assert off_scale(low, quantiles) == pytest.approx(OFF_SCALE / 2, abs=0.01)
    assert off_scale(float(np.quantile(sample, 0.99)), quantiles) is not None


def test_the_default_on_another_scale_names_the_cause_and_the_remedy(
    work: Path, two_retrievers: Path
) -> None:
    result = invoke("run", "--log", str(two_retrievers), "--out", str(work / "shipped"))
    assert result.exit_code == 0, result.output
    queries = pd.read_parquet(work / "shipped" / "queries.parquet")
    assert queries["p_good"].mean() < 0.01  # the symptom: p_good ≈ 0.002
    [line] = warnings_of(result)  # one line, in place of "its thresholds do not separate …"
    distribution = recorded()
    median = float(queries["best_overall_score"].fillna(0.0).median())
    share = share_below(median, distribution["best_score_quantiles"])
    assert share < OFF_SCALE
    assert line == (
        f"duckscore: warning: policy {DEFAULT_POLICY} rates all {len(queries)} queries low, mean "
        f"p_good {queries['p_good'].mean():.3f} against its calibration's rate "
        f"{distribution['base_rate']:.3f}: {SCALE_WARNING} (median {median:.4g}, below "
        f"{np.floor(100 * (1 - share)):.0f} % of the calibration's; its median "
        f"{distribution['best_score_quantiles'][50]:.4g}) — `duckscore recalibrate --policy "
        f"{DEFAULT_POLICY} --log {two_retrievers} --out recalibrated.yaml` moves p_good and the "
        "thresholds to this log"
    )
    # the remedy, run as printed, then the log scored with what it wrote: no warning
    [command] = re.findall(r"`duckscore (recalibrate [^`]+)`", line)
    args = shlex.split(command)
    args[args.index("--out") + 1] = str(work / "recalibrated.yaml")
    recalibrated = invoke(*args)
    assert recalibrated.exit_code == 0, recalibrated.output
    rescored = invoke(
        "run", "--log", str(two_retrievers), "--policy", str(work / "recalibrated.yaml"),
        "--out", str(work / "rescored"),
    )  # fmt: skip
    assert rescored.exit_code == 0, rescored.output
    assert warnings_of(rescored) == []
    p_good = pd.read_parquet(work / "rescored" / "queries.parquet")["p_good"]
    assert p_good.mean() == pytest.approx(distribution["base_rate"], abs=0.03)


@pytest.mark.parametrize(
    ("log", "policy"),
    [
        (SCIFACT / "retrieval_log.parquet", DEFAULT_POLICY),  # the calibration's own log
        (CISI_LOG, DEFAULT_POLICY),  # lower, at the calibration's 19th percentile: on its scale
        ("two_retrievers", "overall_v2"),  # a policy that records no calibration
    ],
    ids=["scifact", "cisi", "uncalibrated"],
)
def test_no_scale_warning_on_the_calibrations_scale_or_without_one(
    log: Path | str, policy: str, work: Path, two_retrievers: Path
) -> None:
    given = two_retrievers if log == "two_retrievers" else log
    out = work / f"no_warning_{policy}_{Path(given).stem}"
    result = invoke("run", "--log", str(given), "--policy", policy, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert not any(SCALE_WARNING in line for line in warnings_of(result))


@pytest.fixture(scope="module")
def tied_log(work: Path) -> Path:
    """CISI's lowest and highest tenth of queries, and 60 copies of its median one: the
    calibration's quantiles of T_low and T_high (50 %, 71 %) both land on the copies' score."""
    result = invoke("-q", "run", "--log", str(CISI_LOG), "--out", str(work / "cisi"))
    assert result.exit_code == 0, result.output
    ordered = pd.read_parquet(work / "cisi" / "queries.parquet").sort_values("best_overall_score")
    ids = ordered["query_id"].tolist()
    tenth = len(ids) // 10
    log = pd.read_parquet(CISI_LOG)
    copies = [
        log[log["query_id"] == ids[len(ids) // 2]].assign(query_id=f"copy_{k}") for k in range(60)
    ]
    path = work / "tied.parquet"
    pd.concat([log[log["query_id"].isin(ids[:tenth] + ids[-tenth:])], *copies]).to_parquet(path)
    return path


def test_a_collapsed_band_is_warned_about(work: Path, tied_log: Path) -> None:
    out = work / "tied.yaml"
    # by quantile, as asked (auto keeps the shipped thresholds on this log)
    result = invoke("recalibrate", "--policy", DEFAULT_POLICY, "--log", str(tied_log), "--adapt",
                    "quantile", "--out", str(out))  # fmt: skip
    assert result.exit_code == 0, result.output
    document = yaml.safe_load(out.read_text())
    parameters, report = document["parameters"], document["metadata"]["recalibration"]
    assert parameters["T_low"] == parameters["T_high"]
    assert report["thresholds"]["band_collapsed"] is True
    assert report["decisions"]["medium"] == 0
    medium = dict(line.split(None, 1) for line in result.stdout.splitlines())["medium"]
    assert medium.startswith("0  (0 % of the log's queries")
    [line] = warnings_of(result)
    assert line == (
        f"duckscore: warning: T_low = T_high = {parameters['T_high']:.4g} in "
        f"{document['score_policy_version']}: no query of this log can be rated medium, each is "
        "high or low (60 of the log's 82 queries share that best score, so the quantiles of both "
        "thresholds land on it); lower T_low in the written policy if this log needs a medium "
        "band"
    )
