{#-
kind: aligner
name: sum_top_n
description: "the sum of the top_n largest hits"
recipe_keys: [aligner.top_n]
-#}
{% from 'fuse/_aligners.sql' import descending %}
{% macro sum_top_n(params, value) -%}
list_sum({{ descending(value, params.top_n) }})
{%- endmacro %}
