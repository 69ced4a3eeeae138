"""Tests written for mutants of orchestrator/core/ that survived tests/core (mutmut, issue 37):
the rules' refusals and their messages, a policy built in code checked like a file, the YAML a
policy is written back as, and arithmetic on column parameters in templates; the input checks'
one-line errors (row, key, value, problem; docs/inputs.md), the column types each kind accepts,
references between inputs; SQL literals and identifiers refused, template errors, rendered SQL's
blank lines; recipe files (sources as a list, partial recipes over hybrid_v1, errors naming the
file and key), override messages, the leading-zero advice, the policy record's fields, a file's
own description, parent_version and metadata, and where a base or a missing file is looked for.
Two bugs they found, fixed: an override over a recipe file's value named the key with a
`parameters.` recipes do not have, and a character YAML refuses gave a two-line message without
the line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import jinja2
import pytest

from duckscore.core import render as render_module
from duckscore.core.errors import InputError, PolicyError, TemplateError
from duckscore.core.inputs import open_input
from duckscore.core.policy import (
    Policy,
    PolicyKind,
    dump_yaml,
    load_policy,
    parse_overrides,
    policy_from_parameters,
)
from duckscore.core.render import column, ident, lit, render, render_expression
from duckscore.core.resources import policies_dir
from duckscore.core.rules import Bounds, Leaf, Number, Text, Words
from duckscore.core.tables import Column, OpenedInput, TableContract
from duckscore.core.validate import check_columns, check_references, check_rows, check_values
from duckscore.fusion.recipe import FUSE_RECIPE
from duckscore.scoring.policy import SCORE_POLICY


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
        "{{ 'abc' | float(1.5) }} {{ '7' | int }} {{ 'q' | int(4) }} {{ x | float | lit }}"
        " {{ 'abc' | float(default=2.5) }}",
        x=column("c"),
    )
    assert rendered == "1.5 7 4 c 2.5"


def test_a_bad_expression_is_named_in_the_error() -> None:
    with pytest.raises(TemplateError, match=r"^expression '\{\{ x': .*"):
        render_expression("{{ x")


@pytest.mark.parametrize(
    ("kind", "override", "message"),
    [
        (SCORE_POLICY, "w1.x=1", "score policy overall_v1: parameters.w1 must be a mapping"),
        (SCORE_POLICY, "normalization.mode.x=1", "score policy overall_v1: parameters.normalization.mode must be a mapping"),
        (SCORE_POLICY, "normalization=3", "--set normalization: is a group; give a mapping or set one of its keys"),
        (SCORE_POLICY, "normalization.moda=per_query", "--set normalization.moda: unknown key 'normalization.moda' (did you mean 'normalization.mode'?)"),
        (SCORE_POLICY, "normalisation.mode=x", "--set normalisation.mode: unknown key 'normalisation' (did you mean 'normalization'?)"),
        (SCORE_POLICY, "nothing_like_it=1", "--set nothing_like_it: unknown key 'nothing_like_it'"),
        (FUSE_RECIPE, "fusion={methd: rrf}", "--set-recipe fusion.methd: unknown key 'fusion.methd' (did you mean 'fusion.method'?)"),
        (FUSE_RECIPE, "source_defaults.type.x=1", "--set-recipe source_defaults.type.x: unknown key 'source_defaults.type.x'"),
        (FUSE_RECIPE, "parameters.fusion.k=20", "--set-recipe parameters.fusion.k: unknown key 'parameters' (did you mean 'parent_features'?)"),
    ],
)  # fmt: skip
def test_an_override_names_its_option_the_key_and_the_nearest_one(
    kind: PolicyKind, override: str, message: str
) -> None:
    name = "overall_v1" if kind is SCORE_POLICY else "hybrid_v1"
    with pytest.raises(PolicyError) as refused:
        load_policy(kind, name, [override])
    assert str(refused.value) == message


def test_a_group_is_overridden_key_by_key() -> None:
    loaded = load_policy(SCORE_POLICY, "overall_v1", ["normalization={mode: per_query, p_lo: 0.2}"])
    normalization = loaded.parameters["normalization"]
    assert (normalization["mode"], normalization["p_lo"], normalization["p_hi"]) == (
        "per_query", 0.2, load_policy(SCORE_POLICY, "overall_v1").parameters["normalization"]["p_hi"]
    )  # fmt: skip


# --- the input checks (docs/inputs.md, "The checks" and "The error line") ---------------------

CONTRACT = TableContract(
    "t",
    (
        Column("k", "id"),
        Column("j", "id"),
        Column("opt", "number", required=False, nullable=True),
        Column("ts", "time"),
        Column("s", "text", choices=("high", "medium", "low")),
        Column("n", "number", min=0, max=1),
        Column("c", "count"),
    ),
    key=("k", "j"),
)
FIRST = "('a', '1', '2024-01-01', 'high', 0.5, 200)"
AT = "--t (<DuckDBPyRelation>"


def table(*rows: str, select: str = "*") -> str:
    values = ", ".join(rows)
    return f"SELECT {select} FROM (VALUES {values}) v(k, j, ts, s, n, c)"


def opened(con: duckdb.DuckDBPyConnection, sql: str, label: str = "--t") -> OpenedInput:
    return open_input(con, CONTRACT, con.sql(sql), label)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (table(FIRST, "('a', '1', '2024-01-02', 'low', 1.0, 3)"),
         f"{AT}, row 2, k='a', j='1'): duplicate (k, j), first seen at <DuckDBPyRelation>, row 1, k='a', j='1'"),
        (table(FIRST, "('b', '1', '2024-01-02', 'low', 1.5, 3)"),
         f"{AT}, row 2, k='b', j='1', value 1.5): column 'n' is above 1"),
        (table("('a', '1', '2024-01-01', 'high', 1.5, 200)", "('b', '1', '2024-01-02', 'low', 2.5, 3)"),
         f"{AT}, row 1, k='a', j='1', value 1.5): column 'n' is above 1 (2 rows in all)"),
        (table(FIRST, "('b', '1', '2024-01-02', 'low', -0.5, 3)"),
         f"{AT}, row 2, k='b', j='1', value -0.5): column 'n' is below 0"),
        (table(FIRST, "('b', '1', '2024-01-02', 'low', NULL, 3)"),
         f"{AT}, row 2, k='b', j='1'): column 'n' is null"),
        (table(FIRST, "('b', '1', '2024-01-02', 'low', 'nan'::DOUBLE, 3)"),
         f"{AT}, row 2, k='b', j='1', value nan): column 'n' is NaN or infinite"),
        (table(FIRST, "('b', '1', '2024-01-02', 'critical', 0.5, 3)"),
         f"{AT}, row 2, k='b', j='1', value critical): column 's' is not one of high, medium, low"),
        (table(FIRST, "('b', '1', 'soon', 'low', 0.5, 3)"),
         f"{AT}, row 2, k='b', j='1', value soon): column 'ts' is not a timestamp"),
        (table(FIRST, "('', '1', '2024-01-02', 'low', 0.5, 3)"),
         f"{AT}, row 2, k='', j='1'): column 'k' is empty"),
        (table(FIRST, "('b', '1', '2024-01-02', 'low', 0.5, 9.5)"),
         f"{AT}, row 2, k='b', j='1', value 9.5): column 'c' is not a whole number"),
        (table(FIRST, "('b', '1', '2024-01-02', 'low', 0.5, 9007199254740994)"),
         f"{AT}, row 2, k='b', j='1', value 9007199254740994): column 'c' is too large (above 2^53)"),
        (table(FIRST, "('b', '1', '2024-01-02', 'low', NULL, 3)", select="k, j, ts, s, NULL AS n, c"),
         f"{AT}, row 1, k='a', j='1'): column 'n' is null (2 rows in all)"),
        (table("('a', '1', '2024-01-01', 'high', '0.5', 200)", "('b', '1', '2024-01-02', 'low', 'lots', 3)"),
         f"{AT}, row 2, k='b', j='1', value lots): column 'n' is text, not a number"),
        (table(FIRST, select="k, j, ts, s, n::VARCHAR AS n, c"),
         f"{AT}): column 'n' has type VARCHAR; expected a number (numbers written as text)"),
        (table(FIRST, select="k, j, ts, s, n > 0 AS n, c"),
         f"{AT}): column 'n' has type BOOLEAN; expected a number"),
        (table(FIRST, select="k, j, ts, 7 AS s, n, c"),
         f"{AT}): column 's' has type INTEGER; expected text"),
        (table(FIRST, select="k, j, ts, s, c"),
         f"{AT}): missing column 'n' (columns: k, j, ts, s, c)"),
        (table(FIRST) + " WHERE false", f"{AT}): no rows"),
    ],
)  # fmt: skip
def test_an_input_check_names_the_row_the_column_and_the_problem(sql: str, message: str) -> None:
    # the optional `opt` is absent: the columns after it are checked all the same
    with duckdb.connect() as con, pytest.raises(InputError) as refused:
        opened(con, sql)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "select",
    [
        "k, j, ts, s, n, c",
        "k, j, NULL AS opt, ts, s, n, c",  # an all-NULL column: the value checks decide
        "uuid() AS k, j, ts, s, n, c",
        "k, j, CAST(ts AS DATE) AS ts, s, n, c",
        "k, j, ts, s, n, 9007199254740992 AS c",  # 2^53 itself is not above 2^53
    ],
)
def test_the_column_types_of_the_kinds_are_accepted(select: str) -> None:
    with duckdb.connect() as con:
        sql = table(FIRST, "('b', '1', '2024-01-02', 'low', 1.0, 3)", select=select)
        assert opened(con, sql).rows == 2


def test_a_table_without_columns_says_none() -> None:
    with pytest.raises(InputError) as refused:
        check_columns(CONTRACT, {}, "--t", "x.csv")
    assert str(refused.value) == "--t (x.csv): missing column 'k' (columns: none)"


def test_a_value_duckdb_cannot_read_is_named_with_its_input() -> None:
    contract = TableContract("r", (Column("n", "number"),))
    with duckdb.connect() as con:
        con.execute("CREATE VIEW raw AS SELECT 'x' AS n, 'x.csv' AS f, 1 AS r")
        with pytest.raises(InputError, match=r"^--r: cannot read x\.csv: Conversion Error: "):
            check_values(con, contract, "raw", {"n": "n"}, "--r", "x.csv")


def test_a_reference_names_the_row_and_the_value_missing_from_its_parent() -> None:
    parent = TableContract("p", (Column("k", "id"),), key=("k",))
    with duckdb.connect() as con:
        known = open_input(con, parent, con.sql("SELECT 'a' AS k"), "--p")
        child = opened(con, table(FIRST, "('z', '1', '2024-01-02', 'low', 1.0, 3)"), "--c")
        with pytest.raises(InputError) as refused:
            check_references(con, child, "k", known, "k")
        assert (
            str(refused.value)
            == "--c (<DuckDBPyRelation>, row 2, k='z', j='1'): k 'z' is not in --p"
        )
        with pytest.raises(InputError) as refused:
            check_rows(con, child, "child.c > 2", "c is more than 2")
        assert str(refused.value) == (
            "--c (<DuckDBPyRelation>, row 1, k='a', j='1'): c is more than 2 (2 rows in all)"
        )
        check_rows(con, child, "child.c > 1000", "c is more than 1000")


# --- SQL literals and identifiers, templates (docs/sql.md: values only through lit) -----------


@pytest.mark.parametrize(
    ("value", "sql"),
    [(False, "FALSE"), (True, "TRUE"), (None, "NULL"), (3, "3"), ("it's", "'it''s'"), ([1, "a"], "[1, 'a']")],
)  # fmt: skip
def test_lit_writes_each_value_as_sql(value: object, sql: str) -> None:
    assert lit(value) == sql


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "cannot render non-finite number nan as a SQL literal"),
        ("a\x00b", "cannot render a string containing a NUL character"),
        ({1}, "cannot render a set as a SQL literal"),
    ],
)
def test_lit_refuses_what_sql_cannot_hold(value: object, message: str) -> None:
    with pytest.raises(TemplateError) as refused:
        lit(value)
    assert str(refused.value) == message


@pytest.mark.parametrize(("name", "message"), [("a\x00b", "'a\\x00b'"), ("", "''")])
def test_ident_refuses_an_empty_name_or_a_nul(name: str, message: str) -> None:
    with pytest.raises(TemplateError) as refused:
        ident(name)
    assert str(refused.value) == f"invalid SQL identifier {message}"


@pytest.fixture
def templates(monkeypatch: pytest.MonkeyPatch) -> None:
    """render() over three small templates instead of sql/."""
    env = jinja2.Environment(
        loader=jinja2.DictLoader(
            {
                "tidy.sql": "\n\n  a  \n\n\n\n  d  \nb\n\nc\t\n\n",
                "undefined.sql": "SELECT {{ x }}",
                "syntax.sql": "SELECT\n{% if %}",
            }
        ),
        undefined=jinja2.StrictUndefined,
    )
    monkeypatch.setattr(render_module, "environment", lambda: env)


@pytest.mark.usefixtures("templates")
def test_rendered_sql_loses_trailing_blanks_and_repeated_empty_lines() -> None:
    assert render("tidy.sql").text == "a\n\n  d\nb\n\nc\n"


@pytest.mark.usefixtures("templates")
@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("nowhere.sql", "^template not found: sql/nowhere.sql$"),
        ("undefined.sql", "^sql/undefined.sql: 'x' is undefined$"),
        ("syntax.sql", "^syntax.sql:2: "),
    ],
)
def test_a_template_error_names_the_template_and_line(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render(template)


# --- the rules' other refusals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "value", "message"),
    [
        (Number(), None, "w: a number is required, got null"),
        (Number(), float("inf"), "w: expected a finite number, got inf"),
        (Number(integer=True), 1.5, "w: expected a whole number, got 1.5"),
        (Bounds(), 5, "w: expected [lo, hi] or null, got 5"),
        (Bounds(), [1, 2, 3], "w: expected [lo, hi] or null, got [1, 2, 3]"),
        (Bounds(), ["a", 1], "w[0]: expected a number, got 'a'"),
        (Words(), "abc", "w: expected a list of non-empty strings"),
        (Words(), [5], "w: expected a list of non-empty strings"),
        (Words(), ["a", ""], "w: expected a list of non-empty strings"),
    ],
)
def test_a_rule_refuses_with_the_key_and_the_value(rule: Leaf, value: object, message: str) -> None:
    with pytest.raises(PolicyError) as refused:
        rule.check("w", value)
    assert str(refused.value) == message


# --- recipe files: lists of sources, partial files, their errors (docs/fuse.md, policies.md) ---

HYBRID_SOURCE = {"top_k": None, "normalize": "rank", "weight": 1.0, "distance": False}


def recipe(tmp_path: Path, text: str, overrides: list[str] | None = None) -> Policy:
    path = tmp_path / "r.yaml"
    path.write_text(text, encoding="utf-8")
    return load_policy(FUSE_RECIPE, str(path), overrides)


def test_sources_may_be_a_list_of_entries_with_a_name(tmp_path: Path) -> None:
    loaded = recipe(
        tmp_path,
        "extends: hybrid_v1\nsources:\n- {name: dense, weight: 2.0}\n- {name: bm25, normalize: minmax}\n",
    )
    assert loaded.parameters["sources"] == {
        "dense": {**HYBRID_SOURCE, "weight": 2.0},
        "bm25": {**HYBRID_SOURCE, "normalize": "minmax"},
    }


def test_a_partial_recipe_extends_hybrid_v1(tmp_path: Path) -> None:
    loaded = recipe(tmp_path, "recipe_id: mine\nfusion: {k: 20}\n")
    assert loaded.version == "mine"
    assert loaded.bases == (("hybrid_v1", "fuse policy hybrid_v1"),)
    assert loaded.parameters["fusion"] == {"method": "rrf", "k": 20.0, "rank_base": 1, "missing": "default"}  # fmt: skip
    # every key spelled, but one group partly: still partial, still over hybrid_v1
    hybrid = policies_dir("fuse", "recipes") / "hybrid_v1.yaml"
    text = hybrid.read_text(encoding="utf-8").replace("recipe_id: hybrid_v1", "recipe_id: mine")
    text = text.replace(
        "fusion: {method: rrf, k: 60, rank_base: 1, missing: default}", "fusion: {k: 20}"
    )
    assert "fusion: {k: 20}" in text
    assert recipe(tmp_path, text).bases == (("hybrid_v1", "fuse policy hybrid_v1"),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("extends: hybrid_v1\nsources: [dense]\n", "every entry of sources needs a name"),
        ("extends: hybrid_v1\nsources: [{weight: 1}]\n", "every entry of sources needs a name"),
        ("extends: hybrid_v1\nsources: [{name: a}, {name: a}]\n", "sources: 'a' is declared twice"),
        ("extends: hybrid_v1\nsources: {a b: {weight: 1}}\n", "sources: invalid name 'a b'"),
        ("extends: hybrid_v1\nsource_defaults: 3\n", "source_defaults must be a mapping"),
        ("extends: hybrid_v1\nsources: 5\n",
         "sources must be a mapping of names (or a list of entries with `name`)"),
        ("extends: hybrid_v1\nzzzz: 1\n", "unknown key 'zzzz'"),
        ("extends: hybrid_v1\nfusoin: {k: 1}\n", "unknown key 'fusoin' (did you mean 'fusion'?)"),
        ("extends: hybrid_v1\nfusion: {type: rrf, method: rrf}\n",
         "fusion: give `method` or seed 003's `type`, not both"),
        ("extends: hybrid_v1\nquery_analyzer: {enabled: true, rules: 5}\n",
         "query_analyzer.rules must be a list"),
        ("extends: hybrid_v1\nquery_analyzer: {enabled: true, rules: [{match: '', boost: {}}]}\n",
         "query_analyzer.rules[0].match: expected a non-empty string, got ''"),
        ("extends: hybrid_v1\nquery_analyzer: {enabled: true, rules: [{match: x, boost: 5}]}\n",
         "query_analyzer.rules[0].boost must be a mapping of names"),
        ("extends: hybrid_v1\nquery_analyzer: {enabled: true, rules: [{match: x, boost: {a b: 1}}]}\n",
         "query_analyzer.rules[0].boost: invalid name 'a b'"),
        ("extends: hybrid_v1\nquery_analyzer: {enabled: true, rules: [{match: x, boost: {d: -1}}]}\n",
         "query_analyzer.rules[0].boost.d: -1 is outside [0, inf]"),
        ("extends: hybrid_v1\nfusion: {k: !!int abc}\n", "not valid YAML ('abc' is not a YAML 1.2 integer)"),
    ],
)  # fmt: skip
def test_a_recipe_error_names_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(PolicyError) as refused:
        recipe(tmp_path, text)
    path = tmp_path / "r.yaml"
    separator = ":2: " if message.startswith("not valid YAML") else ": "
    assert str(refused.value) == f"{path}{separator}{message}"


def test_a_policy_file_without_parameters_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("score_policy_version: mine\n", encoding="utf-8")
    with pytest.raises(PolicyError) as refused:
        load_policy(SCORE_POLICY, str(path))
    assert str(refused.value) == f"{path}: `parameters` must be a mapping"


def test_an_override_value_keeps_its_equals_signs_and_characters() -> None:
    loaded = load_policy(FUSE_RECIPE, "canonical_rrf", ["source_defaults.type=向量=a"])
    assert loaded.parameters["source_defaults"]["type"] == "向量=a"
    # the suffix: sha256 of the overrides as canonical JSON, UTF-8 (docs/policies.md)
    digest = hashlib.sha256('{"source_defaults.type":"向量=a"}'.encode()).hexdigest()
    assert loaded.version == f"canonical_rrf+{digest[:8]}"


def test_the_policy_record_has_the_documented_fields() -> None:
    record = load_policy(SCORE_POLICY, "overall_v1").as_record()
    assert sorted(record) == [
        "base_version", "capability", "overrides", "parameters", "parameters_sha256",
        "parent_version", "score_policy_version", "source",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "advice"),
    [
        ("010", "write 10, or 0o10 for octal"),
        ("+010", "write 10, or 0o10 for octal"),
        ("-010", "write -10"),
        ("0100", "write 100, or 0o100 for octal"),
        ("09", "write 9"),
        ("00", "write 0, or 0o0 for octal"),
    ],
)
def test_a_leading_zero_is_refused_with_what_to_write(value: str, advice: str) -> None:
    with pytest.raises(PolicyError) as refused:
        parse_overrides([f"k={value}"])
    assert str(refused.value) == (
        f"--set 'k={value}': {value} has a leading zero, which YAML 1.1 and YAML 1.2 read "
        f"differently: {advice} (quote it for text)"
    )


def test_a_group_override_over_a_file_whose_group_is_a_value_names_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("extends: overall_v1\nparameters: {normalization: 3}\n", encoding="utf-8")
    with pytest.raises(PolicyError) as refused:
        load_policy(SCORE_POLICY, str(path), ["normalization={mode: per_query}"])
    assert str(refused.value) == f"{path}: parameters.normalization must be a mapping"


@pytest.mark.parametrize("override", ["source_defaults={weight: 1}", "source_defaults.weight=1"])
def test_a_recipe_override_over_a_value_names_the_key_as_the_file_does(
    tmp_path: Path, override: str
) -> None:
    # a recipe is flat: its keys have no `parameters.` (the message once said they had)
    path = tmp_path / "flat.yaml"
    path.write_text("extends: hybrid_v1\nsource_defaults: 3\n", encoding="utf-8")
    with pytest.raises(PolicyError) as refused:
        load_policy(FUSE_RECIPE, str(path), [override])
    assert str(refused.value) == f"{path}: source_defaults must be a mapping"


def test_a_character_yaml_refuses_is_one_line_naming_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "ctl.yaml"
    # the blank first line counts: the line is 1 + the newlines before the character
    path.write_text("\nextends: overall_v1\nparameters:\n  a: \x07\n", encoding="utf-8")
    with pytest.raises(PolicyError) as refused:
        load_policy(SCORE_POLICY, str(path))
    assert str(refused.value) == (
        f"{path}:4: not valid YAML (unacceptable character #x0007: special characters are not "
        "allowed)"
    )


def test_description_parent_version_and_metadata_are_the_files_own(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(
        "extends: overall_v1\nscore_policy_version: base\ndescription: the base\n"
        "parent_version: overall_v1\nmetadata: {by: hand}\n",
        encoding="utf-8",
    )
    (tmp_path / "own.yaml").write_text(
        "extends: base.yaml\ndescription: mine\nparent_version: base\nmetadata: {n: 1}\n",
        encoding="utf-8",
    )
    (tmp_path / "bare.yaml").write_text("extends: base.yaml\n", encoding="utf-8")
    base = load_policy(SCORE_POLICY, str(tmp_path / "base.yaml"))
    own = load_policy(SCORE_POLICY, str(tmp_path / "own.yaml"))
    bare = load_policy(SCORE_POLICY, str(tmp_path / "bare.yaml"))
    assert (base.description, base.parent_version, base.metadata) == (
        "the base", "overall_v1", {"by": "hand"}
    )  # fmt: skip
    assert (own.description, own.as_record()["parent_version"], own.metadata) == (
        "mine", "base", {"n": 1}
    )  # fmt: skip
    assert (bare.description, bare.as_record()["parent_version"], bare.metadata) == ("", None, {})


def test_a_base_is_a_path_when_it_has_a_folder_or_a_yaml_suffix(tmp_path: Path) -> None:
    overall = (policies_dir("score") / "overall_v1.yaml").read_text(encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "base").write_text(overall, encoding="utf-8")
    (tmp_path / "base.yml").write_text(overall, encoding="utf-8")
    for base in ("sub/base", "base.yml"):
        (tmp_path / "top.yaml").write_text(f"extends: {base}\n", encoding="utf-8")
        loaded = load_policy(SCORE_POLICY, str(tmp_path / "top.yaml"))
        assert loaded.bases == (("overall_v1", str(tmp_path / base)),)


def test_a_missing_file_is_named_as_given_or_beside_the_file_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(SCORE_POLICY, "./nowhere.yaml")
    assert str(refused.value) == "policy file not found: ./nowhere.yaml"
    (tmp_path / "top.yaml").write_text("extends: gone.yaml\n", encoding="utf-8")
    with pytest.raises(PolicyError) as refused:
        load_policy(SCORE_POLICY, str(tmp_path / "top.yaml"))
    assert str(refused.value) == (
        f"{tmp_path / 'top.yaml'}: extends: policy file not found: {tmp_path / 'gone.yaml'}"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"- a\n", "a policy must be a YAML mapping"),
        (b"description: caf\xe9\n", "cannot read ('utf-8' codec can't decode byte 0xe9"),
    ],
)
def test_a_file_that_is_no_policy_is_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_bytes(content)
    with pytest.raises(PolicyError) as refused:
        load_policy(SCORE_POLICY, str(path))
    assert str(refused.value).startswith(f"{path}: {message}")
