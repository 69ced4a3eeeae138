"""Tests written for mutants of orchestrator/core/ that survived tests/core (mutmut, issue 37):
the rules' refusals and their messages, a policy built in code checked like a file, the YAML a
policy is written back as, and arithmetic on column parameters in templates."""

from __future__ import annotations

import pytest

from duckscore.core.errors import PolicyError, TemplateError
from duckscore.core.policy import dump_yaml, load_policy, policy_from_parameters
from duckscore.core.render import column, lit, render_expression
from duckscore.core.rules import Number, Text
from duckscore.score.policy import SCORE_POLICY


@pytest.mark.parametrize("value", [5, ["a"], "", None])
def test_text_refuses_what_is_not_a_non_empty_string(value: object) -> None:
    with pytest.raises(PolicyError) as refused:
        Text().check("rules[0].match", value)
    assert str(refused.value) == f"rules[0].match: expected a non-empty string, got {value!r}"


@pytest.mark.parametrize(
    ("rule", "value", "message"),
    [
        (Number(lo=0, hi=1, lo_open=True), 0, "w: 0 is outside (0, 1]"),
        (Number(lo=0, hi=1, hi_open=True), 1.0, "w: 1.0 is outside [0, 1)"),
        (Number(lo=0.5), 0.25, "w: 0.25 is outside [0.5, inf]"),
        (Number(hi=-2), 3, "w: 3 is outside [-inf, -2]"),
    ],
)
def test_a_number_out_of_range_names_the_range(rule: Number, value: float, message: str) -> None:
    with pytest.raises(PolicyError) as refused:
        rule.check("w", value)
    assert str(refused.value) == message


def test_a_policy_built_in_code_is_checked_like_a_file_and_names_its_source() -> None:
    parameters = dict(load_policy(SCORE_POLICY, "overall_v1").parameters)
    with pytest.raises(PolicyError) as refused:
        policy_from_parameters(SCORE_POLICY, "cand", {**parameters, "w1": -1}, "candidate 3")
    assert str(refused.value) == "candidate 3: parameters.w1: -1 is outside (0, 1]"
    with pytest.raises(PolicyError) as refused:
        policy_from_parameters(SCORE_POLICY, "cand", {**parameters, "w1": 0.9}, "candidate 3")
    assert str(refused.value) == (
        "candidate 3: parameters.w1 + w2 + w3 + w_agreement + w_separation must sum to 1, got 1.4"
    )
    built = policy_from_parameters(SCORE_POLICY, "cand", parameters, "candidate 3", "overall_v1")
    assert (built.kind, built.version, built.base_version, built.source) == (
        SCORE_POLICY, "cand", "cand", "candidate 3"
    )  # fmt: skip
    assert (built.description, built.parent_version, built.parameters) == (
        "", "overall_v1", parameters
    )  # fmt: skip


def test_dump_yaml_keeps_the_order_and_the_characters() -> None:
    value = {"b": 1, "a": "可能", "c": [1, 2]}
    assert dump_yaml(value) == "b: 1\na: 可能\nc:\n- 1\n- 2\n"
    assert dump_yaml(value, flow=True) == "{b: 1, a: 可能, c: [1, 2]}\n"
    assert dump_yaml({"k": "a b " * 8}, flow=True, width=20).count("\n") > 1


def test_arithmetic_on_column_parameters_writes_the_sql() -> None:
    assert lit(column("a") * 2) == "(a * 2)"
    assert lit(2 - column("a")) == "(2 - a)"
    assert lit(column("a") / 3.0) == "(a / CAST(3.0 AS DOUBLE))"
    assert lit(1.5 + column("b z")) == '(CAST(1.5 AS DOUBLE) + "b z")'
    assert lit(column("z") * column("z") / 2) == "((z * z) / 2)"


def test_the_float_and_int_filters_keep_their_defaults_and_pass_columns_through() -> None:
    rendered = render_expression(
        "{{ 'abc' | float(1.5) }} {{ '7' | int }} {{ 'q' | int(4) }} {{ x | float | lit }}",
        x=column("c"),
    )
    assert rendered == "1.5 7 4 c"


def test_a_bad_expression_is_named_in_the_error() -> None:
    with pytest.raises(TemplateError, match=r"^expression '\{\{ x': .*"):
        render_expression("{{ x")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("w1.x=1", "score policy overall_v1: parameters.w1 must be a mapping"),
        ("normalization=3", "--set normalization: is a group; give a mapping or set one of its keys"),
        ("normalization.moda=per_query", "--set normalization.moda: unknown key 'normalization.moda' (did you mean 'normalization.mode'?)"),
        ("normalisation.mode=x", "--set normalisation.mode: unknown key 'normalisation' (did you mean 'normalization'?)"),
        ("nothing_like_it=1", "--set nothing_like_it: unknown key 'nothing_like_it'"),
    ],
)  # fmt: skip
def test_an_override_names_the_key_and_the_nearest_one(override: str, message: str) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(SCORE_POLICY, "overall_v1", [override])
    assert str(refused.value) == message


def test_a_group_is_overridden_key_by_key() -> None:
    loaded = load_policy(SCORE_POLICY, "overall_v1", ["normalization={mode: per_query, p_lo: 0.2}"])
    normalization = loaded.parameters["normalization"]
    assert (normalization["mode"], normalization["p_lo"], normalization["p_hi"]) == (
        "per_query", 0.2, load_policy(SCORE_POLICY, "overall_v1").parameters["normalization"]["p_hi"]
    )  # fmt: skip
