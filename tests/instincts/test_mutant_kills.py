"""Tests written for mutants of sql/instincts/ that survived the other tests (tests/mutants/,
issue 37): the packaged policy gives its two lowest tiers the same injection method (`none`), so
a CASE that lost the tentative tier's branch of injection_method still gave the right answer.
Here every tier has a method of its own (a policy that `extends` instinct_v1), and a composite in
every tier must get its tier's name and method (docs/instincts.md: the first tier, highest first,
whose `at_least` the composite reaches; below all, the last).

The store's score columns must keep the seed's DECIMAL(4,3) (docs/specs/004, the CREATE TABLE of
instincts and confidence_history): DECIMAL(4,4) (`3` made `4` in schema.sql) cannot hold 1.000,
and no fast test read the types back."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd
import yaml

from duckscore.instincts.scores import score_counts
from duckscore.instincts.store import init_store

TIERS = [
    {"tier": "core", "at_least": 0.8, "injection_method": "m_core"},
    {"tier": "strong", "at_least": 0.6, "injection_method": "m_strong"},
    {"tier": "moderate", "at_least": 0.4, "injection_method": "m_moderate"},
    {"tier": "tentative", "at_least": 0.2, "injection_method": "m_tentative"},
    {"tier": "deprecated", "at_least": 0.0, "injection_method": "m_deprecated"},
]


def policy_file(folder: Path) -> str:
    path = folder / "instinct_tiers.yaml"
    document = {
        "instinct_policy_version": "instinct_tiers",
        "extends": "instinct_v1",
        "parameters": {"tiers": TIERS},
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def counts(n: int) -> dict[str, object]:
    """A spread of counts: observations 0..24, contradictions, applications and reviews."""
    return {
        "instinct_id": f"i{n:03d}",
        "observation_count": n % 25,
        "contradiction_count": n % 4,
        "positive_count": n % 7 % (n % 11 + 1),
        "application_count": n % 11,
        "approvals": n % 5,
        "rejections": n % 3,
        "reflect_approved": n % 6 == 0,
    }


def expected_tier(composite: float) -> tuple[str, str]:
    for t in TIERS[:-1]:
        if composite >= t["at_least"]:
            return t["tier"], t["injection_method"]
    return TIERS[-1]["tier"], TIERS[-1]["injection_method"]


def test_every_tier_gets_its_own_injection_method(tmp_path: Path) -> None:
    strong = [
        {**counts(400 + n), "observation_count": 30, "contradiction_count": 0,
         "positive_count": 300 - n, "application_count": 300, "approvals": 60 - n,
         "rejections": 0, "reflect_approved": True}
        for n in range(5)
    ]  # fmt: skip
    frame = pd.DataFrame([counts(n) for n in range(400)] + strong)
    frame = frame.astype({"reflect_approved": "bool", "instinct_id": "str"})
    out = score_counts(frame, policy_file(tmp_path))
    got = {(r.tier, r.injection_method) for r in out.itertuples()}
    assert got == {(t["tier"], t["injection_method"]) for t in TIERS}, "a composite in every tier"
    for r in out.itertuples():
        assert (r.tier, r.injection_method) == expected_tier(r.composite), r


def test_the_store_keeps_the_seeds_score_types_and_defaults(tmp_path: Path) -> None:
    init_store(tmp_path / "store.duckdb")
    with duckdb.connect(str(tmp_path / "store.duckdb"), read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, column_name, data_type, column_default FROM duckdb_columns() "
            "WHERE column_name IN ('freq_score', 'eff_score', 'human_score', 'composite', "
            "'observation_count', 'application_count', 'success_count', 'contradiction_count')"
        ).fetchall()
    types = {(table, name): kind for table, name, kind, _ in columns}
    scores = ("freq_score", "eff_score", "human_score", "composite")
    for table in ("instincts", "confidence_history"):
        assert {types[(table, name)] for name in scores} == {"DECIMAL(4,3)"}
    defaults = {name: default for table, name, _, default in columns if table == "instincts"}
    # the seed's DEFAULT 0.30, 0.50, 0.50 (instinct_v1's `initial`), 1, 0, 0, 0
    got = {
        name: duckdb.execute(f"SELECT {defaults[name]}").fetchall()[0][0]
        for name in defaults
        if name != "composite"
    }
    assert got == {
        "freq_score": 0.3, "eff_score": 0.5, "human_score": 0.5, "observation_count": 1,
        "application_count": 0, "success_count": 0, "contradiction_count": 0,
    }  # fmt: skip
