"""`duckscore recalibrate` end to end (issue 32): the packaged default (calibrated on SciFact)
carried to CISI, another domain, with no label and with 40; checked against numpy quantiles of
the old policy's own scores, a penalised log-loss minimised by scipy on the decisions the
label-free policy's SQL wrote, and the refusals, each one line with nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner, Result
from scipy import optimize

from duckscore.cli import cli
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.policy import load_policy
from duckscore.core.resources import policies_dir
from duckscore.scoring.policy import SCORE_POLICY

from ..helpers import FIXTURES, SCIFACT, documented_keys

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("recalibrate")]

CISI = FIXTURES / "cisi"
LOG = str(CISI / "retrieval_log.parquet")
# metadata.recalibration's keys, in the order docs/recalibrate.md lists them
RECORDED = documented_keys("docs/recalibrate.md", "`metadata.recalibration` holds")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p / (1 - p))


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recalibrate")


@pytest.fixture(scope="module")
def cisi_labels(work: Path) -> pd.DataFrame:
    out = work / "labels.parquet"
    result = invoke(
        "labels", "--run", str(CISI / "reference_rrf_k60.parquet"), "--qrels",
        str(CISI / "qrels.parquet"), "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return pd.read_parquet(out)


@pytest.fixture(scope="module")
def old_run(work: Path) -> pd.DataFrame:
    """The default policy's decisions on CISI, as `run` writes them."""
    result = invoke("run", "--log", LOG, "--out", str(work / "old"))
    assert result.exit_code == 0, result.output
    return pd.read_parquet(work / "old" / "queries.parquet")


