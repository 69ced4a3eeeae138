{#-
kind: normalizer
name: borda
description: "1 - p/|C| over the query's candidates C; a missing item 0.5 - (n - 1)/(2|C|) (ranx borda)"
recipe_keys: [normalizer_params.borda_points]
needs: [n_candidates]
-#}
{% macro borda(params) -%}
{% if params.get('borda_points') -%}
{#- ranx bordafuse's points: |C| - p -#}
CAST(n_candidates - list_rank + 1 AS DOUBLE)
{%- else -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(n_candidates, 0)
{%- endif %}
{%- endmacro %}
