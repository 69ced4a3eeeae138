"""benchmarks/explain_micro.py (issue 52 §3): the flat explanations are the nested contributions
of fused.parquet unnested, field for field, and the fused items are the same in every variant
but for their explanations — checked on SciFact under two recipes; the comparison tells two
different tables apart."""

from __future__ import annotations

import pytest

from benchmarks import explain_micro

from ..helpers import SCIFACT

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("recipe", ["canonical_rrf", "hybrid_v1"])
def test_the_variants_hold_the_same_facts_and_are_timed(recipe: str) -> None:
    summary = explain_micro.main(
        [str(SCIFACT / "retrieval_log.parquet"), "--repeat", "1", "--recipe", recipe]
    )
    assert set(summary) == set(explain_micro.VARIANTS)
    assert summary["nested"]["ratio"] == 1.0
    assert all(row["cpu_s"] > 0 for row in summary.values())
    # the explanations are most of what the nested file holds
    assert summary["none"]["bytes"] < summary["nested"]["bytes"] / 2


def test_the_comparison_tells_tables_apart() -> None:
    rows = "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS t(x, y)"
    assert explain_micro._equal(rows, rows)
    assert not explain_micro._equal(rows, rows.replace("'b'", "'c'"))
    assert not explain_micro._equal(rows, f"{rows} UNION ALL {rows}")
    assert not explain_micro._equal(f"{rows} WHERE false", f"{rows} WHERE false")  # no rows
