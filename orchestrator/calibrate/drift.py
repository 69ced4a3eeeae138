"""`duckscore drift`: does a calibrated policy still fit the log it scores (issue 51)?

A scored run's best scores (queries.parquet) are compared with the calibration's recorded
distribution (calibrate/shift.py's diagnosis), beside the shipped map's mean p_good on the run
and the calibration's rate, and choose() says what a label-free recalibration would do: nothing,
a recalibration, or 30 labels. The run's policy is loaded again as the manifest records it (a
packaged name, or the file's path; its overrides) and must hash to the parameters the run used.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.errors import InputError
from ..core.session import Session
from ..core.tables import Column, TableContract
from ..scoring.policy_view import ScorePolicy, load_score_policy
from ..scoring.scale import QUANTILES_KEY, recalibrate_command
from .adaptation import diagnosis_of
from .settings import CalibrationError
from .shift import Choice, Diagnosis, choose

PACKAGED = "score policy "  # how a manifest names a packaged policy's source
LABELS_TO_SETTLE = 30

SCORED_QUERIES = TableContract(
    name="scored_queries",
    columns=(
        Column("query_id", "id"),
        Column("best_overall_score", "number", nullable=True),
        Column("top2_ratio", "number", nullable=True),
        Column("p_good", "number", min=0, max=1, nullable=True),
    ),
    key=("query_id",),
)


@dataclass(frozen=True)
class Calibration:
    """A calibrated policy's p_good map and the score distribution it was calibrated on."""

    block: dict[str, Any]  # the probability block
    recorded: dict[str, Any]  # metadata.score_distribution


def calibration_of(policy: ScorePolicy, option: str = "--policy") -> Calibration:
    """What a log is compared with — refused, in one line, for a policy without a p_good map or
    without the record of its calibration's best scores."""
    if policy.probability is None:
        raise CalibrationError(
            f"{option}: {policy.version} has no p_good map, so no calibration to compare a log "
            "with (`duckscore calibrate` fits one)"
        )
    found = policy.policy.metadata.get("score_distribution")
    recorded: dict[str, Any] = found if isinstance(found, dict) else {}
    if not (
        isinstance(recorded.get(QUANTILES_KEY), list)
        and isinstance(recorded.get("queries"), int)
        and isinstance(recorded.get("base_rate"), int | float)
    ):
        raise CalibrationError(
            f"{option}: {policy.version} does not record the score distribution it was "
            f"calibrated on (metadata.score_distribution: queries, base_rate, {QUANTILES_KEY}); "
            "calibrate it again with this duckscore"
        )
    return Calibration(policy.probability.block.thawed(), recorded)


@dataclass(frozen=True)
class Drift:
    """What `duckscore drift` found on a scored log."""

    policy: str  # the policy's version
    log: str | None  # the log the run scored, as given to it
    diagnosis: Diagnosis
    choice: Choice
    p_good_mean: float  # the shipped map's mean p_good on the log
    calibration_rate: float  # metadata.score_distribution.base_rate
    advice: str

    @property
    def shifted(self) -> bool:
        return self.diagnosis.shift != "none"

    def as_record(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "log": self.log,
            "shift": self.diagnosis.shift,
            "shifted": self.shifted,
            "diagnosis": self.diagnosis.as_record(),
            "p_good_mean": self.p_good_mean,
            "calibration_rate": self.calibration_rate,
            "adapt": self.choice.adapt,
            "reason": self.choice.reason,
            "advice": self.advice,
        }


def drift(
    policy: ScorePolicy, calibration: Calibration, queries: pd.DataFrame, log: str | None
) -> Drift:
    """The diagnosis of a log's decisions (`queries`: best_overall_score, top2_ratio, p_good)
    under the calibrated `policy` (its calibration_of), and what to do about it."""
    found = diagnosis_of(calibration.block, calibration.recorded, queries)
    assert found is not None  # calibration_of checked the recorded quantiles
    p_good_mean = float(queries["p_good"].mean())
    choice = choose(found, p_good_mean)
    return Drift(
        policy=policy.version,
        log=log,
        diagnosis=found,
        choice=choice,
        p_good_mean=p_good_mean,
        calibration_rate=float(calibration.recorded["base_rate"]),
        advice=_advice(found, choice, policy, log),
    )


def _advice(diagnosis: Diagnosis, choice: Choice, policy: ScorePolicy, log: str | None) -> str:
    if diagnosis.shift == "none":
        return "nothing to do: the policy fits this log"
    if choice.adapt != "keep":
        return f"run `{recalibrate_command(policy, log, f'--adapt {choice.adapt}')}`"
    return (
        f"label {LABELS_TO_SETTLE} of the log's queries (query_id, label), then run "
        f"`{recalibrate_command(policy, log, '--labels labels.parquet')}`"
    )


def drift_of_run(run: Path, policy: str | None = None) -> Drift:
    """`drift` of a `duckscore run` or `score` output folder, its policy reloaded as its
    manifest records it (`policy`: the file to read instead, when it has moved)."""
    manifest = _manifest(run)
    record = _score_record(manifest, run)
    loaded = _reload(record, policy, run)
    calibration = calibration_of(loaded, f"--run {run}")
    with Session() as session:
        session.open("queries", SCORED_QUERIES, run / "queries.parquet", "--run")
        queries = session.frame("SELECT * FROM scored_queries ORDER BY query_id")
    return drift(
        loaded, calibration, queries, manifest.get("inputs", {}).get("log", {}).get("given")
    )


def _manifest(run: Path) -> dict[str, Any]:
    path = run / "manifest.json"
    if not path.is_file():
        raise InputError(f"--run {run}: no manifest.json (the output folder of `duckscore run`)")
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(found, dict):
        raise InputError(f"{path}: not a JSON object")
    return found


def _score_record(manifest: dict[str, Any], run: Path) -> dict[str, Any]:
    """The manifest's score policy record: `run` records it as score_policy, `score` as policy."""
    for key in ("score_policy", "policy"):
        record = manifest.get(key)
        if isinstance(record, dict) and record.get("capability") == "score":
            return record
    raise InputError(f"{run / 'manifest.json'}: no score policy recorded (not a scored run)")


def _reload(record: dict[str, Any], given: str | None, run: Path) -> ScorePolicy:
    """The run's policy loaded again: `given`, or where the manifest says it was read from,
    with its overrides; refused unless its parameters are the run's."""
    source = str(record.get("source", ""))
    where = given or (source.removeprefix(PACKAGED) if source.startswith(PACKAGED) else source)
    overrides = [f"{k}={json.dumps(v)}" for k, v in (record.get("overrides") or {}).items()]
    if given is None and not source.startswith(PACKAGED) and not Path(source).is_file():
        raise InputError(
            f"--run {run}: the policy file the run was scored with, {source}, is not found "
            "from here; name it with --policy"
        )
    loaded = load_score_policy(where, overrides)
    if loaded.parameters_sha256 != record.get("parameters_sha256"):
        raise InputError(
            f"--run {run}: {shlex.quote(where)} is not the policy the run was scored with "
            f"(its parameters_sha256 differs from the manifest's); name that one with --policy"
        )
    return loaded
