"""The demo's second screen (issue 24): what calibration buys. SciFact's labelled queries are
split in two halves (stratified by label, seeded); a policy calibrated on one half is judged
beside the seed's overall_v1 on the other, on queries it never saw."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..calibrate.calibration_metrics import frame_metrics
from ..calibrate.folds import assign_folds
from ..calibrate.pipeline import calibrate
from ..calibrate.probability_report import ece_consistency
from ..calibrate.report import evaluate_decisions
from ..calibrate.settings import CalibrationSettings
from ..core.connection import EngineSettings
from ..core.reporting import module_logger, silenced
from ..core.session import Session
from ..metrics.labels import make_labels
from ..scoring.pipeline import score

logger = module_logger(__name__)

SPLIT_SEED = 0
# the calibration the demo runs: two folds and one ablation pass keep it to seconds
DEMO_CALIBRATION = CalibrationSettings(folds=2, passes=1, thresholds="precision")
POLICY_FILE = "calibrated_policy.yaml"
SCORES_DIR = "calibrated"
SEED_DIR = "seed"  # the seed's reference policy, overall_v1, on the same features
SEED_POLICY = "overall_v1"


def calibration_screen(out_dir: Path, qrels: Path, settings: EngineSettings | None) -> list[str]:
    """Calibrate on one half of the demo's labelled queries, score every query with the new
    policy into `out_dir`/calibrated/ and with the seed's overall_v1 into `out_dir`/seed/, and
    compare the two on the other half."""
    with silenced():  # the demo's own steps say what it does, not those of the work inside
        labelled = make_labels(out_dir / "fused.parquet", qrels, settings=settings)
    labels = labelled[["query_id", "label"]]
    half = labels["query_id"].map(assign_folds(labels, 2, SPLIT_SEED))
    learn, judge = labels[half == 0], labels[half == 1]
    logger.info(f"calibrating overall_v2 on {len(learn)} labelled queries")
    features = out_dir / "parent_features.parquet"
    result = calibrate(
        learn,
        out_dir / POLICY_FILE,
        features=features,
        settings=DEMO_CALIBRATION,
        engine=settings,
    )
    with silenced():
        calibrated = score(
            features, out_dir / SCORES_DIR, str(result.policy_path), settings=settings
        )
        score(features, out_dir / SEED_DIR, SEED_POLICY, settings=settings)
    seed_policy = _judged(out_dir / SEED_DIR / "queries.parquet", judge)
    new_policy = _judged(out_dir / SCORES_DIR / "queries.parquet", judge)
    with Session(settings) as session:
        before = evaluate_decisions(session, seed_policy, has_qrels=False, bootstrap=0)
        after = evaluate_decisions(session, new_policy, has_qrels=False, bootstrap=0)
        ece = _p_good_ece(session, new_policy)
        floor = ece_consistency(session, new_policy, SPLIT_SEED)["ece_mean"]
    return _table(len(learn), len(judge), calibrated.policy.version, before, after, (ece, floor))


def _judged(queries_parquet: Path, judge: pd.DataFrame) -> pd.DataFrame:
    decisions = pd.read_parquet(queries_parquet)
    return decisions.merge(judge, on="query_id").assign(fit="judged")


def _p_good_ece(session: Session, decisions: pd.DataFrame) -> float:
    frame = decisions.assign(
        score=decisions["p_good"], outcome=(decisions["label"] == "good").astype(int)
    )
    return float(frame_metrics(session, frame)["ece"])


def _table(
    learned: int,
    judged: int,
    version: str,
    before: dict[str, Any],
    after: dict[str, Any],
    ece: tuple[float, float],
) -> list[str]:
    def high_precision(figures: dict[str, Any]) -> str:
        high = [row for row in figures["good_vs_rest"]["levels"] or [] if row["level"] == "high"]
        return f"{high[0]['precision']:.1%} of {high[0]['n']}" if high else "no high"

    def routing(figures: dict[str, Any]) -> str:
        r = figures["routing"]["all"]
        shares = (r["auto_rate"], r["hitl_rate"], r["web_fallback_rate"])
        return " / ".join(f"{share:.0%}" for share in shares)

    rows = [
        ("AUROC good vs bad", *(f"{f['good_vs_bad']['auroc']:.3f}" for f in (before, after))),
        ("precision of high", *(high_precision(f) for f in (before, after))),
        ("HITL rate", *(f"{f['routing']['all']['hitl_rate']:.1%}" for f in (before, after))),
        ("auto / HITL / web", *(routing(f) for f in (before, after))),
        ("ECE of p_good", "–", f"{ece[0]:.3f}"),
    ]
    return [
        f"What calibration buys: overall_v2 calibrated on {learned} labelled queries ({version}),",
        f"judged beside overall_v1 on the other {judged}:",
        "",
        f"{'':<20}{'overall_v1':>18}{'calibrated':>18}",
        *(f"{name:<20}{left:>18}{right:>18}" for name, left, right in rows),
        f"(on {judged} queries, sampling alone gives a perfectly calibrated p_good an ECE of "
        f"{ece[1]:.3f})",
    ]
