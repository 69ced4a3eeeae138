{#-
kind: aligner
name: max_decay
description: "s1 + d s2 + d^2 s3 ... over the hits sorted descending (seed 003 §12.1)"
recipe_keys: [aligner.top_n, aligner.decay]
-#}
{% from 'fuse/_aligners.sql' import descending %}
{% macro max_decay(params, value) -%}
list_sum(list_transform({{ descending(value, params.top_n) }}, lambda value, position: value * pow({{ params.decay | lit }}, position - 1)))
{%- endmacro %}
