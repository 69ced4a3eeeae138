{#-
kind: fusion
name: combmin
description: "min of s"
default_missing: skip
-#}
{% macro combmin(params, source_sum) -%}
min(contribution)
{%- endmacro %}
