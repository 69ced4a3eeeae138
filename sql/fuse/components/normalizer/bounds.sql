{#-
kind: normalizer
name: bounds
description: "(s - lo) / (hi - lo) over fixed bounds, clipped to [0, 1] with bounds_clip"
recipe_keys: [normalizer_params.bounds, normalizer_params.bounds_clip]
required_keys: [normalizer_params.bounds]
-#}
{% macro bounds(params) -%}
{% set lo, hi = params.bounds[0], params.bounds[1] %}
{% set scaled = '(raw_score - ' ~ (lo | lit) ~ ') / ' ~ ((hi - lo) | lit) %}
{{ clamp(scaled) if params.bounds_clip else scaled }}
{%- endmacro %}
