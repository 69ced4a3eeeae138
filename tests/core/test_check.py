"""The sqlglot checks and lint: each rule has a case it rejects and a case it accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from duckscore.core.check import check_sql
from duckscore.core.errors import TemplateError
from duckscore.core.render import RenderedSQL

LINT = yaml.safe_load((Path(__file__).parent / "lint_cases.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", LINT["cases"], ids=[c["sql"][:50] for c in LINT["cases"]])
def test_lint_case(case: dict) -> None:
    rendered = RenderedSQL(template="lint/case.sql", text=case["sql"])
    if case["error"] is None:
        check_sql(rendered, LINT["schema"])
    else:
        with pytest.raises(TemplateError) as raised:
            check_sql(rendered, LINT["schema"])
        message = str(raised.value)
        assert case["error"] in message
        assert message.startswith("sql/lint/case.sql:")
        assert "\n" not in message


def test_misspelt_column_names_template_and_column() -> None:
    rendered = RenderedSQL(
        template="score/parents.sql", text="SELECT rrf_summ FROM parent_features"
    )
    with pytest.raises(
        TemplateError, match=r"sql/score/parents.sql: Column 'rrf_summ' could not be resolved"
    ):
        check_sql(rendered, {"parent_features": {"rrf_sum": "DOUBLE"}})


def test_packaged_templates_pass_their_own_lint() -> None:
    from duckscore.scoring.policy_view import load_score_policy
    from duckscore.scoring.stages import render_parents, render_queries

    policy = load_score_policy("overall_v1")
    features = dict.fromkeys(("rrf_sum", "max_score", "coverage", "coverage_ratio"), "DOUBLE")
    features.update(query_id="VARCHAR", parent_id="VARCHAR", total_chunks="BIGINT")
    check_sql(render_parents(policy), {"parent_features": features})
    check_sql(
        render_queries(policy, 5, standalone=True, with_query_ids=False),
        {"parent_features": features},
    )
