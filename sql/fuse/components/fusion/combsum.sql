{#-
kind: fusion
name: combsum
description: "sum of s"
default_missing: zero
additive: true
-#}
{% macro combsum(params, source_sum) -%}
{{ source_sum('contribution') }}
{%- endmacro %}
