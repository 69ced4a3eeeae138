{#-
kind: fusion
name: combmax
description: "max of s"
default_missing: skip
-#}
{% macro combmax(params, source_sum) -%}
max(contribution)
{%- endmacro %}
