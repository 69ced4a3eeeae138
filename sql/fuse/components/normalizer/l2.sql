{#-
kind: normalizer
name: l2
description: "s / sqrt(sum(s^2)) (Elasticsearch l2_norm, OpenSearch l2)"
recipe_keys: [normalizer_params.eps, normalizer_params.degenerate_value, normalizer_params.l2_degenerate_raw]
-#}
{% macro l2(params) -%}
CASE WHEN s_l2 < {{ params.eps | lit }} THEN {{ 'raw_score' if params.get('l2_degenerate_raw') else params.degenerate_value | lit }} ELSE raw_score / NULLIF(s_l2, 0) END
{%- endmacro %}
