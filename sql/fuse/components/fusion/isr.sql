{#-
kind: fusion
name: isr
description: "(sum of w / r^2) n_d (ranx isr)"
default_missing: zero
additive: true
weighted: true
ranks: true
-#}
{% macro isr(params, source_sum, contribution=false) -%}
{% if contribution -%}
weight / NULLIF((rank_for_fusion) * (rank_for_fusion), 0)
{%- else -%}
{{ source_sum('contribution') }} * count(*) FILTER (WHERE present)
{%- endif %}
{%- endmacro %}
