{#-
kind: fusion
name: harmonic_mean
description: "sum of w / sum of w/s over the lists with s > 0 (OpenSearch harmonic_mean)"
default_missing: skip
weighted: true
-#}
{% macro harmonic_mean(params, source_sum) -%}
{{ source_sum('weight', 'contribution > 0') }}
            / NULLIF({{ source_sum('weight / NULLIF(contribution, 0)', 'contribution > 0') }}, 0)
{%- endmacro %}
