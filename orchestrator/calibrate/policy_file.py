"""§9.4: the calibrated policy file. It carries its version, parent version, every parameter,
the label-set hash, the per-class counts, the fusion recipe when known, its validation metrics
and its in-sample score distribution."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.outputs import atomic_output_file
from ..core.policy import at_written_precision, dump_yaml
from ..core.tables import OpenedInput
from ..core.version import __version__
from ..scoring.policy_view import ScorePolicy
from .report import CalibrationReport
from .settings import CalibrationSettings


def write_policy(
    out: Path,
    version: str,
    base: ScorePolicy,
    parameters: dict[str, Any],
    label_hash: str,
    counts: dict[str, int],
    settings: CalibrationSettings,
    tuned: list[str],
    report: CalibrationReport,
    inputs: Mapping[str, OpenedInput],
    provenance: dict[str, Any],
    distribution: dict[str, Any],
) -> dict[str, Any]:
    """§9.4: the new policy carries its version, parent version, every parameter, the label-set
    hash, the per-class counts and its validation metrics; `provenance` (labels_not_in_log and,
    when known, the fusion recipe) follows the counts, and `distribution` (the in-sample
    score_distribution) closes the metadata."""
    cv = report.cross_validated
    summary = {
        name: _summary(figures)
        for name, figures in cv.items()
        if isinstance(figures, dict) and "auroc" in figures
    }
    document = {
        "score_policy_version": version,
        "parent_version": base.version,
        "description": f"Calibrated from {base.version} on {sum(counts.values())} labelled queries "
        f"(duckscore calibrate, §9).",
        "metadata": {
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "duckscore_version": __version__,
            "label_set_sha256": label_hash,
            "label_counts": counts,
            **provenance,
            "inputs": {name: opened.given for name, opened in inputs.items()},
            "method": report.settings | {"tuned": tuned},
            "validation": {
                "cross_validated": summary,
                "routing": cv["routing"]["all"],
                "targets": report.targets,
            }
            | _probability_summary(report.probability),
            "score_distribution": distribution,
        },
        "parameters": parameters,
    }
    base_file = {"--base": base.source} if Path(base.source).is_file() else {}
    return write_policy_document(out, document, {**inputs, **base_file})


def write_policy_document(
    out: Path, document: dict[str, Any], inputs: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The policy file `out`, its floats at the written precision (at_written_precision, as its
    version was named), replaced atomically: nothing half-written. It never replaces, nor is,
    one of `inputs` (option -> given, or OpenedInput; by default the inputs the document
    records, `--<name>`: what it was made from), and a name that says another format than YAML
    is refused (docs/outputs.md)."""
    if inputs is None:
        recorded = document.get("metadata", {}).get("inputs", {})
        inputs = {f"--{name}": given for name, given in recorded.items()}
    document = at_written_precision(document)
    with atomic_output_file(out, "--out", inputs, "yaml") as staging:
        staging.write_text(dump_yaml(document), encoding="utf-8")
    return document


def _probability_summary(probability: dict[str, Any] | None) -> dict[str, Any]:
    if probability is None:
        return {}
    cv = probability["cross_validated"]
    return {
        "probability": {
            "method": probability["method"],
            "features": probability["features"],
            "outcome": probability["outcome"],
            "cross_validated": {k: cv[k] for k in ("n", "brier", "ece", "auroc")},
            "cross_validated_base_rate_brier": probability["cross_validated_base_rate_brier"],
            "ece_of_perfect_calibration": probability["ece_of_perfect_calibration"],
            "targets": probability["targets"],
        }
    }


def _summary(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "n": figures["n"],
        "auroc": figures["auroc"],
        "auroc_ci_95": [figures["auroc_ci"]["lower"], figures["auroc_ci"]["upper"]],
        "average_precision": figures["average_precision"],
        "brier": figures["brier"],
        "ece": figures["ece"],
    }
