{#-
kind: normalizer
name: sum
description: "(s - min) / max(sum(s) - n min, eps) (ranx sum)"
recipe_keys: [normalizer_params.eps, normalizer_params.degenerate_value]
-#}
{% macro sum(params) -%}
CASE WHEN s_max - s_min = 0 THEN {{ params.degenerate_value | lit }} ELSE (raw_score - s_min) / greatest(s_sum - list_n * s_min, {{ params.eps | lit }}) END
{%- endmacro %}
