"""Issue 50, seed 000 §13 and §4.4: diagnostics that act (a policy's `diagnostics` rules give each
query its recommended `actions`, and may raise need_hitl) and the optional smoothing of
coverage_ratio. Expected values are worked by hand below; the rows of q1 and q2 are those of
tests/score/cases/f1_risk_flags_triggered.yaml, whose flags and scores are worked there."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb
import jsonschema
import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.errors import PolicyError
from duckscore.core.policy import load_policy
from duckscore.core.resources import contract_schema
from duckscore.scoring.pipeline import score
from duckscore.scoring.policy import SCORE_POLICY
from duckscore.scoring.policy_view import load_score_policy
from duckscore.scoring.stages import STAGES, render_parents, render_queries, render_stage

from ..helpers import same_value

# §13 as written: single_spike → raise the evidence threshold or clarify; low_coverage →
# re-retrieve or clarify; huge_doc_sparse → lock the parent or a second retrieval
SEED_13 = {
    "single_spike": {"actions": ["raise_threshold", "clarify"], "need_hitl": False},
    "low_coverage": {"actions": ["re_retrieve", "clarify"], "need_hitl": False},
    "huge_doc_sparse": {"actions": ["lock_parent", "re_retrieve"], "need_hitl": False},
}
COLUMNS = ("query_id", "parent_id", "rrf_sum", "max_score", "coverage", "total_chunks",
           "coverage_ratio")  # fmt: skip
ROWS = [
    dict(zip(COLUMNS, values, strict=True))
    for values in (
        # q1, best S: single_spike; runner-up H: low_coverage, huge_doc_sparse; M: sparse_evidence
        ("q1", "H", 0.035, 0.9, 1, 63, 0.15),
        ("q1", "S", 0.010, 0.9, 3, 15, 0.5),
        ("q1", "M", 0.020, 0.5, 4, 7, 0.05),
        # q2, best A2 without a flag; runner-up B2 ambiguous_candidate (ratio 0.969 >= 0.92)
        ("q2", "A2", 0.03, 0.8, 3, 20, 0.5),
        ("q2", "B2", 0.03, 0.8, 3, 20, 0.45),
        ("q2", "C2", 0.01, 0.4, 1, 20, 0.5),
        # q3, one candidate: zero spread, score 0, low; 0.05 < 0.1 sparse_evidence, 80 >= 50
        # and 0.05 < 0.2 huge_doc_sparse
        ("q3", "L", 0.02, 0.7, 2, 80, 0.05),
    )
]
QUERIES = ["q1", "q2", "q3", "q4"]  # q4: asked, no candidate


def scored(tmp_path: Path, overrides: dict[str, Any]) -> tuple[pd.DataFrame, list[dict]]:
    sets = [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    out = tmp_path / "out"
    score(pd.DataFrame(ROWS), out, policy="overall_v1", overrides=sets,
          queries=pd.DataFrame({"query_id": QUERIES}))  # fmt: skip
    lines = [json.loads(line) for line in (out / "contract.jsonl").read_text().splitlines()]
    return pd.read_parquet(out / "parents.parquet"), lines


def decisions(lines: list[dict]) -> dict[str, tuple[list[str], bool, bool]]:
    return {
        line["query_id"]: (line["actions"], line["need_hitl"], line["web_fallback"])
        for line in lines
    }


def test_the_best_parents_flags_give_the_seeds_actions(tmp_path: Path) -> None:
    _, lines = scored(tmp_path, {"diagnostics": SEED_13})
    assert decisions(lines) == {
        # S's single_spike; H's flags are the runner-up's, not the query's
        "q1": (["clarify", "raise_threshold"], False, False),
        # ambiguous_candidate has no rule here; need_hitl by the ratio (0.969 >= 0.92)
        "q2": ([], True, False),
        # huge_doc_sparse acts, sparse_evidence has no rule; low without HITL: the web
        "q3": (["lock_parent", "re_retrieve"], False, True),
        "q4": ([], False, True),  # no candidate, no flag
    }
    validator = jsonschema.Draft202012Validator(json.loads(contract_schema("score").read_text()))
    for line in lines:
        validator.validate(line)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**lines[0], "actions": ["call_a_friend"]})


def test_a_rule_that_asks_a_human_keeps_a_low_query_off_the_web(tmp_path: Path) -> None:
    rules = {
        **SEED_13,
        "huge_doc_sparse": {"actions": ["lock_parent"], "need_hitl": True},
        "ambiguous_candidate": {"actions": ["clarify"], "need_hitl": False},
    }
    _, lines = scored(tmp_path, {"diagnostics": rules})
    assert decisions(lines) == {
        "q1": (["clarify", "raise_threshold"], False, False),
        "q2": (["clarify"], True, False),  # the runner-up's ambiguous_candidate is the query's
        "q3": (["lock_parent"], True, False),  # §8.2: low, but a clarification may resolve it
        "q4": ([], False, True),
    }


def test_a_policy_without_diagnostics_writes_no_actions(tmp_path: Path) -> None:
    parents, lines = scored(tmp_path, {})
    assert all("actions" not in line for line in lines)
    assert "coverage_ratio_smoothed" not in parents.columns


def test_smoothing_shrinks_the_ratio_the_subscores_read(tmp_path: Path) -> None:
    parents, lines = scored(tmp_path, {"coverage_smoothing": {"pseudo_chunks": 2, "prior": 0.5}})
    got = parents.set_index("parent_id")
    expected = {
        # (0.15·63 + 2·0.5) / (63 + 2) = 10.45 / 65; S_coverage = 0.5·0 + 0.5·0.160769…;
        # S_stability = 0.160769…·(0.5 + 0.5·1); overall = 0.99999999875^0.5 ·
        # 0.0803846…^0.3 · 0.160769…^0.2 = 0.9999999994 · 0.469858 · 0.693232
        "H": (0.16076923076923078, 0.08038461538461539, 0.16076923076923078, 0.3256810337920391),
        # (0.05·7 + 1) / 9 = 0.15; 0.5·1 + 0.5·0.15; 0.15·(0.5 + 0); 0.24^0.5·0.575^0.3·0.075^0.2
        "M": (0.15, 0.575, 0.075, 0.24718278213924005),
        # (0.5·15 + 1) / 17 = 0.5: a ratio equal to the prior is left as it is (case f1's S)
        "S": (0.5, 0.5833333331944444, 0.3333333332832398, 0.43189759149951773),
    }
    for parent, values in expected.items():
        row = got.loc[parent]
        columns = ("coverage_ratio_smoothed", "s_coverage", "s_stability", "overall_score")
        for column, value in zip(columns, values, strict=True):
            assert same_value(float(row[column]), value, 1e-12), (parent, column, row[column])
    # the §7.3 flags read the input's ratio: M stays sparse (0.05 < 0.1, smoothed 0.15)
    assert list(got.loc["M", "risk_flags"]) == ["sparse_evidence"]
    q1 = next(line for line in lines if line["query_id"] == "q1")
    assert same_value(q1["top2_ratio"], 0.3256810337920391 / 0.43189759149951773, 1e-12)


# sha256 of every score template each packaged policy renders (parents.sql; queries.sql alone
# and standalone, with and without a query list; each stage of STAGES it has), joined by
# "\n--\n", taken at 74b49b1 by that commit's own code, before issue 50
SQL_BEFORE_ISSUE_50 = {
    "overall_v1": "a3ff8380b8c97d41bf1a9aa2e98b5c955507bb9698b16ec154eedc68632256e8",
    "overall_v2": "d5f6e90411d123430d10934fbd4ed2215ff59fd977ab7cd62bb43356d28be8ed",
    "overall_v3": "3d31feaf91f3b624c6d1676f0262133ca3a0717ae70b8048a7edfcebcefcfb2f",
}


@pytest.mark.parametrize("name", sorted(SQL_BEFORE_ISSUE_50))
def test_packaged_policies_render_the_sql_of_before(name: str) -> None:
    policy = load_score_policy(name)
    texts = [render_parents(policy).text]
    for standalone in (True, False):
        for with_query_ids in (True, False):
            texts.append(render_queries(policy, 5, standalone, with_query_ids).text)
    for stage in STAGES:
        try:
            texts.append(render_stage(policy, stage).text)
        except PolicyError:  # a stage of a block the policy does not have
            continue
    digest = hashlib.sha256("\n--\n".join(texts).encode()).hexdigest()
    assert digest == SQL_BEFORE_ISSUE_50[name]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('diagnostics.single_spike={actions: [call_a_friend], need_hitl: false}',
         "parameters.diagnostics.single_spike.actions[0]: 'call_a_friend' is not one of clarify"),
        ("diagnostics.single_spike={actions: [clarify, clarify], need_hitl: false}",
         "parameters.diagnostics.single_spike.actions: an action is listed twice"),
        ("diagnostics.single_spike={actions: [], need_hitl: false}",
         "parameters.diagnostics.single_spike.actions: expected a list of actions"),
        ("diagnostics.single_spike={actions: [clarify]}",
         "missing key parameters.diagnostics.single_spike.need_hitl"),
        ("diagnostics.spike={actions: [clarify], need_hitl: false}", "unknown key 'diagnostics.spike'"),
        ("coverage_smoothing={pseudo_chunks: 0, prior: 0.5}",
         "parameters.coverage_smoothing.pseudo_chunks: 0 is outside (0, inf]"),
        ("coverage_smoothing={pseudo_chunks: 2, prior: 1.5}",
         "parameters.coverage_smoothing.prior: 1.5 is outside [0, 1]"),
    ],
)  # fmt: skip
def test_bad_rules_are_refused_naming_the_key(override: str, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy(SCORE_POLICY, "overall_v1", [override])
    assert message in str(raised.value)


def test_an_empty_diagnostics_block_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("extends: overall_v1\nparameters: {diagnostics: {}}\n", encoding="utf-8")
    with pytest.raises(
        PolicyError, match=r"parameters\.diagnostics: give the rule of at least one"
    ):
        load_policy(SCORE_POLICY, str(path))


def test_the_stage_query_actions_runs_alone_and_needs_the_block() -> None:
    rule = "diagnostics.single_spike={actions: [clarify], need_hitl: true}"
    result = CliRunner().invoke(
        cli, ["sql", "score", "--stage", "query_actions", "--policy", "overall_v1", "--set", rule]
    )
    assert result.exit_code == 0, result.output
    con = duckdb.connect()
    con.register("parent_features", pd.DataFrame(ROWS))
    assert con.execute(result.output).fetchall() == [("q1", ["clarify"], True)]
    refused = CliRunner().invoke(cli, ["sql", "score", "--stage", "query_actions"])
    assert refused.exit_code == 2
    assert "policy overall_v3 has no diagnostics block" in refused.output


def test_the_summary_names_the_flags_that_ask_a_human(tmp_path: Path) -> None:
    (tmp_path / "features.csv").write_text(pd.DataFrame(ROWS).to_csv(index=False), encoding="utf-8")
    rule = "diagnostics.huge_doc_sparse={actions: [lock_parent], need_hitl: true}"
    result = CliRunner().invoke(
        cli,
        ["score", "--features", str(tmp_path / "features.csv"), "--out", str(tmp_path / "o"),
         "--policy", "overall_v1", "--set", rule],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # q2 by its ratio, q3 by huge_doc_sparse
    assert "need_hitl 2 (top-2 ratio >= R_hitl 0.92, or huge_doc_sparse)" in result.output
