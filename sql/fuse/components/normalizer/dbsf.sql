{#-
kind: normalizer
name: dbsf
description: "(s - (mean - 3 sd)) / (6 sd), not clipped (Qdrant DBSF)"
recipe_keys: [normalizer_params.dbsf_degenerate_value, normalizer_params.dbsf_ddof]
-#}
{% macro dbsf(params) -%}
CASE WHEN list_n = 1 OR s_sd_dbsf IS NULL OR s_sd_dbsf = 0 THEN {{ params.dbsf_degenerate_value | lit }}
     ELSE (raw_score - (s_mean - {{ 3.0 | lit }} * s_sd_dbsf)) / NULLIF({{ 6.0 | lit }} * s_sd_dbsf, 0) END
{%- endmacro %}
