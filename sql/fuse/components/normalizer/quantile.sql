{#-
kind: normalizer
name: quantile
description: "clamp((s - P_lo) / (P_hi - P_lo + eps), 0, 1) over continuous quantiles (seed 000 §4.2)"
recipe_keys: [normalizer_params.eps, normalizer_params.degenerate_value, normalizer_params.quantile_p_lo, normalizer_params.quantile_p_hi]
needs: [s_q_lo, s_q_hi]
-#}
{% macro quantile(params) -%}
{#- held within the list's [min, max]: DuckDB interpolates two equal values an ulp away -#}
{{ quantile_norm('raw_score', 'greatest(s_min, least(s_max, s_q_lo))', 'greatest(s_min, least(s_max, s_q_hi))', params.eps, params.degenerate_value) }}
{%- endmacro %}
