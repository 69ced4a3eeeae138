{#-
kind: normalizer
name: rank
description: "1 - p/n, p the 0-based position in the list of n (ranx rank)"
-#}
{% macro rank(params) -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(list_n, 0)
{%- endmacro %}
