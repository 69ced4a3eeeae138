{#-
kind: fusion
name: weighted_sum
description: "sum of w s"
default_missing: zero
additive: true
weighted: true
-#}
{% macro weighted_sum(params, source_sum, contribution=false) -%}
{% if contribution -%}
weight * norm_score
{%- else -%}
{{ source_sum('contribution') }}
{%- endif %}
{%- endmacro %}
