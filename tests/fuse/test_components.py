"""The component registry (issue 48 §3): plugins of every kind, written here, fused on a hand log
whose fused scores are computed by hand; what a recipe records of its plugins; entry points;
`duckscore policy components`; and every refusal, one line naming the file or the key."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.errors import DuckscoreError, PolicyError
from duckscore.core.policy import load_policy
from duckscore.fusion import component_file, components, plugins
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSE_RECIPE, NORMALIZERS, load_recipe, plan, recipe_record

from ..helpers import ROOT

EXAMPLE = ROOT / "examples" / "plugins"
AFFINE = """\
{#-
kind: normalizer
name: affine
description: "slope s + offset"
parameters:
  slope: {type: number}
  offset: {type: number, default: 0.0}
-#}
{% macro affine(params) -%}
{{ params.slope | lit }} * raw_score + {{ params.offset | lit }}
{%- endmacro %}
"""
L2_OF_HITS = """\
{#- {kind: aligner, name: l2_of_hits, description: "the root of the sum of squared hits"} -#}
{% macro l2_of_hits(params, value) -%}
sqrt(sum({{ value }} * {{ value }}))
{%- endmacro %}
"""
WSUM_PLUS_COUNT = """\
{#-
kind: fusion
name: wsum_plus_count
description: "sum of w s, plus bonus per list holding the item"
default_missing: skip
weighted: true
parameters:
  bonus: {type: number, min: 0, max: 1, default: 0.0}
-#}
{% macro wsum_plus_count(params, source_sum) -%}
{{ source_sum('weight * contribution') }} + {{ params.bonus | lit }} * count(*) FILTER (WHERE present)
{%- endmacro %}
"""
MIN_WORDS = """\
{#-
kind: query_rule
name: min_words
description: "the query has at least n words"
parameters:
  n: {type: integer, min: 1, default: 3}
-#}
{% macro min_words(params, query_text) -%}
len(string_split(trim({{ query_text }}), ' ')) >= {{ params.n | lit }}
{%- endmacro %}
"""
ALL_KINDS = {
    "affine.sql": AFFINE,
    "l2_of_hits.sql": L2_OF_HITS,
    "wsum_plus_count.sql": WSUM_PLUS_COUNT,
    "min_words.sql": MIN_WORDS,
}
RECIPE = """\
recipe_id: all_kinds_v1
plugins: [plugins]
source_defaults: {top_k: null, normalize: affine, weight: 1.0, distance: false}
aligner: {method: l2_of_hits, top_n: null, decay: 0.5, order: before_fusion}
fusion: {method: wsum_plus_count, k: 60, rank_base: 1, missing: default}
component_params:
  affine: {slope: 2, offset: 1}
  wsum_plus_count: {bonus: 0.5}
query_analyzer:
  enabled: true
  rules: [{rule: min_words, params: {n: 3}, boost: {b: 2.0}}]
"""
# (query_id, query_text, source, item_id, parent_id, score, rank)
HITS = [
    ("q1", "find the red error code", "a", "a1", "p1", 3.0, 1),
    ("q1", "find the red error code", "a", "a2", "p1", 1.0, 2),
    ("q1", "find the red error code", "a", "a3", "p2", 2.0, 3),
    ("q1", "find the red error code", "b", "b1", "p2", 0.5, 1),
    ("q1", "find the red error code", "b", "b2", "p3", 0.25, 2),
    ("q2", "short", "a", "a4", "p4", 4.0, 1),
    ("q2", "short", "b", "b3", "p4", 1.0, 1),
]
# by hand: aligned = sqrt(sum of squared hits), normalised 2 s + 1, fused Σ w s + 0.5 n_d, with
# b's weight 2 on q1 (five words, at least 3) and 1 on q2 (one word)
EXPECTED = {
    ("q1", "p1"): (2 * math.sqrt(10.0) + 1) + 0.5,  # a: √(9 + 1)
    ("q1", "p2"): 1 * 5.0 + 2 * 2.0 + 2 * 0.5,  # a: 2, b: 0.5
    ("q1", "p3"): 2 * 1.5 + 0.5,  # b: 0.25
    ("q2", "p4"): 9.0 + 3.0 + 2 * 0.5,  # a: 4, b: 1
}


def plugin_recipe(folder: Path, plugins: dict[str, str] = ALL_KINDS, recipe: str = RECIPE) -> Path:
    (folder / "plugins").mkdir(parents=True, exist_ok=True)
    for name, text in plugins.items():
        (folder / "plugins" / name).write_text(text, encoding="utf-8")
    path = folder / "recipe.yaml"
    path.write_text(recipe, encoding="utf-8")
    return path


def hand_log(folder: Path) -> Path:
    path = folder / "log.parquet"
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE hits (query_id VARCHAR, query_text VARCHAR, source VARCHAR, "
        "item_id VARCHAR, parent_id VARCHAR, score DOUBLE, rank BIGINT)"
    )
    con.executemany("INSERT INTO hits VALUES (?, ?, ?, ?, ?, ?, ?)", HITS)
    con.execute(f"COPY hits TO '{path}' (FORMAT parquet)")
    return path


def test_a_plugin_of_every_kind_fuses_as_computed_by_hand(tmp_path: Path) -> None:
    result = fuse(hand_log(tmp_path), tmp_path / "out", recipe=str(plugin_recipe(tmp_path)))
    rows = duckdb.execute(
        f"SELECT query_id, item_id, fused_score FROM '{tmp_path / 'out' / 'fused.parquet'}'"
    ).fetchall()
    assert {(q, i): s for q, i, s in rows} == pytest.approx(EXPECTED, abs=1e-12)
    used = {(c["kind"], c["name"]): c for c in result.manifest["components"]}
    assert sorted(used) == [
        ("aligner", "l2_of_hits"),
        ("fusion", "wsum_plus_count"),
        ("normalizer", "affine"),
        ("query_rule", "min_words"),
    ]
    assert used[("normalizer", "affine")]["origin"] == "plugins/affine.sql"
    assert used[("normalizer", "affine")]["sha256"] == components.sha256_of(AFFINE)


def test_a_plugins_parameters_reach_its_sql(tmp_path: Path) -> None:
    # the rule's n above q1's five words: no boost, b weighs 1 on q1 too
    recipe = plugin_recipe(tmp_path)
    out = fuse(
        hand_log(tmp_path),
        tmp_path / "out",
        recipe=str(recipe),
        overrides=["query_analyzer.rules=[{rule: min_words, params: {n: 6}, boost: {b: 2.0}}]"],
    )
    assert out.fused_rows == 4
    rows = duckdb.execute(
        f"SELECT query_id, item_id, fused_score FROM '{tmp_path / 'out' / 'fused.parquet'}'"
    ).fetchall()
    assert {(q, i): s for q, i, s in rows}[("q1", "p2")] == pytest.approx(5.0 + 2.0 + 1.0)


def test_the_recipe_records_each_plugin_file_as_given_with_its_sha256(tmp_path: Path) -> None:
    loaded = load_policy(FUSE_RECIPE, str(plugin_recipe(tmp_path)))
    recorded = loaded.parameters["plugins"]
    assert [e["path"] for e in recorded] == [f"plugins/{name}" for name in sorted(ALL_KINDS)]
    assert [e["sha256"] for e in recorded] == [
        components.sha256_of(ALL_KINDS[name]) for name in sorted(ALL_KINDS)
    ]


def test_the_record_follows_a_plugins_text_not_the_checkout(tmp_path: Path) -> None:
    here = load_recipe(str(plugin_recipe(tmp_path / "here")))
    there = load_recipe(str(plugin_recipe(tmp_path / "there")))
    assert recipe_record(here)["parameters_sha256"] == recipe_record(there)["parameters_sha256"]
    edited = {**ALL_KINDS, "affine.sql": AFFINE.replace("slope s", "slope times s")}
    changed = load_recipe(str(plugin_recipe(tmp_path / "edited", edited)))
    assert recipe_record(changed)["parameters_sha256"] != recipe_record(here)["parameters_sha256"]


def test_set_recipe_plugins_reads_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLE / "components", tmp_path / "mine")
    monkeypatch.chdir(tmp_path)
    loaded = load_policy(
        FUSE_RECIPE,
        "hybrid_v1",
        ["plugins=[mine/tanh_scaled.sql]", "source_defaults.normalize=tanh_scaled"],
    )
    digest = components.sha256_of((tmp_path / "mine" / "tanh_scaled.sql").read_text())
    assert loaded.parameters["plugins"] == [{"path": "mine/tanh_scaled.sql", "sha256": digest}]
    # the overrides are the version's suffix: another text, another version
    assert loaded.overrides["plugins"] == loaded.parameters["plugins"]


def test_a_recorded_plugin_whose_file_changed_is_refused(tmp_path: Path) -> None:
    recipe = plugin_recipe(tmp_path, {"affine.sql": AFFINE}, RECIPE_AFFINE)
    recorded = load_policy(FUSE_RECIPE, str(recipe)).parameters["plugins"].thawed()
    (tmp_path / "plugins" / "affine.sql").write_text(AFFINE + "\n", encoding="utf-8")
    again = RECIPE_AFFINE.replace("plugins: [plugins]", f"plugins: {json.dumps(recorded)}")
    recipe.write_text(again, encoding="utf-8")
    with pytest.raises(
        PolicyError, match=r"plugins\[0\]: .*affine.sql has sha256 .* the file changed"
    ):
        load_policy(FUSE_RECIPE, str(recipe))


RECIPE_AFFINE = """\
recipe_id: affine_v1
plugins: [plugins]
source_defaults: {top_k: null, normalize: affine, weight: 1.0, distance: false}
component_params: {affine: {slope: 2}}
"""


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, target: Any, value: str) -> None:
    point = SimpleNamespace(name="mine", value=value, load=lambda: target)

    def entry_points(group: str) -> list[Any]:
        return [point] if group == plugins.ENTRY_POINT_GROUP else []

    monkeypatch.setattr(plugins.importlib.metadata, "entry_points", entry_points)


@pytest.mark.parametrize("as_callable", [False, True])
def test_an_entry_points_components_are_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_callable: bool
) -> None:
    folder = tmp_path / "package" / "components"
    folder.mkdir(parents=True)
    (folder / "l2_of_hits.sql").write_text(L2_OF_HITS, encoding="utf-8")
    fake_entry_points(monkeypatch, (lambda: folder) if as_callable else str(folder), "pkg:where")
    fused = plan(load_recipe("hybrid_v1", ["aligner.method=l2_of_hits"]), ["a", "b"], True)
    [record] = fused.components.records()
    assert record["origin"] == "entry point mine (pkg:where): l2_of_hits.sql"
    assert record["sha256"] == components.sha256_of(L2_OF_HITS)
    assert "sqrt(sum(score * score))" in fused.context["components"]["aligner"]["l2_of_hits"](
        "score"
    )


def test_an_entry_point_that_fails_to_load_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise ImportError("no module named mine")

    fake_entry_points(monkeypatch, broken, "mine:path")
    with pytest.raises(
        PolicyError,
        match=r": entry point mine \(mine:path\): cannot load \(ImportError: no module named mine\)$",
    ):
        load_policy(FUSE_RECIPE, "hybrid_v1")


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_policy_components_lists_the_builtins_and_a_recipes_plugins(tmp_path: Path) -> None:
    listed = invoke("policy", "components", "--kind", "normalizer")
    assert listed.exit_code == 0, listed.output
    names = [line.split()[1] for line in listed.stdout.splitlines() if not line.startswith(" ")]
    assert names == list(NORMALIZERS)
    assert "    normalizer_params.eps: number in (0, 1], default 1e-09" in listed.stdout
    shown = invoke("policy", "components", "--recipe", str(plugin_recipe(tmp_path)), "--json")
    assert shown.exit_code == 0, shown.output
    by_name = {c["name"]: c for c in json.loads(shown.stdout)}
    assert by_name["affine"]["origin"] == "plugins/affine.sql"
    assert by_name["affine"]["parameters"] == [
        {"name": "slope", "type": "number", "min": None, "max": None, "min_open": False,
         "max_open": False, "required": True, "default": None},
        {"name": "offset", "type": "number", "min": None, "max": None, "min_open": False,
         "max_open": False, "required": False, "default": 0.0},
    ]  # fmt: skip
    assert (by_name["wsum_plus_count"]["default_missing"], by_name["rrf"]["weighted"]) == (
        "skip",
        True,
    )
    text = invoke(
        "policy", "components", "--kind", "query_rule", "--recipe", str(tmp_path / "recipe.yaml")
    )
    assert (
        "query_rule min_words (plugins/min_words.sql): the query has at least n words"
        in text.stdout
    )
    assert "    n: integer in [1, inf), default 3" in text.stdout


def header(kind: str, name: str, extra: str = "") -> str:
    return f"{{#-\nkind: {kind}\nname: {name}\ndescription: a test\n{extra}-#}}\n"


def odd(kind: str, body: str, extra: str = "", name: str = "odd", args: str = "") -> dict[str, str]:
    """A plugin file odd.sql of `kind` whose macro, odd(params, <its kind's inputs>) unless
    `args`, returns `body`."""
    arguments = args or ", ".join(("params", *components.INPUTS[kind]))
    macro = f"{{% macro odd({arguments}) -%}}{body}{{%- endmacro %}}\n"
    return {"odd.sql": header(kind, name, extra) + macro}


# (files, overrides, the one-line error): every refusal names where it is
REFUSALS = {
    "unknown component": (
        {}, ["source_defaults.normalize=nope"],
        r"source_defaults.normalize: 'nope' is not one of borda, bounds, .*, zscore$",
    ),
    "unknown plugin fusion": (
        {}, ["fusion.method=dismaxx"], r"fusion.method: 'dismaxx' is not one of arithmetic_mean, .*, ltr$",
    ),
    "parameter out of bounds": (
        {"affine.sql": AFFINE},
        ["source_defaults.normalize=affine", "component_params.affine={slope: 1, offset: .inf}"],
        r"component_params.affine.offset: expected a finite number, got inf$",
    ),
    "parameter of the wrong type": (
        {"wsum_plus_count.sql": WSUM_PLUS_COUNT},
        ["fusion.method=wsum_plus_count", "component_params.wsum_plus_count={bonus: 2}"],
        r"component_params.wsum_plus_count.bonus: 2 is outside \[0, 1\]$",
    ),
    "unknown parameter": (
        {"affine.sql": AFFINE},
        ["source_defaults.normalize=affine", "component_params.affine={slope: 1, slop: 2}"],
        r"component_params.affine.slop: normalizer affine has no parameter 'slop' "
        r"\(parameters: slope, offset\)$",
    ),
    "required parameter missing": (
        {"affine.sql": AFFINE}, ["source_defaults.normalize=affine"],
        r"component_params.affine.slope is required by normalizer affine \(.*affine.sql\), "
        r"which gives it no default$",
    ),
    "parameters of a built-in": (
        {}, ["component_params.minmax={eps: 0.1}"],
        r"component_params: minmax is built in; it reads the recipe's own keys "
        r"\(normalizer_params.eps, .*\), not component_params$",
    ),
    "parameters of no plugin": (
        {}, ["component_params.nothing={x: 1}"],
        r"component_params: no plugin is named 'nothing' \(plugins: none\)$",
    ),
    "a built-in's name": (
        {"minmax.sql": header("normalizer", "minmax") + "{% macro minmax(params) %}raw_score{% endmacro %}"},
        [], r"normalizer minmax \(.*plugins/minmax.sql\) has the name of normalizer minmax \(built-in\)",
    ),
    "two plugins of one name": (
        {"a.sql": odd("normalizer", "raw_score")["odd.sql"], "b.sql": odd("aligner", "max(score)")["odd.sql"]},
        [], r"aligner odd \(.*plugins/b.sql\) has the name of normalizer odd \(.*plugins/a.sql\): rename one$",
    ),
    "no header": (
        {"odd.sql": "{% macro odd(params) %}raw_score{% endmacro %}"}, [],
        r"plugins/odd.sql: a component file starts with a .* header",
    ),
    "header without a kind": (
        {"odd.sql": "{#- {name: odd, description: x} -#}\n{% macro odd(params) %}s{% endmacro %}"}, [],
        r"plugins/odd.sql: the header needs `kind`$",
    ),
    "unknown kind": (
        {"odd.sql": header("scorer", "odd") + "{% macro odd(params) %}s{% endmacro %}"}, [],
        r"plugins/odd.sql: kind: 'scorer' is not one of normalizer, aligner, fusion, query_rule$",
    ),
    "name is not the macro's": (
        odd("normalizer", "raw_score", name="even"), [],
        r"plugins/odd.sql: must define one macro, even \(private helpers start with _\), not odd$",
    ),
    "unknown parameter type": (
        odd("normalizer", "raw_score", "parameters: {x: {type: float}}\n"),
        [], r"plugins/odd.sql: parameters.x.type: 'float' is not one of number, integer, boolean, choice$",
    ),
    "default out of bounds": (
        odd("normalizer", "raw_score", "parameters: {x: {type: number, max: 1, default: 2}}\n"),
        [], r"plugins/odd.sql: parameters.x.default: 2 is outside \[-inf, 1\]$",
    ),
    "a choice's default not a choice": (
        odd("normalizer", "raw_score", "parameters: {m: {type: choice, choices: [a, b], default: c}}\n"),
        [], r"plugins/odd.sql: parameters.m.default: 'c' is not one of a, b$",
    ),
    "a fusion without its missing policy": (
        odd("fusion", "max(contribution)"),
        [], r"plugins/odd.sql: a fusion method declares default_missing \(zero or skip\)$",
    ),
    "a macro taking other arguments": (
        odd("aligner", "max(score)", args="params"),
        [], r"plugins/odd.sql: macro odd\(params\): aligner macros take \(params, value\)$",
    ),
    "a fusion macro's third argument not contribution": (
        odd("fusion", "max(contribution)", "default_missing: skip\n", args="params, source_sum, extra=false"),
        [], r"plugins/odd.sql: macro odd\(params, source_sum, extra\): fusion macros take "
        r"\(params, source_sum, \[contribution=false\]\)$",
    ),
    "ranks on a normaliser": (
        odd("normalizer", "raw_score", "ranks: true\n"),
        [], r"plugins/odd.sql: ranks is declared by a fusion method only$",
    ),
    "additive on a normaliser": (
        odd("normalizer", "raw_score", "additive: true\n"),
        [], r"plugins/odd.sql: additive is declared by a fusion method only$",
    ),
    "fills_candidates on a fusion method": (
        odd("fusion", "max(contribution)", "default_missing: skip\nfills_candidates: true\n"),
        [], r"plugins/odd.sql: fills_candidates is declared by a normaliser only$",
    ),
    "additive not a flag": (
        odd("fusion", "max(contribution)", "default_missing: skip\nadditive: 1\n"),
        [], r"plugins/odd.sql: additive: expected true or false, got 1$",
    ),
    "fills_candidates not a flag": (
        odd("normalizer", "raw_score", "fills_candidates: [borda]\n"),
        [], r"plugins/odd.sql: fills_candidates: expected true or false, got \['borda'\]$",
    ),
    "needs an unknown column": (
        odd("normalizer", "raw_score", "needs: [s_q_mid]\n"),
        [], r"plugins/odd.sql: needs: expected a list of n_candidates, s_q_lo, s_q_hi, got \['s_q_mid'\]$",
    ),
    "fills_candidates without a missing argument": (
        odd("normalizer", "raw_score", "fills_candidates: true\n"),
        [], r"plugins/odd.sql: macro odd\(params\): a normaliser that fills_candidates takes "
        r"\(params, missing=false\)$",
    ),
    "a missing score reading a column of both sides of the grid": (
        odd("normalizer", "{% if missing %}list_n{% else %}raw_score{% endif %}",
            "fills_candidates: true\n", args="params, missing=false"),
        ["source_defaults.normalize=odd"],
        r"source_defaults.normalize: .*plugins/odd.sql: Column 'list_n' could not be resolved.*"
        r"\(inputs: candidates\(",
    ),
    "recipe_keys on a plugin": (
        odd("normalizer", "raw_score", "recipe_keys: [normalizer_params.eps]\n"),
        [], r"plugins/odd.sql: unknown header key 'recipe_keys' ",
    ),
    "a contribution reading an unknown column": (
        odd("fusion", "{% if contribution %}present{% else %}max(contribution){% endif %}",
            "default_missing: skip\n", args="params, source_sum, contribution=false"),
        ["fusion.method=odd"], r"fusion.method: .*plugins/odd.sql: .*present.*\(inputs: grid\(",
    ),
    "required_keys on a plugin": (
        odd("normalizer", "raw_score", "required_keys: [normalizer_params.eps]\n"),
        [], r"plugins/odd.sql: unknown header key 'required_keys' ",
    ),
    "bounds without its bounds": (
        {}, ["sources.a.normalize=bounds"],
        r"normalizer_params.bounds is required by sources.a.normalize: bounds$",
    ),
    "bounds of no spread": (
        {}, ["normalizer_params.bounds=[1, 1]"],
        r"normalizer_params.bounds: lo \(1(\.0)?\) must be below hi \(1(\.0)?\)$",
    ),
    "minmax's bound on a plugin's source": (
        odd("normalizer", "raw_score"),
        ["sources.a.normalize=odd", "sources.a.lower_bound={mode: apply, score: 0.3}"],
        r"sources.a.lower_bound needs normalize: minmax, not odd$",
    ),
    "a first rank of no denominator": (
        {}, ["fusion.k=0.5", "fusion.rank_base=0"],
        r"fusion.k - 1 \+ fusion.rank_base must be positive \(the first rank's denominator\)$",
    ),
    "quantiles out of order": (
        {}, ["normalizer_params.quantile_p_lo=0.9"],
        r"normalizer_params.quantile_p_lo must be below quantile_p_hi$",
    ),
    "a Jinja syntax error": (
        odd("normalizer", "{{ raw_score "),
        [], r"plugins/odd.sql:6: ",
    ),
    "plugin SQL failing the lint": (
        odd("normalizer", "log(raw_score)"),
        ["source_defaults.normalize=odd"],
        r"source_defaults.normalize: .*plugins/odd.sql: bare log\(x\) is base 10 in DuckDB",
    ),
    "plugin SQL reading the quantiles it does not declare": (
        odd("normalizer", "raw_score - s_q_lo", "needs: [s_q_hi]\n"),
        ["source_defaults.normalize=odd"],
        r"source_defaults.normalize: .*plugins/odd.sql: .*s_q_lo.*\(inputs: list_stats\(",
    ),
    "plugin SQL reading an unknown column": (
        odd("normalizer", "n_candidates"),
        ["source_defaults.normalize=odd"],
        r"source_defaults.normalize: .*plugins/odd.sql: .*n_candidates.*\(inputs: list_stats\(",
    ),
    "plugin SQL with a bare decimal": (
        odd("normalizer", "raw_score * 0.5"),
        ["source_defaults.normalize=odd"],
        r"plugins/odd.sql: decimal literal 0.5 is DECIMAL in DuckDB; render values with `\| lit`",
    ),
    "plugin Jinja reading an undeclared parameter": (
        odd("normalizer", "{{ params.scale | lit }}"),
        ["source_defaults.normalize=odd"],
        r"source_defaults.normalize: .*plugins/odd.sql: 'dict object' has no attribute 'scale'$",
    ),
    "a rule with match and rule": (
        {"min_words.sql": MIN_WORDS},
        ["query_analyzer.rules=[{match: a, rule: min_words, boost: {}}]"],
        r"query_analyzer.rules\[0\]: give `match` \(an RE2 pattern\) or `rule` \(a query rule\), one$",
    ),
    "a rule naming no query rule": (
        {"affine.sql": AFFINE}, ["query_analyzer.rules=[{rule: affine, boost: {}}]"],
        r"query_analyzer.rules\[0\].rule: 'affine' is not one of match$",
    ),
    "no such plugin file": (
        {}, ["plugins=[nowhere.sql]"], r"^--set-recipe: plugins\[0\]: no component file or folder .*nowhere.sql$",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(REFUSALS))
def test_a_bad_plugin_or_value_is_one_line_naming_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, overrides, message = REFUSALS[name]
    monkeypatch.chdir(tmp_path)
    recipe = "hybrid_v1"
    if files:
        recipe = str(plugin_recipe(tmp_path, files, "plugins: [plugins]\n"))
    with pytest.raises(DuckscoreError) as refused:
        load_policy(FUSE_RECIPE, recipe, overrides)
    assert "\n" not in str(refused.value)
    assert refused.match(message)
    result = invoke("sql", "fuse", "--sources", "a,b", "--recipe", recipe,
                    *(f"--set-recipe={o}" for o in overrides))  # fmt: skip
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.output


def test_every_builtin_is_registered_with_a_description() -> None:
    registered = plugins.builtins().components.values()
    assert {c.kind for c in registered} == set(components.KINDS)
    assert all(c.builtin and c.description for c in registered)
    assert [c.name for c in registered if c.kind == "aligner"] == [
        "max", "max_decay", "mean", "sum", "sum_top_n"
    ]  # fmt: skip


def test_every_builtin_macro_compiles_and_takes_its_kinds_inputs() -> None:
    """What parsing checks of a plugin's macro, checked of the built-ins here: reading them
    leaves their macros to be compiled on first use (every command reads the registry)."""
    with_sql = [c for c in plugins.builtins().components.values() if c.text is not None]
    assert len(with_sql) >= 30
    for component in with_sql:
        component_file.check_macro(component)
    first = with_sql[0]
    assert first.text is not None and "(params," in first.text
    changed = replace(first, text=first.text.replace("(params,", "(params, extra_input,", 1))
    with pytest.raises(PolicyError, match=rf"^{first.location}: macro {first.macro_name}\("):
        component_file.check_macro(changed)


def test_every_builtin_but_ltr_is_a_component_file_listed_with_its_path() -> None:
    """Each built-in normaliser, aligner, fusion method and query rule is the file
    sql/fuse/components/<kind>/<name>.sql, its macro called as a plugin's is; ltr, which has no
    SQL expression of its own, is builtins.yaml's."""
    listed = json.loads(invoke("policy", "components", "--json").stdout)
    files = {(c["kind"], c["name"]): c.get("file") for c in listed if c["origin"] == "built-in"}
    assert [key for key, file in files.items() if file is None] == [("fusion", "ltr")]
    assert files[("query_rule", "match")] == "sql/fuse/components/query_rule/match.sql"
    for (kind, name), file in files.items():
        if file is not None:
            assert file == f"sql/fuse/components/{kind}/{name}.sql"
            assert (ROOT / file).is_file()
    shown = invoke("policy", "components", "--kind", "aligner").stdout
    assert "aligner max (built-in, sql/fuse/components/aligner/max.sql): " in shown


def test_a_builtins_required_key_is_one_it_reads() -> None:
    declared = {"kind": "normalizer", "name": "odd", "description": "odd"}
    declared |= {"recipe_keys": ["normalizer_params.eps"]}
    found = component_file.declared_component(
        declared | {"required_keys": ["normalizer_params.eps"]}, "odd", "built-in", builtin=True
    )
    assert found.required_keys == ("normalizer_params.eps",)
    with pytest.raises(PolicyError, match=r"^odd: required_keys: normalizer_params.bounds is not"):
        component_file.declared_component(
            declared | {"required_keys": ["normalizer_params.bounds"]},
            "odd",
            "built-in",
            builtin=True,
        )


def test_a_builtin_reads_its_recipe_keys_and_a_source_its_own_bounds() -> None:
    """minmax's params are its recipe keys' values, a source's lower_bound among them for that
    source alone; a key left out of the recipe is left out of params."""
    recipe = load_recipe(
        "hybrid_v1",
        [
            "discover_sources=false",
            "sources={a: {normalize: minmax, lower_bound: {mode: clip, score: 0.25}}, "
            "b: {normalize: minmax}}",
            "normalizer_params.eps=0.001",
        ],
    )
    minmax = plan(recipe, ["a", "b"], True).context["components"]["normalizer"]["minmax"]
    assert minmax.params == {"eps": 0.001, "degenerate_value": 0.0}
    assert minmax.of_source(recipe.policy.parameters["sources"]["a"]).params == {
        "eps": 0.001,
        "degenerate_value": 0.0,
        "lower_bound": {"mode": "clip", "score": 0.25},
    }
    assert minmax.of_source(recipe.policy.parameters["sources"]["b"]).params == minmax.params


INVERSE_RANK = """\
{#-
kind: fusion
name: inverse_rank
description: "sum of scale / r over the lists holding the item"
default_missing: zero
ranks: true
parameters:
  scale: {type: number, min: 0, min_open: true, default: 1.0}
-#}
{% macro inverse_rank(params, source_sum, contribution=false) -%}
{% if contribution -%}
{{ params.scale | lit }} / NULLIF(rank_for_fusion, 0)
{%- else -%}
{{ source_sum('contribution') }}
{%- endif %}
{%- endmacro %}
"""


def test_a_fusion_plugin_over_ranks_gives_its_own_contribution(tmp_path: Path) -> None:
    """`ranks: true` and a macro taking `contribution`: each list's contribution is scale / r,
    r the item's rank in the list (aligned by max, ranked by that score), a list without the
    item none (missing: zero over ranks counts real hits), as rrf and isr do."""
    recipe = plugin_recipe(
        tmp_path,
        {"inverse_rank.sql": INVERSE_RANK},
        "plugins: [plugins]\n"
        "source_defaults: {top_k: null, normalize: none, weight: 1.0, distance: false}\n"
        "aligner: {method: max, top_n: null, decay: 0.5, order: before_fusion}\n"
        "fusion: {method: inverse_rank, k: 60, rank_base: 1, missing: default}\n"
        "component_params: {inverse_rank: {scale: 2.0}}\n",
    )
    fuse(hand_log(tmp_path), tmp_path / "out", recipe=str(recipe))
    rows = duckdb.execute(
        "SELECT query_id, item_id, fused_score, "
        "list_transform(contributions, lambda c: c.contribution) "
        f"FROM '{tmp_path / 'out' / 'fused.parquet'}'"
    ).fetchall()
    # by hand: q1's a ranks p1 (max 3.0) then p2 (2.0), b ranks p2 (0.5) then p3 (0.25); q2's
    # lists hold p4 alone
    assert {(q, i): (s, c) for q, i, s, c in rows} == {
        ("q1", "p1"): (2.0, [2.0]),
        ("q1", "p2"): (2.0 / 2 + 2.0, [1.0, 2.0]),
        ("q1", "p3"): (2.0 / 2, [1.0]),
        ("q2", "p4"): (4.0, [2.0, 2.0]),
    }


CANDIDATE_RANK = """\
{#-
kind: normalizer
name: candidate_rank
description: "1 - (r - 1) / |C|, C the query's candidates over all lists"
needs: [n_candidates]
-#}
{% macro candidate_rank(params) -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(n_candidates, 0)
{%- endmacro %}
"""


def test_a_normaliser_that_needs_the_candidates_reads_them(tmp_path: Path) -> None:
    recipe = plugin_recipe(
        tmp_path,
        {"candidate_rank.sql": CANDIDATE_RANK},
        "plugins: [plugins]\nsource_defaults: {top_k: null, normalize: candidate_rank, "
        "weight: 1.0, distance: false}\nfusion: {method: combsum, k: 60, rank_base: 1, "
        "missing: default}\n",
    )
    fuse(hand_log(tmp_path), tmp_path / "out", recipe=str(recipe))
    rows = duckdb.execute(
        f"SELECT query_id, item_id, fused_score FROM '{tmp_path / 'out' / 'fused.parquet'}'"
    ).fetchall()
    # by hand: q1's candidates p1, p2, p3; a ranks p1 (3 + 0.5·1) above p2 (2), b p2 above p3
    expected = {
        ("q1", "p1"): 1.0,
        ("q1", "p2"): 2 / 3 + 1.0,
        ("q1", "p3"): 2 / 3,
        ("q2", "p4"): 2.0,
    }
    assert {(q, i): s for q, i, s in rows} == pytest.approx(expected, abs=1e-12)


def test_a_plugin_named_twice_is_one_component(tmp_path: Path) -> None:
    recipe = plugin_recipe(
        tmp_path,
        {"affine.sql": AFFINE},
        RECIPE_AFFINE.replace("[plugins]", "[plugins, plugins/affine.sql]"),
    )
    loaded = load_recipe(str(recipe))
    assert [e["path"] for e in loaded.plugins] == ["plugins/affine.sql"] * 2
    assert plan(loaded, ["a"], has_rank=True).components.records()[0]["name"] == "affine"
