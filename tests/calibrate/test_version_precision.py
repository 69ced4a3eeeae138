"""A calibrated version is named after its parameters at the precision the policy file writes
them (issue 47's blocker): a fit's last bits are the BLAS's and the processor's, so a version
hashed from them was another name on another machine (overall_v2_cal_17c2cf6a here,
overall_v2_cal_c79917ca on a fresh one, every printed number equal)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from duckscore.calibrate import recalibration
from duckscore.calibrate.adaptation import transported
from duckscore.calibrate.pipeline import calibrate
from duckscore.calibrate.probability import fit_beta, fit_isotonic
from duckscore.calibrate.recalibrate import recalibrate
from duckscore.calibrate.settings import CalibrationSettings
from duckscore.cli import cli
from duckscore.core.policy import (
    FITTED_DIGITS,
    at_written_precision,
    dump_yaml,
    load_policy,
    load_yaml,
)
from duckscore.scoring.policy import SCORE_POLICY

from ..helpers import FIXTURES, SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
SETTINGS = CalibrationSettings(
    folds=2, passes=1, thresholds="precision", target_precision=0.9, probability="beta"
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (-8.950914181638932, -8.950914182),
        (-8.95091418163893, -8.950914182),
        (0.8202142090387966, 0.820214209),
        (0.30000000000000004, 0.3),
        (1.0e-09, 1.0e-09),
        (123456789012.5, 123456789000.0),
        (0.7, 0.7),
        (2, 2),
        (True, True),
        (None, None),
        ("0.30000000000000004", "0.30000000000000004"),
        ({"a": [0.1 + 0.2, {"b": (1 / 3,)}]}, {"a": [0.3, {"b": (0.3333333333,)}]}),
    ],
)
def test_numbers_at_the_written_precision(value: Any, expected: Any) -> None:
    assert at_written_precision(value) == expected
    assert at_written_precision(expected) == expected  # idempotent


@pytest.mark.parametrize("special", [math.inf, -math.inf])
def test_infinities_are_kept(special: float) -> None:
    assert at_written_precision([special]) == [special]
    assert math.isnan(at_written_precision(math.nan))


def test_the_file_gives_the_rounded_numbers_back_exactly() -> None:
    rng = np.random.default_rng(0)
    values = at_written_precision([float(v) for v in rng.normal(0, 10, 500)])
    assert load_yaml(dump_yaml({"v": values}))["v"] == values
    assert all(len(repr(v).lstrip("-").replace(".", "").lstrip("0")) <= FITTED_DIGITS + 4
               for v in values)  # fmt: skip


def _perturbed_lstsq(ulps: int):  # type: ignore[no-untyped-def]
    """np.linalg.lstsq whose solution is `ulps` units in the last place off: what another
    OpenBLAS kernel gives."""
    exact = np.linalg.lstsq

    def lstsq(*args: Any, **kwargs: Any) -> Any:
        solution, *rest = exact(*args, **kwargs)
        return (solution * (1 + ulps * np.finfo(float).eps), *rest)

    return lstsq


def _version(path: Path) -> str:
    return str(yaml.safe_load(path.read_text(encoding="utf-8"))["score_policy_version"])


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("labels") / "labels.parquet"
    result = CliRunner().invoke(
        cli,
        ["-q", "labels", "--run", str(SCIFACT / "reference_rrf_k60.parquet"), "--qrels",
         str(SCIFACT / "qrels.parquet"), "--out", str(path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.slow
def test_a_fit_off_in_its_last_bits_names_the_same_version(
    labels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    score = np.linspace(0.05, 0.95, 40)
    outcome = (np.arange(40) % 3 != 0).astype(float)
    exact = fit_beta(score, outcome)
    monkeypatch.setattr(np.linalg, "lstsq", _perturbed_lstsq(6))
    assert fit_beta(score, outcome) != exact  # the perturbation reaches the fitted numbers
    monkeypatch.undo()

    calibrate(labels, tmp_path / "exact.yaml", log=LOG, settings=SETTINGS)
    monkeypatch.setattr(np.linalg, "lstsq", _perturbed_lstsq(6))
    calibrate(labels, tmp_path / "off.yaml", log=LOG, settings=SETTINGS)
    assert _version(tmp_path / "exact.yaml") == _version(tmp_path / "off.yaml")
    written = load_policy(SCORE_POLICY, str(tmp_path / "off.yaml"))
    assert written.version.endswith(f"_cal_{written.parameters_sha256[:8]}")


@pytest.mark.slow
def test_a_recalibration_off_in_its_last_bits_names_the_same_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cisi = FIXTURES / "cisi"
    labels = tmp_path / "labels.parquet"
    judged = pd.read_parquet(cisi / "qrels.parquet")["query_id"].astype(str).unique()[:40]
    pd.DataFrame(
        {"query_id": judged, "label": ["good" if i % 3 else "bad" for i in range(len(judged))]}
    ).to_parquet(labels)
    log = cisi / "retrieval_log.parquet"
    recalibrate("overall_v3", log, tmp_path / "exact.yaml", labels=labels)
    exact_fit = recalibration.fit_logit_map

    def fit_off(*args: Any, **kwargs: Any) -> recalibration.LogitMap:
        fitted = exact_fit(*args, **kwargs)
        off = 1 + 6 * np.finfo(float).eps  # what another machine's BLAS and exp give
        return recalibration.LogitMap(fitted.intercept * off, fitted.slope * off)

    monkeypatch.setattr(recalibration, "fit_logit_map", fit_off)
    recalibrate("overall_v3", log, tmp_path / "off.yaml", labels=labels)
    assert _version(tmp_path / "exact.yaml") == _version(tmp_path / "off.yaml")
    written = load_policy(SCORE_POLICY, str(tmp_path / "off.yaml"))
    assert written.version.endswith(f"_recal_{written.parameters_sha256[:8]}")


@pytest.mark.slow
@pytest.mark.extended  # three calibrations in subprocesses: a minute; the perturbed fits above stay
def test_every_openblas_kernel_names_the_same_version(labels: Path, tmp_path: Path) -> None:
    """OpenBLAS picks its kernels by processor (OPENBLAS_CORETYPE forces one): on this
    workplace's machines the beta map's coefficients differed in their last digits from kernel
    to kernel, and with them the version."""
    versions = {}
    for kernel in ("Prescott", "Nehalem", "Haswell"):
        out = tmp_path / f"{kernel}.yaml"
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
        done = subprocess.run(
            [sys.executable, "-m", "duckscore", "-q", "calibrate", "--log", str(LOG), "--labels",
             str(labels), "--folds", "2", "--passes", "1", "--thresholds", "precision",
             "--target-precision", "0.9", "--probability", "beta", "--out",
             str(out)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        versions[kernel] = _version(out)
    assert len(set(versions.values())) == 1, versions


def test_isotonic_breakpoints_stay_distinct_at_the_written_precision() -> None:
    """Two scores one rounding apart are one breakpoint: written as two, the file held one x
    twice and the policy it named was refused on loading (a rank-only log's recalibration)."""
    close = [0.92043542361, 0.92043542364, 0.5]
    xs, ys = fit_isotonic(np.array(close), np.array([0.0, 1.0, 0.0]))
    assert (xs, ys) == ([0.5, 0.9204354236], [0.0, 0.5])
    block = {"method": "isotonic", "isotonic": {"x": [0.0, 1.0], "y": [0.0, 1.0]},
             "levels_by": "p_good", "p_low": 0.4, "p_high": 0.8}  # fmt: skip
    mapped = transported(block, [0.1, 0.2, 0.3], [0.5, 0.92043542361, 0.92043542364])
    x = mapped["isotonic"]["x"]
    assert x == at_written_precision(x) == [0.5, 0.9204354236]
