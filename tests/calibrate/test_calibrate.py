"""`duckscore calibrate` (issue 4): §9.2 thresholds against numpy quantiles and a brute-force
scan, the grouped AUROC against scikit-learn, the label floors by hand, and the whole command on
SciFact (policy file, reference quantiles against pandas, report, refusals)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, roc_auc_score

from duckscore.calibrate.ablation import candidate_values, choose
from duckscore.calibrate.folds import minimum_labels
from duckscore.calibrate.pipeline import calibrate
from duckscore.calibrate.report import CalibrationReport
from duckscore.calibrate.settings import CalibrationError, CalibrationSettings
from duckscore.cli import cli
from duckscore.core.check import check_sql
from duckscore.core.policy import load_policy
from duckscore.core.render import render
from duckscore.fusion.recipe import load_recipe, plan, recipe_record, recipe_record_from_manifest
from duckscore.scoring.pipeline import score
from duckscore.scoring.policy import SCORE_POLICY

from ..helpers import SCIFACT, documented_keys


def _labelled_scores(seed: int, n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    labels = rng.choice(["good", "ambiguous", "bad"], size=n, p=[0.5, 0.25, 0.25])
    shift = np.select([labels == "good", labels == "bad"], [0.3, -0.2], 0.0)
    scores = np.round(np.clip(rng.normal(0.5, 0.2, n) + shift, 0, 1), 2)  # rounded: ties
    ratios = np.where(rng.random(n) < 0.1, np.nan, rng.random(n))
    return pd.DataFrame(
        {
            "fit": np.where(np.arange(n) % 2 == 0, "a", "b"),
            "query_id": [f"q{i}" for i in range(n)],
            "score": scores,
            "top2_ratio": ratios,
            "label": labels,
        }
    )


def _run(template: str, frame: pd.DataFrame, **context: object) -> pd.DataFrame:
    con = duckdb.connect()
    con.register("predictions", frame)
    rendered = render(f"calibrate/{template}", inputs={"predictions": "predictions"}, **context)
    check_sql(
        rendered,
        {"predictions": {c: str(t) for c, t, *_ in con.execute("DESCRIBE predictions").fetchall()}},
    )
    return con.execute(rendered.text).df()


@pytest.mark.parametrize("seed", range(6))
def test_thresholds_match_numpy_quantiles_and_a_brute_force_scan(seed: int) -> None:
    frame = _labelled_scores(seed)
    target = 0.8
    found = _run(
        "thresholds.sql",
        frame,
        bad_quantile=0.9,
        good_quantile=0.1,
        hitl_quantile=0.6,
        target_precision=target,
        final="thresholds",
    ).set_index("fit")
    for fit, group in frame.groupby("fit"):
        row = found.loc[fit]
        bad, good = group[group.label == "bad"].score, group[group.label == "good"].score
        ratios = group[group.label == "ambiguous"].top2_ratio.dropna()
        assert math.isclose(row.bad_quantile_score, np.quantile(bad, 0.9), abs_tol=1e-12)
        assert math.isclose(row.good_quantile_score, np.quantile(good, 0.1), abs_tol=1e-12)
        assert math.isclose(row.ambiguous_ratio_quantile, np.quantile(ratios, 0.6), abs_tol=1e-12)
        precise = [
            t
            for t in sorted(group.score.unique())
            if (group[group.score >= t].label == "good").mean() >= target
        ]
        expected = min(precise) if precise else None
        assert (
            row.lowest_precise_score if not pd.isna(row.lowest_precise_score) else None
        ) == expected
        assert row.n_good == len(good) and row.n_bad == len(bad)


@pytest.mark.parametrize("seed", range(6))
def test_grouped_auroc_matches_scikit_learn(seed: int) -> None:
    frame = _labelled_scores(seed, 200)
    frame = frame[frame.label != "ambiguous"].assign(
        candidate=lambda f: f.index % 3, outcome=lambda f: (f.label == "good").astype(int)
    )
    found = _run("grouped_auroc.sql", frame, final="aurocs")
    assert len(found) == 6
    for row in found.itertuples():
        group = frame[(frame.fit == row.fit) & (frame.candidate == row.candidate)]
        assert math.isclose(row.auroc, roc_auc_score(group.outcome, group.score), abs_tol=1e-12)


def test_label_floors_by_hand() -> None:
    # 0.9^28 = 0.0523 > 0.05 >= 0.9^29 = 0.0471; 0.7^8 = 0.0576 > 0.05 >= 0.7^9 = 0.0404
    assert minimum_labels(0.9) == minimum_labels(0.1) == 29
    assert minimum_labels(0.7) == minimum_labels(0.3) == 9
    assert minimum_labels(0.5) == 5  # 0.5^4 = 0.0625, 0.5^5 = 0.03125


def test_weight_candidates_keep_the_sum_and_the_strength() -> None:
    tuned = ["alpha", "w1", "w2", "w_separation"]
    state = {"alpha": 1.0, "w1": 0.5, "w2": 0.2, "w_separation": 0.3}
    for name in ("w1", "w2", "w_separation"):
        for change in candidate_values(state, name, tuned):
            merged = state | change
            assert math.isclose(
                merged["w1"] + merged["w2"] + merged["w_separation"], 1.0, abs_tol=1e-9
            )
            assert merged["w1"] > 0
    assert [c["alpha"] for c in candidate_values(state, "alpha", tuned)] == [
        i / 10 for i in range(11)
    ]


def test_a_step_must_earn_its_change() -> None:
    options = [{"alpha": 0.0}, {"alpha": 0.5}, {"alpha": 1.0}]
    assert choose(options, [0.80, 0.9005, 0.9000], "alpha", 1.0) == 2  # within MIN_GAIN: keep
    assert choose(options, [0.80, 0.95, 0.90], "alpha", 1.0) == 1
    assert choose(options, [None, None, None], "alpha", 0.4) == 1


# report.json's keys, in the order docs/calibrate.md lists them (`probability` with a map only)
REPORTED = documented_keys("docs/calibrate.md", "- `report.json` — the same figures")


def test_a_report_without_a_map_records_no_probability() -> None:
    report = CalibrationReport(**{key: {} for key in REPORTED[:-1]})
    assert list(report.as_record()) == REPORTED[:-1]


@pytest.fixture(scope="session")  # session: computed once even if other modules run between
def scifact_labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("labels") / "labels.parquet"
    result = CliRunner().invoke(
        cli,
        [
            "labels",
            "--run",
            str(SCIFACT / "reference_rrf_k60.parquet"),
            "--qrels",
            str(SCIFACT / "qrels.parquet"),
            "--out",
            str(path),
        ],
    )
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="session")
def calibrated(scifact_labels: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("calibrated")
    result = calibrate(
        scifact_labels,
        out / "policy.yaml",
        log=SCIFACT / "retrieval_log.parquet",
        qrels=SCIFACT / "qrels.parquet",
        report_dir=out / "report",
        settings=CalibrationSettings(
            folds=3, passes=1, thresholds="precision", target_precision=0.9, probability="platt"
        ),
    )
    return out, result


@pytest.mark.slow
@pytest.mark.xdist_group("calibrated")  # its fixture computed once, on one worker
def test_calibrated_policy_file_carries_section_9_4(calibrated, scifact_labels: Path) -> None:
    out, _result = calibrated
    document = yaml.safe_load((out / "policy.yaml").read_text(encoding="utf-8"))
    labels = pd.read_parquet(scifact_labels)
    lines = sorted(f"{q}\t{label}\n" for q, label in zip(labels.query_id, labels.label))
    label_hash = hashlib.sha256("".join(lines).encode()).hexdigest()
    policy = load_policy(SCORE_POLICY, str(out / "policy.yaml"))  # a valid, loadable policy
    assert document["parent_version"] == "overall_v2"
    assert document["score_policy_version"] == f"overall_v2_cal_{policy.parameters_sha256[:8]}"
    assert document["metadata"]["label_set_sha256"] == label_hash
    assert document["metadata"]["label_counts"] == {"good": 162, "ambiguous": 79, "bad": 59}
    assert document["metadata"]["labels_not_in_log"] == 0
    assert document["metadata"]["recipe"] == recipe_record(load_recipe("canonical_rrf"))
    validation = document["metadata"]["validation"]
    assert 0.5 < validation["cross_validated"]["good_vs_bad"]["auroc"] <= 1
    assert set(validation["targets"]) == {
        "auroc_good_vs_bad",
        "auroc_best_parent_relevant",
        "precision_high",
        "hitl_rate_at_most",
    }
    p = policy.parameters
    assert (
        p["T_low"] <= p["T_high"]
        and p["R_hitl"] == p["risk_flags"]["ambiguous_candidate"]["ratio_at_least"]
    )


@pytest.mark.slow
@pytest.mark.xdist_group("calibrated")  # its fixture computed once, on one worker
def test_reference_quantiles_match_pandas(calibrated) -> None:
    out, _ = calibrated
    p = load_policy(SCORE_POLICY, str(out / "policy.yaml")).parameters
    reference = pd.read_parquet(
        SCIFACT / "reference_rrf_k60.parquet"
    )  # parent_rrf equals it exactly
    best = reference.groupby("query_id").rrf_score.max()
    lo, hi = p["normalization"]["reference"]["parent_rrf"]
    assert math.isclose(lo, best.quantile(0.0), abs_tol=1e-15)
    assert math.isclose(hi, best.quantile(1.0), abs_tol=1e-15)


@pytest.mark.slow
@pytest.mark.xdist_group("calibrated")  # its fixture computed once, on one worker
def test_calibrated_policy_scores_and_the_report_is_complete(calibrated, tmp_path: Path) -> None:
    out, _result = calibrated
    features = tmp_path / "fused"
    CliRunner().invoke(
        cli,
        [
            "fuse",
            "--log",
            str(SCIFACT / "retrieval_log.parquet"),
            "--recipe",
            "canonical_rrf",
            "--out",
            str(features),
        ],
    )
    # the recipe as the fuse manifest records it (resolved against the log's three sources) is
    # the recipe the policy records (loaded, before the log was read)
    recorded = yaml.safe_load((out / "policy.yaml").read_text(encoding="utf-8"))["metadata"]
    assert recipe_record_from_manifest(features / "parent_features.parquet") == recorded["recipe"]
    scored = score(
        features / "parent_features.parquet", tmp_path / "scored", str(out / "policy.yaml")
    )
    assert scored.queries == 300
    report = out / "report"
    html = (report / "report.html").read_text(encoding="utf-8")
    assert html.count("data:image/png;base64,") == 5 and "§9.3 ablation" in html
    assert "Probability of a good answer" in html
    for name in (
        "score_distributions",
        "reliability",
        "risk_coverage",
        "ablation",
        "probability_reliability",
    ):
        assert (report / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    figures = json.loads((report / "report.json").read_text(encoding="utf-8"))
    assert list(figures) == REPORTED
    assert figures["ablation"][0]["parameter"] == "base"
    assert {"auto_rate", "hitl_rate", "web_fallback_rate"} <= set(
        figures["cross_validated"]["routing"]["all"]
    )


@pytest.mark.slow
@pytest.mark.xdist_group("calibrated")  # its fixture computed once, on one worker
def test_score_distribution_is_the_in_sample_decisions(calibrated) -> None:
    out, result = calibrated
    recorded = yaml.safe_load((out / "policy.yaml").read_text(encoding="utf-8"))["metadata"]
    p = load_policy(SCORE_POLICY, str(out / "policy.yaml")).parameters
    in_sample = result.predictions[result.predictions["fit"] == "all"]
    score = in_sample["best_overall_score"].fillna(0.0)
    expected = {
        "queries": 300,
        "base_rate": (in_sample["label"] == "good").mean(),
        "below_T_low": (score < p["T_low"]).mean(),
        "below_T_high": (score < p["T_high"]).mean(),
        "hitl": (in_sample["top2_ratio"].fillna(-1.0) >= p["R_hitl"]).mean(),
    }
    quantiles = recorded["score_distribution"].pop("best_score_quantiles")
    ratio_quantiles = recorded["score_distribution"].pop("top2_ratio_quantiles")
    # the file's figures are at the written precision (FITTED_DIGITS significant digits)
    assert recorded["score_distribution"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    # the ratio of a query without two candidates counts as 0, as the recalibration reads it
    ratio = in_sample["top2_ratio"].fillna(0.0)
    for values, recorded_quantiles in ((score, quantiles), (ratio, ratio_quantiles)):
        ranked = np.sort(values.to_numpy())  # continuous quantiles: rank (n - 1)·q, interpolated
        for level, value in zip([k / 100 for k in range(101)], recorded_quantiles, strict=True):
            position = (len(ranked) - 1) * level
            low, high = int(np.floor(position)), int(np.ceil(position))
            interpolated = ranked[low] + (ranked[high] - ranked[low]) * (position - low)
            assert value == pytest.approx(interpolated, rel=1e-9, abs=1e-12)
    assert 0 < expected["below_T_low"] <= expected["below_T_high"] < 1 and 0 < expected["hitl"] < 1


def _calibrated_version(tmp_path: Path, name: str, **settings: object) -> str:
    features, labels = _overlapping(lead={"good": 0.002, "ambiguous": 0.001})
    fast = {"folds": 2, "passes": 1, "thresholds": "precision", "target_precision": 0.8}
    result = calibrate(
        labels,
        tmp_path / name,
        features=features,
        settings=CalibrationSettings(**(fast | settings)),  # type: ignore[arg-type]
    )
    version = result.document["score_policy_version"]
    digest = load_policy(SCORE_POLICY, str(tmp_path / name)).parameters_sha256
    assert version == f"overall_v2_cal_{digest[:8]}"
    return str(version)


@pytest.mark.extended  # 38 s: make test's 15 minutes (docs/testing.md)
def test_versions_tell_calibrations_apart(tmp_path: Path) -> None:
    """The default version is the sha256 of the final parameters: it was the label-set hash, the
    same for every setting."""
    versions = [
        _calibrated_version(tmp_path, "a.yaml"),
        _calibrated_version(tmp_path, "b.yaml", target_precision=0.9),
        _calibrated_version(tmp_path, "c.yaml", levels="probability"),
        _calibrated_version(tmp_path, "d.yaml"),
    ]
    assert len(set(versions[:3])) == 3 and versions[3] == versions[0]


def test_features_beside_a_fuse_manifest_record_its_recipe(tmp_path: Path) -> None:
    """fuse's manifest holds the recipe resolved against the log's sources; the policy records it
    as the recipe loaded (its sources undiscovered) would be recorded. No manifest, no record."""
    features, labels = _overlapping(lead={"good": 0.002, "ambiguous": 0.001})
    fast = CalibrationSettings(folds=2, passes=1, thresholds="precision", target_precision=0.8)
    loaded = load_recipe("canonical_rrf", ["fusion.k=20"])
    resolved = plan(loaded, ["dense", "sparse"], has_rank=False).recipe.policy
    assert resolved.parameters_sha256 != loaded.policy.parameters_sha256
    for folder, manifest in (
        ("with", {"command": "fuse", "policy": resolved.as_record()}),
        ("without", None),
    ):
        (tmp_path / folder).mkdir()
        features.to_parquet(tmp_path / folder / "parent_features.parquet")
        if manifest is not None:
            (tmp_path / folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    recorded = [
        calibrate(
            labels,
            tmp_path / f"{folder}.yaml",
            features=str(tmp_path / folder / "parent_features.parquet"),
            settings=fast,
        ).document["metadata"]
        for folder in ("with", "without")
    ]
    assert recorded[0]["recipe"] == {
        "recipe_id": loaded.version,  # canonical_rrf+<8 hex of the override>
        "parameters_sha256": loaded.policy.parameters_sha256,
        "source": loaded.source,
    }
    assert "recipe" not in recorded[1]


def _overlapping(
    n_per_class: int = 30, lead: dict[str, float] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three candidate parents per query; `lead` raises the parent_rrf of a label's queries."""
    rows, labels = [], []
    for i, label in enumerate(["good"] * n_per_class + ["bad"] * n_per_class + ["ambiguous"] * 10):
        shift = (lead or {}).get(label, 0.0)
        for j in range(3):
            rows.append(
                {
                    "query_id": f"q{i}",
                    "parent_id": f"p{j}",
                    "rrf_sum": 0.03 - 0.005 * j,
                    "max_score": 1.0 - 0.1 * j,
                    "coverage": 2,
                    "total_chunks": 4,
                    "coverage_ratio": 0.5,
                    "parent_rrf": 0.03 + shift + 0.0001 * (i % 7) - 0.004 * j,
                    "source_agreement": 0.5,
                    "score_lead": 0.1,
                }
            )
        labels.append({"query_id": f"q{i}", "label": label})
    return pd.DataFrame(rows), pd.DataFrame(labels)


