{#-
A rank-only log's scores (larger is better): -rank, so that sql/fuse/fused.sql reads a log with
a rank column but no score as one with both. A rank is best-first whatever a source's scores
would be, so a `distance` source's score is +rank, which the recipe's distance flip turns back
into -rank: its list keeps its order. Which sources are distances is read off the recipe alone
(declared, or discovered with source_defaults), so that the stage holds for any set of sources
a later request brings (the live scorer renders it once per shape of hits).
Context: recipe (validated), inputs.retrieval_log (the typed log view).
-#}
{% set declared = recipe.sources %}
{% set far = [] %}
{% for name in declared if declared[name].distance %}{% set _ = far.append(name) %}{% endfor %}
{% macro listed(names) -%}
{% for name in names %}{{ name | lit }}{{ ', ' if not loop.last }}{% endfor %}
{%- endmacro %}
{% set is_distance = [] %}
{% if far %}{% set _ = is_distance.append('source IN (' ~ listed(far) ~ ')') %}{% endif %}
{% if recipe.discover_sources and recipe.source_defaults.distance %}
{% set _ = is_distance.append('source NOT IN (' ~ listed(declared) ~ ')' if declared else 'TRUE') %}
{% endif %}
SELECT * REPLACE (
{% if is_distance %}
    CASE WHEN {{ is_distance | join(' OR ') }} THEN CAST(rank AS DOUBLE) ELSE -CAST(rank AS DOUBLE) END AS score
{% else %}
    -CAST(rank AS DOUBLE) AS score
{% endif %}
)
FROM {{ inputs.retrieval_log | ident }}
