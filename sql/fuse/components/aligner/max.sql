{#-
kind: aligner
name: max
description: "the largest of a source's hits on the target"
-#}
{% macro max(params, value) -%}
max({{ value }})
{%- endmacro %}
