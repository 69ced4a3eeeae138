{#-
kind: normalizer
name: sigmoid
description: "1 / (1 + exp(-(s - center)/scale)) (MongoDB sigmoid)"
recipe_keys: [normalizer_params.sigmoid_center, normalizer_params.sigmoid_scale]
-#}
{% macro sigmoid(params) -%}
{{ 1.0 | lit }} / ({{ 1.0 | lit }} + exp(-(raw_score - {{ params.sigmoid_center | lit }}) / {{ params.sigmoid_scale | lit }}))
{%- endmacro %}
