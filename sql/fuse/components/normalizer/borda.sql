{#-
kind: normalizer
name: borda
description: "1 - p/|C| over the query's candidates C; a missing item 0.5 - (n - 1)/(2|C|) (ranx borda)"
recipe_keys: [normalizer_params.borda_points]
needs: [n_candidates]
fills_candidates: true
-#}
{% macro borda(params, missing=false) -%}
{% if missing and params.get('borda_points') -%}
{#- the mean of the points of the positions the list leaves: (|C| - n + 1) / 2 -#}
(ql.n_candidates - ql.list_n + 1) / {{ 2.0 | lit }}
{%- elif missing -%}
{#- the mean of 1 - p/|C| over the positions p = n … |C| - 1 the list leaves -#}
{{ 0.5 | lit }} - (ql.list_n - 1) / NULLIF(2 * ql.n_candidates, 0)
{%- elif params.get('borda_points') -%}
{#- ranx bordafuse's points: |C| - p -#}
CAST(n_candidates - list_rank + 1 AS DOUBLE)
{%- else -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(n_candidates, 0)
{%- endif %}
{%- endmacro %}
