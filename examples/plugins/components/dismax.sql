{#-
kind: fusion
name: dismax
description: "max of w s, plus tie_breaker times the other lists' w s (Lucene's dis_max)"
default_missing: skip
weighted: true
parameters:
  tie_breaker: {type: number, min: 0, max: 1, default: 0.0, description: "the share of the other lists' sum"}
-#}
{% macro dismax(params, source_sum) -%}
max(weight * contribution) + {{ params.tie_breaker | lit }} * ({{ source_sum('weight * contribution') }} - max(weight * contribution))
{%- endmacro %}