def test_quantile_thresholds_refuse_when_classes_overlap(tmp_path: Path) -> None:
    features, labels = _overlapping()  # parent_rrf varies alike in both classes
    with pytest.raises(
        CalibrationError, match=r"T_low = P90 of bad .* is not below T_high = P10 of good"
    ):
        calibrate(
            labels,
            tmp_path / "p.yaml",
            features=features,
            settings=CalibrationSettings(folds=2, passes=1),
        )
    assert not (tmp_path / "p.yaml").exists()


def test_too_few_labels_refuse_with_the_count(tmp_path: Path) -> None:
    features, labels = _overlapping(n_per_class=20)
    with pytest.raises(
        CalibrationError, match="needs at least 29 `bad` queries; you have 20: label at least 9"
    ):
        calibrate(labels, tmp_path / "p.yaml", features=features)


def test_more_folds_than_labels_of_a_class_refuse_at_once(tmp_path: Path) -> None:
    features, labels = _overlapping()  # 30 good, 30 bad, 10 ambiguous
    with pytest.raises(
        CalibrationError,
        match="--folds 11: more folds than the 10 `ambiguous` queries; use --folds 10",
    ):
        calibrate(
            labels, tmp_path / "p.yaml", features=features, settings=CalibrationSettings(folds=11)
        )
    assert not (tmp_path / "p.yaml").exists()


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    features, labels = _overlapping()
    labels.loc[3, "label"] = "great"
    features.to_parquet(tmp_path / "f.parquet")
    labels.to_parquet(tmp_path / "l.parquet")
    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--features",
            str(tmp_path / "f.parquet"),
            "--labels",
            str(tmp_path / "l.parquet"),
            "--out",
            str(tmp_path / "p.yaml"),
        ],
    )
    assert result.exit_code == 2
    assert (
        "query_id='q3'): column 'label' is 'great', expected good, ambiguous or bad"
        in result.output
    )
    assert not (tmp_path / "p.yaml").exists()


