{#-
kind: normalizer
name: none
description: "the raw score s"
-#}
{% macro none_(params) -%}
raw_score
{%- endmacro %}