@pytest.fixture(scope="module")
def label_free(work: Path) -> tuple[Result, dict]:
    """--adapt quantile, as asked (auto keeps the shipped map on CISI: test_recalibrate_auto)."""
    out = work / "free.yaml"
    result = invoke(
        "recalibrate", "--policy", DEFAULT_POLICY, "--log", LOG, "--adapt", "quantile", "--out",
        str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result, yaml.safe_load(out.read_text())


def default_document() -> dict:
    return yaml.safe_load((policies_dir("score") / f"{DEFAULT_POLICY}.yaml").read_text())


def test_label_free_versions_and_records(label_free: tuple[Result, dict], work: Path) -> None:
    result, document = label_free
    loaded = load_policy(SCORE_POLICY, str(work / "free.yaml"))
    assert (
        document["score_policy_version"] == f"{DEFAULT_POLICY}_recal_{loaded.parameters_sha256[:8]}"
    )
    assert document["parent_version"] == DEFAULT_POLICY
    assert document["metadata"]["recipe"] == default_document()["metadata"]["recipe"]
    report = document["metadata"]["recalibration"]
    assert report["adapt"] == "quantile" and report["labels"] is None
    assert report["chosen"]["adapt"] == "quantile"
    assert report["chosen"]["reason"].startswith("--adapt quantile, as asked; --adapt auto would")
    assert report["diagnosis"]["shift"] == "scale"
    assert list(report) == [key for key in RECORDED if key != "prior_shift"]
    assert report["base_rate"] == report["p_good_mean"]
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names == [
        "recalibrated", "diagnosis", "chosen", "base_rate", "p_good_mean", "best_score_median", "T_low", "T_high",
        "R_hitl", "high", "medium", "low", "need_hitl", "web_fallback", "assumes",
    ]  # fmt: skip


def printed(result: Result) -> dict[str, str]:
    """recalibrate's stdout: each line's name -> the rest of the line."""
    return dict(line.split(None, 1) for line in result.stdout.splitlines())


def run_counts(queries: pd.DataFrame) -> dict[str, int]:
    levels = queries["confidence_level"].value_counts()
    return {
        **{level: int(levels.get(level, 0)) for level in ("high", "medium", "low")},
        "need_hitl": int(queries["need_hitl"].sum()),
        "web_fallback": int(queries["web_fallback"].sum()),
    }


def test_the_decision_mix_is_what_run_decides_with_the_new_policy(
    label_free: tuple[Result, dict], work: Path
) -> None:
    """Each level, HITL and web fallback, counted as `run` with the written policy decides them
    on the log, each beside its share of the log's queries."""
    result, document = label_free
    out = work / "mix_run"
    ran = invoke("run", "--log", LOG, "--policy", str(work / "free.yaml"), "--out", str(out))
    assert ran.exit_code == 0, ran.output
    queries = pd.read_parquet(out / "queries.parquet")
    expected = run_counts(queries)
    lines = printed(result)
    for name, count in expected.items():
        assert lines[name].split()[0] == str(count)
        assert f"({100 * count / len(queries):.0f} %" in lines[name]
    assert {k: document["metadata"]["recalibration"]["decisions"][k] for k in expected} == expected
    assert (
        "best score >= T_high" in lines["high"]
        and "T_low <= best score < T_high" in (lines["medium"])
    )
    assert document["metadata"]["recalibration"]["decisions"]["precision_high"] is None
    assert document["metadata"]["recalibration"]["thresholds"]["band_collapsed"] is False


def test_the_label_free_assumption_is_said_with_the_way_to_check_it(
    label_free: tuple[Result, dict],
) -> None:
    result, _ = label_free
    recorded = default_document()["metadata"]["score_distribution"]
    low, high = recorded["below_T_low"], 1 - recorded["below_T_high"]
    medium = recorded["below_T_high"] - low
    assumes = printed(result)["assumes"]
    assert assumes.startswith(
        f"{100 * recorded['base_rate']:.0f} % of this log's queries are answered well, the "
        "calibration's rate (--adapt quantile"
    )
    assert (
        f"{100 * high:.0f} % high, {100 * medium:.0f} % medium, {100 * low:.0f} % low, the "
        "calibration's shares" in assumes
    )
    assert assumes.endswith("label 30 queries to check it (--labels)")
    median = printed(result)["best_score_median"]
    quantiles = recorded["best_score_quantiles"]
    assert f"(the calibration's: {quantiles[50]:.4f}; this log's at its " in median


def test_thresholds_move_to_the_recorded_quantiles(
    label_free: tuple[Result, dict], old_run: pd.DataFrame
) -> None:
    _, document = label_free
    recorded = default_document()["metadata"]["score_distribution"]
    scores = old_run["best_overall_score"].fillna(0.0).to_numpy()
    ratios = old_run["top2_ratio"].fillna(0.0).to_numpy()
    p = document["parameters"]
    assert p["T_low"] == pytest.approx(
        min(np.quantile(scores, recorded["below_T_low"]), p["T_high"])
    )
    assert p["T_high"] == pytest.approx(np.quantile(scores, recorded["below_T_high"]))
    assert p["R_hitl"] == pytest.approx(np.quantile(ratios, 1 - recorded["hitl"]))
    assert p["risk_flags"]["ambiguous_candidate"]["ratio_at_least"] == p["R_hitl"]


@pytest.fixture(scope="module")
def free_run(label_free: tuple[Result, dict], work: Path) -> pd.DataFrame:
    """The label-free (quantile) policy's decisions on CISI, as `run` writes them."""
    out = work / "new"
    result = invoke("run", "--log", LOG, "--policy", str(work / "free.yaml"), "--out", str(out))
    assert result.exit_code == 0, result.output
    return pd.read_parquet(out / "queries.parquet")


def test_quantile_adaptation_keeps_the_calibrations_p_good_by_rank(
    free_run: pd.DataFrame, old_run: pd.DataFrame
) -> None:
    """The new p_good orders queries as their scores do, and averages what the calibration's
    queries averaged (the base rate is kept; the score scale moved)."""
    new = free_run.merge(
        old_run[["query_id", "best_overall_score"]], on="query_id", suffixes=("", "_old")
    )
    # the same scores, up to the precision the policy file writes its parameters at
    np.testing.assert_allclose(new["best_overall_score"], new["best_overall_score_old"], rtol=1e-9)
    ordered = new.sort_values("best_overall_score")["p_good"].to_numpy()
    assert (np.diff(ordered) >= -1e-12).all()
    assert new["p_good"].mean() == pytest.approx(
        default_document()["metadata"]["score_distribution"]["base_rate"], abs=0.03
    )


def test_forty_labels_refit_p_good_as_the_penalised_log_loss_says(
    work: Path,
    cisi_labels: pd.DataFrame,
    label_free: tuple[Result, dict],
    free_run: pd.DataFrame,
    old_run: pd.DataFrame,
) -> None:
    # the 20 good answers the shipped map rates highest and the 20 others it rates lowest: labels
    # on which the score separates the outcomes, so a map of it beats the labels' rate at the
    # 95 % level (on a random draw of CISI's it never does: the rate is written, as tested in
    # test_recalibrate_auto.py)
    rated = cisi_labels.merge(old_run[["query_id", "p_good"]], on="query_id")
    by_p = rated.sort_values(["p_good", "query_id"], ascending=False)
    good = by_p["label"] == "good"
    labels = pd.concat([by_p[good].head(20), by_p[~good].tail(20)])[cisi_labels.columns]
    labels.to_parquet(work / "forty.parquet")
    out = work / "forty.yaml"
    result = invoke(
        "recalibrate", "--policy", DEFAULT_POLICY, "--log", LOG, "--adapt", "quantile",
        "--labels", str(work / "forty.parquet"), "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    recorded = yaml.safe_load(out.read_text())["metadata"]["recalibration"]
    # with labels, the base rate is theirs, recorded right after them
    after_labels = [key for key in RECORDED if key not in ("prior_shift", "base_rate")]
    after_labels.insert(after_labels.index("labels") + 1, "base_rate")
    assert list(recorded) == after_labels
    report = recorded["labels"]
    assert report["n"] == 40 and report["good"] == int((labels["label"] == "good").sum())
    # the refit beat the other maps and the rate on these labels (what is written below)
    assert report["chosen"] == "refit"
    assert list(report["cv_brier_by_candidate"]) == [
        "shipped", "label_free", "refit", "intercept", "rate"
    ]  # fmt: skip
    assert recorded["base_rate"] == pytest.approx(report["good"] / 40, abs=1e-9)
    # the label-free policy's p_good, as its SQL wrote it, is what the labels refit
    free = free_run.merge(labels, on="query_id")
    z, y = logit(free["p_good"].to_numpy()), (free["label"] == "good").to_numpy(float)
    strength = report["prior_strength"]

    def loss(theta: np.ndarray) -> float:
        eta = theta[0] + theta[1] * z
        return float(
            np.sum(np.logaddexp(0, eta) - y * eta)
            + strength / 2 * (theta[0] ** 2 + (theta[1] - 1) ** 2)
        )

    a, b = optimize.minimize(loss, np.array([0.0, 1.0]), method="BFGS", options={"gtol": 1e-10}).x
    b = max(b, 0.0)
    assert [report["map"]["intercept"], report["map"]["slope"]] == pytest.approx([a, b], abs=1e-4)
    # the default's p_good is carried over by quantile as an isotonic map: its breakpoints move
    free_map = label_free[1]["parameters"]["probability"]["isotonic"]
    new_map = yaml.safe_load(out.read_text())["parameters"]["probability"]["isotonic"]
    assert new_map["x"] == free_map["x"]
    y_free = np.asarray(free_map["y"])
    moved = 1 / (1 + np.exp(-(a + b * logit(y_free))))
    expected_y = np.where((y_free <= 0) | (y_free >= 1), y_free, moved) if b > 0 else moved
    np.testing.assert_allclose(new_map["y"], expected_y, atol=1e-4)
    # … and the score SQL interpolates between them as numpy does
    assert (
        invoke(
            "run", "--log", LOG, "--policy", str(out), "--out", str(work / "forty_run")
        ).exit_code
        == 0
    )
    refit = pd.read_parquet(work / "forty_run" / "queries.parquet")
    scores = refit["best_overall_score"].fillna(0.0).to_numpy()
    np.testing.assert_allclose(
        refit["p_good"], np.interp(scores, new_map["x"], new_map["y"]), atol=1e-12
    )
    # the mix the labelled policy makes, and the precision of `high` on the labels
    lines = printed(result)
    for name, count in run_counts(refit).items():
        assert lines[name].split()[0] == str(count)
    rated = refit.merge(labels, on="query_id")
    high = rated[rated["confidence_level"] == "high"]
    good = int((high["label"] == "good").sum())
    assert (
        lines["precision_high"]
        == (
            f"{good / len(high):7.3f}  ({good} good of the {len(high)} labelled queries rated high; "
            "the labels also fitted this policy)"
        ).lstrip()
    )
    assumes = lines["assumes"]
    assert assumes.startswith("the 40 labels are a fair sample of this log's queries")
    assert f"worth {strength:g} labels" in assumes and "label 30" not in assumes


def test_em_on_the_calibrations_own_domain_finds_its_base_rate(work: Path) -> None:
    out = work / "scifact_prior.yaml"
    result = invoke(
        "recalibrate", "--policy", DEFAULT_POLICY, "--log", str(SCIFACT / "retrieval_log.parquet"),
        "--adapt", "prior", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = yaml.safe_load(out.read_text())
    report = document["metadata"]["recalibration"]
    assert list(report) == RECORDED  # --adapt prior records its shift
    assert report["em_base_rate"] == pytest.approx(report["fitted_base_rate"], abs=0.05)
    # the prior moved by Saerens et al.'s logit offset, the thresholds kept (the scale held)
    rate, fitted = report["em_base_rate"], report["fitted_base_rate"]
    assert report["prior_shift"] == pytest.approx(
        np.log(rate / (1 - rate)) - np.log(fitted / (1 - fitted)), abs=1e-9
    )
    shipped = default_document()["parameters"]
    for name in ("T_low", "T_high", "R_hitl"):
        assert document["parameters"][name] == shipped[name]
    assert report["thresholds"]["moved_by_quantile"] is False
    assumes = printed(result)["assumes"]
    assert assumes.startswith(
        "its best scores mean what the calibration's did and only the rate of good answers "
        f"moved, to {100 * report['em_base_rate']:.0f} % (--adapt prior: EM's estimate; the "
        f"calibration's {100 * report['fitted_base_rate']:.0f} %)"
    )
    assert assumes.endswith("label 30 queries to check it (--labels)")


def test_a_recalibrated_policy_recalibrates_again(
    work: Path, label_free: tuple[Result, dict]
) -> None:
    out = work / "again.yaml"
    result = invoke(
        "recalibrate", "--policy", str(work / "free.yaml"), "--log", LOG, "--adapt", "quantile",
        "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    parameters = yaml.safe_load(out.read_text())["parameters"]
    before = label_free[1]["parameters"]
    for name in ("T_low", "T_high", "R_hitl"):  # the same domain again: the thresholds stay
        assert parameters[name] == pytest.approx(before[name], abs=1e-9)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no_map", "overall_v2 has no p_good map to recalibrate"),
        ("no_distribution", "does not record the score distribution it was calibrated on"),
        ("no_overlap", "none of the 3 labelled query ids occurs in --log"),
        ("few_labels", "recalibrating p_good needs at least 10"),
        # CISI's best scores sit below SciFact's: read as a moved rate, no query is good
        ("em_collapses", "--adapt prior: EM's base rate on this log's p_good ran to 0.000"),
        ("em_collapses_labels", "--adapt prior: EM's base rate on this log's p_good ran to 0.000"),
    ],
)
def test_refusals_are_one_line_and_write_nothing(
    case: str, expected: str, tmp_path: Path, cisi_labels: pd.DataFrame
) -> None:
    policy, labels, extra = DEFAULT_POLICY, None, []
    if case == "no_map":
        policy = "overall_v2"
    elif case == "no_distribution":
        document = default_document()
        del document["metadata"]["score_distribution"]
        (tmp_path / "p.yaml").write_text(yaml.safe_dump(document))
        policy = str(tmp_path / "p.yaml")
    elif case.startswith("em_collapses"):
        extra = ["--adapt", "prior"]
        if case.endswith("labels"):
            cisi_labels.to_parquet(tmp_path / "l.parquet")
            labels = str(tmp_path / "l.parquet")
    elif case == "no_overlap":
        pd.DataFrame({"query_id": ["x1", "x2", "x3"], "label": ["good", "bad", "good"]}).to_csv(
            tmp_path / "l.csv", index=False
        )
        labels = str(tmp_path / "l.csv")
    else:
        cisi_labels.head(6).to_parquet(tmp_path / "l.parquet")
        labels = str(tmp_path / "l.parquet")
    args = ["recalibrate", "--policy", policy, "--log", LOG, "--out", str(tmp_path / "new.yaml")]
    result = invoke(*args, *extra, *(["--labels", labels] if labels else []))
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("duckscore: error:") and expected in line
    if case.startswith("em_collapses"):  # why, and what to do instead
        assert "so every query would get p_good 0: its best scores are on another scale" in line
        assert "nothing written — use --adapt auto (the default: it diagnoses the shift" in line
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("new", ".new"))) == []