def test_missing_evidence_column_is_named_with_the_file(tmp_path: Path) -> None:
    features, labels = _overlapping()
    features.drop(columns=["parent_rrf"]).to_parquet(tmp_path / "f.parquet")
    labels.to_parquet(tmp_path / "l.parquet")
    result = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--features",
            str(tmp_path / "f.parquet"),
            "--labels",
            str(tmp_path / "l.parquet"),
            "--out",
            str(tmp_path / "p.yaml"),
        ],
    )
    assert result.exit_code == 2
    assert (
        f"--features ({tmp_path / 'f.parquet'}): policy overall_v2 needs column 'parent_rrf' (missing, or null in 210 rows)"
        in result.output
    )
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "p.yaml").exists()


def test_features_or_log_exactly_one(tmp_path: Path) -> None:
    _, labels = _overlapping()
    with pytest.raises(Exception, match="give exactly one of --features or --log"):
        calibrate(labels, tmp_path / "p.yaml")


def test_score_with_overall_v2_names_a_missing_evidence_column(tmp_path: Path) -> None:
    from duckscore.core.errors import InputError

    features, _ = _overlapping()
    with pytest.raises(
        InputError,
        match=r"policy overall_v2 needs column 'score_lead' \(missing, or null in 210 rows\)",
    ):
        score(features.drop(columns=["score_lead"]), tmp_path / "out", "overall_v2")
    assert not (tmp_path / "out").exists()


