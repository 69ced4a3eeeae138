"""What fusion does for a component beyond calling its macro follows its header, not its name: a
plugin normaliser that `fills_candidates` (as borda does) or `needs` the list's quantiles (as
quantile does), and an `additive` fusion method, get the built-ins' treatment. Fused scores of
the hand log of test_components.py, computed by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from duckscore.core.errors import PolicyError
from duckscore.core.policy import load_policy
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSE_RECIPE, load_recipe, plan

from ..helpers import ROOT
from .test_components import hand_log, plugin_recipe

# the hand log's lists, aligned by max on documents: q1's a ranks p1 (3.0) above p2 (2.0), b p2
# (0.5) above p3 (0.25), so q1's candidates are p1, p2, p3; q2's a and b hold p4 alone (4.0, 1.0)
RECIPE = """\
plugins: [plugins]
source_defaults: {{top_k: null, normalize: {normalize}, weight: 1.0, distance: false}}
aligner: {{method: max, top_n: null, decay: 0.5, order: before_fusion}}
fusion: {{method: {method}, k: 60, rank_base: 1, missing: {missing}}}
normalizer_params: {{quantile_p_lo: 0.25, quantile_p_hi: 0.75}}
"""
# a plugin that fills missing candidates as borda does: ŝ = 1/r, a missing candidate 1/(n + 1),
# as if ranked just after the list's n items
AFTER_THE_LIST = """\
{#-
kind: normalizer
name: after_the_list
description: "1/r; a candidate the list misses 1/(n + 1)"
fills_candidates: true
-#}
{% macro after_the_list(params, missing=false) -%}
{% if missing %}{{ 1.0 | lit }} / NULLIF(ql.list_n + 1, 0){% else %}{{ 1.0 | lit }} / NULLIF(list_rank, 0){% endif %}
{%- endmacro %}
"""
# a plugin over the list's quantiles (P25, P75 here): (s - P25) / (P75 - P25), 0.5 when equal
INTERQUARTILE = """\
{#-
kind: normalizer
name: interquartile
description: "(s - P_lo) / (P_hi - P_lo), 0.5 for a list whose quantiles are equal"
needs: [s_q_lo, s_q_hi]
-#}
{% macro interquartile(params) -%}
CASE WHEN s_q_hi > s_q_lo THEN (raw_score - s_q_lo) / NULLIF(s_q_hi - s_q_lo, 0) ELSE {{ 0.5 | lit }} END
{%- endmacro %}
"""
# a weighted sum, declared additive or not: the same SQL, with and without the grid
WEIGHTED_TOTAL = """\
{{#-
kind: fusion
name: {name}
description: "sum of w s"
default_missing: zero
weighted: true
{declared}-#}}
{{% macro {name}(params, source_sum) -%}}
{{{{ source_sum('weight * contribution') }}}}
{{%- endmacro %}}
"""


def fused(tmp_path: Path, plugins: dict[str, str], **recipe: str) -> dict[tuple[str, str], Any]:
    """(query, item) -> (fused_score, n_sources, contributions) of the hand log."""
    text = RECIPE.format(**({"method": "combsum", "missing": "default"} | recipe))
    tmp_path.mkdir(parents=True, exist_ok=True)
    fuse(hand_log(tmp_path), tmp_path / "out", recipe=str(plugin_recipe(tmp_path, plugins, text)))
    rows = duckdb.execute(
        "SELECT query_id, item_id, fused_score, n_sources, contributions "
        f"FROM '{tmp_path / 'out' / 'fused.parquet'}'"
    ).fetchall()
    return {(q, i): (score, n, contributions) for q, i, score, n, contributions in rows}


def scores(found: dict[tuple[str, str], Any]) -> dict[tuple[str, str], float]:
    return {key: value[0] for key, value in found.items()}


def test_a_plugin_that_fills_candidates_makes_them_present_at_its_missing_score(
    tmp_path: Path,
) -> None:
    """combsum over 1/r, a candidate a list misses at 1/(n + 1): q1's p3 is missing from a
    (n = 2), p1 from b (n = 2); both count as present, with NULL raw scores."""
    found = fused(tmp_path, {"after_the_list.sql": AFTER_THE_LIST}, normalize="after_the_list")
    assert scores(found) == pytest.approx(
        {
            ("q1", "p1"): 1.0 + 1 / 3,  # a: rank 1; b: missing
            ("q1", "p2"): 1 / 2 + 1.0,  # a: rank 2; b: rank 1
            ("q1", "p3"): 1 / 3 + 1 / 2,  # a: missing; b: rank 2
            ("q2", "p4"): 2.0,
        },
        abs=1e-12,
    )
    assert {key: value[1] for key, value in found.items()} == dict.fromkeys(found, 2)
    b_of_p1 = next(c for c in found[("q1", "p1")][2] if c["source"] == "b")
    assert (b_of_p1["raw_score"], b_of_p1["norm_score"]) == (None, pytest.approx(1 / 3))


def test_a_copy_of_borda_under_another_name_fuses_as_borda(tmp_path: Path) -> None:
    """The built-in's file renamed, its recipe key a parameter, is a plugin: its scores are
    borda's, which by hand are 1 - (r - 1)/|C| held and 0.5 - (n - 1)/(2|C|) missing (q1:
    |C| = 3, n = 2; q2: |C| = 1)."""
    text = (ROOT / "sql/fuse/components/normalizer/borda.sql").read_text(encoding="utf-8")
    copy = (
        text.replace("name: borda", "name: my_borda")
        .replace("macro borda(", "macro my_borda(")
        .replace(
            "recipe_keys: [normalizer_params.borda_points]",
            "parameters: {borda_points: {type: boolean, default: false}}",
        )
    )
    mine = fused(tmp_path / "mine", {"my_borda.sql": copy}, normalize="my_borda")
    builtin = fused(tmp_path / "builtin", {"my_borda.sql": copy}, normalize="borda")
    assert mine == builtin
    assert scores(mine) == pytest.approx(
        {
            ("q1", "p1"): 1.0 + 1 / 3,
            ("q1", "p2"): 2 / 3 + 1.0,
            ("q1", "p3"): 1 / 3 + 2 / 3,
            ("q2", "p4"): 2.0,
        },
        abs=1e-12,
    )


def test_a_plugin_that_fills_candidates_is_refused_by_ltr(tmp_path: Path) -> None:
    """ltr reads a list's present@ as returned, which a filled list is not."""
    text = RECIPE.format(normalize="after_the_list", method="ltr", missing="default")
    model = "{features: [present@a], model: {kind: linear, intercept: 0.0, weights: [1.0]}}"
    text += f"sources: {{a: {{}}}}\nltr: {model}\n"
    recipe = plugin_recipe(tmp_path, {"after_the_list.sql": AFTER_THE_LIST}, text)
    with pytest.raises(
        PolicyError,
        match=r": sources.a.normalize: after_the_list makes every candidate present in the list",
    ):
        load_policy(FUSE_RECIPE, str(recipe))


def test_a_plugin_that_needs_the_quantiles_reads_them(tmp_path: Path) -> None:
    """P25 and P75 of two values lo < hi are lo + (hi - lo)/4 and lo + 3(hi - lo)/4: q1's a
    [2, 3] gives 2.25 and 2.75, b [0.25, 0.5] 0.3125 and 0.4375; q2's lists of one value are
    at 0.5."""
    found = fused(tmp_path, {"interquartile.sql": INTERQUARTILE}, normalize="interquartile")
    assert scores(found) == pytest.approx(
        {
            ("q1", "p1"): (3.0 - 2.25) / 0.5,
            ("q1", "p2"): (2.0 - 2.25) / 0.5 + (0.5 - 0.3125) / 0.125,
            ("q1", "p3"): (0.25 - 0.3125) / 0.125,
            ("q2", "p4"): 0.5 + 0.5,
        },
        abs=1e-12,
    )


@pytest.mark.parametrize("additive", [True, False])
def test_an_additive_fusion_needs_no_grid_and_fuses_as_with_it(
    tmp_path: Path, additive: bool
) -> None:
    """A sum of w s under missing: zero: declared additive, the plan has no grid (the lists
    without an item are no rows); not declared, the grid's rows at 0; the same scores, by hand
    the sum of the raw scores (normaliser none, weights 1)."""
    name = "total" if additive else "grid_total"
    text = WEIGHTED_TOTAL.format(name=name, declared="additive: true\n" if additive else "")
    found = fused(tmp_path, {f"{name}.sql": text}, normalize="none", method=name, missing="zero")
    loaded = load_recipe(str(tmp_path / "recipe.yaml"))
    assert plan(loaded, ["a", "b"], has_rank=True).needs_grid is not additive
    assert found == {
        ("q1", "p1"): (3.0, 1, [contribution("a", "a1", 3.0, 1)]),
        ("q1", "p2"): (2.5, 2, [contribution("a", "a3", 2.0, 2), contribution("b", "b1", 0.5, 1)]),
        ("q1", "p3"): (0.25, 1, [contribution("b", "b2", 0.25, 2)]),
        ("q2", "p4"): (5.0, 2, [contribution("a", "a4", 4.0, 1), contribution("b", "b3", 1.0, 1)]),
    }


def contribution(source: str, original_id: str, score: float, rank: int) -> dict[str, Any]:
    return {"source": source, "original_id": original_id, "raw_score": score,
            "norm_score": score, "rank": rank, "weight": 1.0, "contribution": score}  # fmt: skip
