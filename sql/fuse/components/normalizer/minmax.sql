{#-
kind: normalizer
name: minmax
description: "(s - min) / max(max - min, eps); a source's lower_bound and upper_bound fix an end (OpenSearch)"
recipe_keys: [normalizer_params.eps, normalizer_params.degenerate_value, normalizer_params.nonpositive_value, normalizer_params.minmax_degenerate_below, sources.<name>.lower_bound, sources.<name>.upper_bound]
-#}
{% from 'fuse/_normalizers.sql' import bounded_minmax, degenerate_spread, floored %}
{% macro minmax(params) -%}
{% if params.get('lower_bound') or params.get('upper_bound') -%}
{{ bounded_minmax(params, params.get('lower_bound'), params.get('upper_bound')) }}
{%- else -%}
CASE WHEN {{ degenerate_spread('s_max - s_min', params) }} THEN {{ params.degenerate_value | lit }} ELSE {{ floored('(raw_score - s_min) / greatest(s_max - s_min, ' ~ (params.eps | lit) ~ ')', params) }} END
{%- endif %}
{%- endmacro %}