class _BestScore(ClassifierMixin, BaseEstimator):
    """A classifier whose decision function is its first feature: the calibrated best score."""

    def fit(self, x: np.ndarray, y: np.ndarray) -> _BestScore:
        self.classes_ = np.array([0, 1])
        return self

    def decision_function(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x)[:, 0]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return (self.decision_function(x) >= 0.5).astype(int)


def _sklearn_p_good(method: str, features: list[str], train: pd.DataFrame, test: pd.DataFrame):
    """scikit-learn's probability for the held-out queries, fitted on the training decisions."""
    x_train, x_test = (f[features].fillna(0.0).to_numpy() for f in (train, test))
    y = (train["label"] == "good").to_numpy(dtype=int)
    if features == ["best_overall_score"]:
        frozen = FrozenEstimator(_BestScore().fit(x_train, y))
        calibrated = CalibratedClassifierCV(frozen, method=method).fit(x_train, y)
        return calibrated.predict_proba(x_test)[:, 1]
    # Platt on two features: logistic regression on Platt's targets as sample weights
    positives, negatives = y.sum(), len(y) - y.sum()
    target = np.where(y == 1, (positives + 1) / (positives + 2), 1 / (negatives + 2))
    model = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(
        np.vstack([x_train, x_train]),
        np.r_[np.ones(len(y)), np.zeros(len(y))],
        sample_weight=np.r_[target, 1 - target],
    )
    return model.predict_proba(x_test)[:, 1]


