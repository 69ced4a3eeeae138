{#-
kind: fusion
name: combsum
description: "sum of s"
default_missing: zero
-#}
{% macro combsum(params, source_sum) -%}
{{ source_sum('contribution') }}
{%- endmacro %}
