{#-
kind: fusion
name: combmed
description: "the median of s (continuous)"
default_missing: skip
-#}
{% macro combmed(params, source_sum) -%}
quantile_cont(contribution, {{ 0.5 | lit }})
{%- endmacro %}
