{#-
kind: normalizer
name: max
description: "s / max(max, eps) (ranx max)"
recipe_keys: [normalizer_params.eps]
-#}
{% macro max(params) -%}
raw_score / greatest(s_max, {{ params.eps | lit }})
{%- endmacro %}
