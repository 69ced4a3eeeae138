"""Tests written for mutants of sql/bids/ that survived the fast tests (tests/mutants/, issue 37):
a rule's reason (`kind = 'formula'` made `<>` in rule_results) was read only by the slow
tests/bids/test_bids.py. The reason is the rule's `reason` (by default its id, docs/bids.md),
then its outcome as the slow tests read it: " — missing: <documents>" for a required rule
missing material, " — missing material" for another rule missing it, nothing for a formula,
" — pass" or " — fail" for the others; here checked on every row of the tender fixture."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from duckscore.bids.pipeline import score_bids

from ..helpers import FIXTURES


def expected_reason(row: pd.Series) -> str:
    if row["kind"] == "required" and row["missing_material"]:
        return f"{row['rule_id']} — missing: {', '.join(row['missing'])}"
    if row["missing_material"]:
        return f"{row['rule_id']} — missing material"
    if row["kind"] == "formula":
        return str(row["rule_id"])
    return f"{row['rule_id']} — {'pass' if row['passed'] else 'fail'}"


def test_every_rules_reason_follows_its_outcome(tmp_path: Path) -> None:
    score_bids(FIXTURES / "bids" / "tender", tmp_path / "out")
    rules = pd.read_parquet(tmp_path / "out" / "rules.parquet")
    kinds = set(rules["kind"])
    assert {"formula", "required", "redline"} <= kinds
    assert rules["missing_material"].any() and (rules["passed"] == False).any()  # noqa: E712
    for _, row in rules.iterrows():
        assert row["reason"] == expected_reason(row), row.to_dict()
