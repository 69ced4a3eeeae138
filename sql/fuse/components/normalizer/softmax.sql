{#-
kind: normalizer
name: softmax
description: "exp((s - max)/T) / sum(exp((s - max)/T))"
recipe_keys: [normalizer_params.softmax_temperature]
-#}
{% macro softmax(params) -%}
exp((raw_score - s_max) / {{ params.softmax_temperature | lit }}) / NULLIF(s_softmax_sum, 0)
{%- endmacro %}