def _ece(p: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    k = np.minimum(np.floor(p * bins), bins - 1)
    return sum(abs(y[k == b].sum() - p[k == b].sum()) for b in range(bins)) / len(p)


@pytest.mark.slow
@pytest.mark.xdist_group("calibrated")  # its fixture computed once, on one worker
def test_p_good_equals_scikit_learn_on_the_same_folds(calibrated) -> None:
    """Issue 24: each fold's map fitted by scikit-learn (CalibratedClassifierCV, or logistic
    regression when the top-2 ratio joined) on the same training decisions gives the held-out
    p_good the score SQL computed; the report's Brier and ECE are those of scikit-learn's."""
    out, result = calibrated
    report = json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    probability = report["probability"]
    assert probability["method"] == "platt"
    held_out = result.predictions[result.predictions["fit"] != "all"]
    training = result.probability_training
    oracle = []
    for fit, test in held_out.groupby("fit"):
        train = training[training["fit"] == fit]
        assert set(train.query_id).isdisjoint(test.query_id)
        expected = _sklearn_p_good("sigmoid", probability["features"], train, test)
        np.testing.assert_allclose(test["p_good"], expected, atol=1e-6)
        oracle.append((expected, (test["label"] == "good").to_numpy(dtype=float)))
    p, y = (np.concatenate(parts) for parts in zip(*oracle))
    cv = probability["cross_validated"]
    assert math.isclose(cv["brier"], brier_score_loss(y, p), abs_tol=1e-6)
    assert math.isclose(cv["ece"], _ece(p, y), abs_tol=1e-6)
    base_rate = np.concatenate(
        [
            np.full(len(test), (training[training.fit == fit].label == "good").mean())
            for fit, test in held_out.groupby("fit")
        ]
    )
    assert math.isclose(
        probability["cross_validated_base_rate_brier"], brier_score_loss(y, base_rate), rel_tol=1e-9
    )
    assert cv["brier"] < probability["cross_validated_base_rate_brier"]
    floor = probability["ece_of_perfect_calibration"]
    assert 0 < floor["ece_mean"] < floor["ece_p95"] and floor["simulations"] == 1000
    # the policy file's own map scores every query as its in-sample fit says
    policy = load_policy(SCORE_POLICY, str(out / "policy.yaml"))
    in_sample = result.predictions[result.predictions["fit"] == "all"]
    expected = _sklearn_p_good(
        "sigmoid", probability["features"], training[training.fit == "all"], in_sample
    )
    np.testing.assert_allclose(in_sample["p_good"], expected, atol=1e-6)
    assert policy.parameters["probability"]["method"] == "platt"


def test_isotonic_map_equals_scikit_learn() -> None:
    """fit_isotonic's breakpoints interpolate to IsotonicRegression's predictions (ties pooled,
    clipped beyond the ends), and CalibratedClassifierCV's isotonic method, on random scores."""
    from duckscore.calibrate.probability import Variant, apply_map, fit_map

    rng = np.random.default_rng(7)
    for n in (2, 15, 300):
        train = pd.DataFrame({"best_overall_score": np.round(rng.random(n), 2)})
        train["label"] = np.where(rng.random(n) < train.best_overall_score, "good", "bad")
        grid = pd.DataFrame({"best_overall_score": np.linspace(-0.2, 1.2, 701)})
        block = fit_map(Variant("isotonic", ("best_overall_score",)), train)
        y = (train.label == "good").to_numpy(dtype=int)
        regression = IsotonicRegression(out_of_bounds="clip").fit(train.best_overall_score, y)
        np.testing.assert_allclose(
            apply_map(block, grid), regression.predict(grid.best_overall_score), atol=1e-12
        )
        if n >= 15:  # CalibratedClassifierCV splits 5 ways (a frozen estimator: no effect)
            expected = _sklearn_p_good("isotonic", ["best_overall_score"], train, grid)
            np.testing.assert_allclose(apply_map(block, grid), expected, atol=1e-12)
