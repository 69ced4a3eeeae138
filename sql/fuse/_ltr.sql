{#-
Learned fusion (fusion.method: ltr; orchestrator/fusion/ltr.py defines the recipe's ltr block).

ltr_feature(feature, f): one feature of a row of fused.sql's source_pivot stage (one row per
(query, item): present_<i>, raw_score_<i>, norm_score_<i>, list_rank_<i>, n_hits_<i> for the
i-th source, n_sources), query statistics as windows over the query (written out each time:
Spark reads `OVER name - x` as one hyphenated name). `feature` is
{kind, index} (index: the source's position, for a per-source kind); `f` the recipe's fusion
block. A per-source value is NULL where the source did not return the item (presence is its own
feature, present@<source>); counts are 0 there. Every value is a DOUBLE.

ltr_input(model, j): feature ltr_j as the model reads it, column model_<j> of the model_inputs
stage: for linear, a NULL counts 0; for trees, what LightGBM's predictor reads of a row (a
value with |x| <= kZeroThreshold is 0, as its dense-row reader drops it; NULL is its NaN).

ltr_score(model): the model's score of a row of model_inputs (columns model_1 … model_n):
- linear: intercept + Σ weight_j · model_j, in feature order.
- trees: Σ over the trees, in order, of the leaf each reaches, as LightGBM 4 predicts it
  (Tree::NumericalDecision): with missing type `none` a NULL reads as 0 and goes left when
  0 <= threshold; with `nan` a NULL goes to the default side (default_left); with `zero` a NULL
  and 0 (model_inputs has made every |x| <= kZeroThreshold 0) go to the default side; otherwise
  left when x <= threshold (a double), right when not. kZeroThreshold is the float 1e-35f,
  1.0000000180025095e-35. A split of the missing values from all others has the threshold inf,
  which LightGBM's dump_model() writes as 1e300: the same split for every value within ±1e300
  (a log's scores are within ±1e100, fusion/contract.py).
-#}
{% macro ltr_feature(feature, f) -%}
{% set i = feature.index %}
{% set raw = 'raw_score_' ~ i %}
{% if feature.kind == 'present' -%}
CASE WHEN present_{{ i }} THEN {{ 1.0 | lit }} ELSE {{ 0.0 | lit }} END
{%- elif feature.kind == 'rrf' -%}
CASE WHEN present_{{ i }} THEN {{ 1.0 | lit }} / (list_rank_{{ i }} + {{ (f.k - 1 + f.rank_base) | float | lit }}) END
{%- elif feature.kind == 'norm' -%}
CASE WHEN present_{{ i }} THEN norm_score_{{ i }} END
{%- elif feature.kind == 'raw' -%}
CASE WHEN present_{{ i }} THEN {{ raw }} END
{%- elif feature.kind == 'minmax' -%}
CASE WHEN present_{{ i }} THEN
    CASE WHEN max({{ raw }}) OVER (PARTITION BY query_id) > min({{ raw }}) OVER (PARTITION BY query_id)
         THEN ({{ raw }} - min({{ raw }}) OVER (PARTITION BY query_id)) / NULLIF(max({{ raw }}) OVER (PARTITION BY query_id) - min({{ raw }}) OVER (PARTITION BY query_id), 0)
         ELSE {{ 1.0 | lit }} END
END
{%- elif feature.kind == 'gap' -%}
CASE WHEN present_{{ i }} THEN max({{ raw }}) OVER (PARTITION BY query_id) - {{ raw }} END
{%- elif feature.kind == 'hits' -%}
CAST(coalesce(n_hits_{{ i }}, 0) AS DOUBLE)
{%- elif feature.kind == 'top' -%}
max({{ raw }}) OVER (PARTITION BY query_id)
{%- elif feature.kind == 'list_n' -%}
CAST(count(list_rank_{{ i }}) OVER (PARTITION BY query_id) AS DOUBLE)
{%- elif feature.kind == 'n_sources' -%}
CAST(n_sources AS DOUBLE)
{%- elif feature.kind == 'candidates' -%}
CAST(count(*) OVER (PARTITION BY query_id) AS DOUBLE)
{%- else -%}
{{ fail('unknown ltr feature ' ~ feature.kind) }}
{%- endif %}
{%- endmacro %}
{% set k_zero = 1.0000000180025095e-35 %}
{% macro ltr_input(model, j) -%}
{% if model.kind == 'linear' -%}
coalesce(ltr_{{ j }}, {{ 0.0 | lit }})
{%- else -%}
CASE WHEN abs(ltr_{{ j }}) <= {{ k_zero | lit }} THEN {{ 0.0 | lit }} ELSE ltr_{{ j }} END
{%- endif %}
{%- endmacro %}
{% macro ltr_split(tree, node) -%}
{% set x = 'model_' ~ (tree.split_feature[node] + 1) %}
{% set threshold = tree.threshold[node] | float | lit %}
{% set missing = tree.missing[node] %}
{% if missing == 'nan' and tree.default_left[node] -%}
{{ x }} IS NULL OR {{ x }} <= {{ threshold }}
{%- elif missing == 'nan' -%}
{{ x }} IS NOT NULL AND {{ x }} <= {{ threshold }}
{%- elif missing == 'zero' and tree.default_left[node] -%}
coalesce({{ x }}, {{ 0.0 | lit }}) = {{ 0.0 | lit }} OR {{ x }} <= {{ threshold }}
{%- elif missing == 'zero' -%}
{#- a NULL makes neither comparison true: right, the default side -#}
{{ x }} <> {{ 0.0 | lit }} AND {{ x }} <= {{ threshold }}
{%- else -%}
coalesce({{ x }}, {{ 0.0 | lit }}) <= {{ threshold }}
{%- endif %}
{%- endmacro %}
{% macro ltr_node(tree, node) -%}
{% if node < 0 -%}
{{ tree.leaf_value[-node - 1] | float | lit }}
{%- else -%}
CASE WHEN {{ ltr_split(tree, node) }} THEN {{ ltr_node(tree, tree.left_child[node]) }} ELSE {{ ltr_node(tree, tree.right_child[node]) }} END
{%- endif %}
{%- endmacro %}
{% macro ltr_score(model) -%}
{% if model.kind == 'linear' -%}
{{ model.intercept | float | lit }}{% for weight in model.weights %} + {{ weight | float | lit }} * model_{{ loop.index }}{% endfor %}
{%- else -%}
{% for tree in model.trees %}{{ ' + ' if not loop.first }}({{ ltr_node(tree, 0 if tree.split_feature else -1) }}){% endfor %}
{%- endif %}
{%- endmacro %}
