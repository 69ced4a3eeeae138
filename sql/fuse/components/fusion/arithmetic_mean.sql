{#-
kind: fusion
name: arithmetic_mean
description: "sum of w s / sum of w over the counted lists (OpenSearch arithmetic_mean)"
default_missing: zero
weighted: true
-#}
{% macro arithmetic_mean(params, source_sum, contribution=false) -%}
{% if contribution -%}
weight * norm_score
{%- else -%}
{{ source_sum('contribution') }} / NULLIF({{ source_sum('weight', 'counted') }}, 0)
{%- endif %}
{%- endmacro %}
