{#-
kind: fusion
name: geometric_mean
description: "exp(sum of w ln s / sum of w) over the lists with s > 0 (OpenSearch geometric_mean)"
default_missing: skip
weighted: true
-#}
{% macro geometric_mean(params, source_sum) -%}
exp({{ source_sum('weight * ln(contribution)', 'contribution > 0') }}
            / NULLIF({{ source_sum('weight', 'contribution > 0') }}, 0))
{%- endmacro %}
