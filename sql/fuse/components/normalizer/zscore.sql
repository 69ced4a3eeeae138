{#-
kind: normalizer
name: zscore
description: "(s - mean) / max(sd, eps) (ranx zmuv, OpenSearch z_score)"
recipe_keys: [normalizer_params.eps, normalizer_params.degenerate_value, normalizer_params.zscore_ddof, normalizer_params.nonpositive_value, normalizer_params.zscore_at_mean]
-#}
{% from 'fuse/_normalizers.sql' import floored %}
{% macro zscore(params) -%}
{#- OpenSearch z_score compares its float scores with the mean; so a one-item or constant list
    is at its mean, and gets its largest raw score -#}
CASE {% if params.get('zscore_at_mean') == 'raw_max' %}WHEN CAST(raw_score AS FLOAT) = CAST(s_mean AS FLOAT) THEN s_max {% endif %}WHEN s_sd_z IS NULL OR s_sd_z = 0 THEN {{ params.degenerate_value | lit }} ELSE {{ floored('(raw_score - s_mean) / greatest(s_sd_z, ' ~ (params.eps | lit) ~ ')', params) }} END
{%- endmacro %}
