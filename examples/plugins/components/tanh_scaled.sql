{#-
kind: normalizer
name: tanh_scaled
description: "tanh(s / scale): a raw score squashed into (-1, 1), a list's other scores aside"
parameters:
  scale: {type: number, min: 0, min_open: true, default: 1.0, description: "the score that maps to tanh(1)"}
-#}
{% macro tanh_scaled(params) -%}
tanh(raw_score / {{ params.scale | lit }})
{%- endmacro %}
