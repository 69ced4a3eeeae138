"""benchmarks/live_profile.py (issue 52 §2): DuckDB's profile of the live contract statement is
of that statement (its parts inside its total, the operators of the whole contract), and a batch
is the queries asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import live_profile

pytestmark = pytest.mark.slow


def test_the_profile_is_the_contract_statement_s(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    summary = live_profile.main(["--queries", "6", "--batch", "3", "--json", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == summary
    profile = summary["contract"]
    assert 0 < profile["binding_ms"] <= profile["planner_ms"]
    parts = profile["planner_ms"] + profile["optimizer_ms"] + profile["physical_plan_ms"]
    assert parts < profile["total_ms"]
    assert profile["operators"] > 50  # fusion, parent features, scores, levels: not a probe
    assert len(profile["slowest_optimizers_ms"]) == 3
    assert summary["queries"] == 6 and summary["batch"]["queries"] == 3
    assert summary["batch"]["p50_ms"] > 0 and summary["call_p50_ms"] > 0
