{#-
kind: aligner
name: sum
description: "the sum of a source's hits on the target"
-#}
{% from 'fuse/_aligners.sql' import descending %}
{% macro sum(params, value) -%}
list_sum({{ descending(value) }})
{%- endmacro %}
