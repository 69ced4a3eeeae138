{#-
kind: fusion
name: rrf
description: "sum of w / (k + r - 1 + rank_base) (reciprocal rank fusion)"
recipe_keys: [fusion.k, fusion.rank_base, fusion.rrf_weight]
default_missing: zero
additive: true
weighted: true
ranks: true
-#}
{% macro rrf(params, source_sum, contribution=false) -%}
{% if not contribution -%}
{{ source_sum('contribution') }}
{%- elif params.get('rrf_weight') == 'divides_rank' -%}
{#- Qdrant's weighted RRF (reciprocal_rank_fusion.rs): a weight divides the rank; 0 adds nothing -#}
CASE WHEN weight > 0 THEN {{ 1.0 | lit }} / ((rank_for_fusion) / NULLIF(weight, 0) + {{ (params.k - 1 + params.rank_base) | float | lit }}) ELSE {{ 0.0 | lit }} END
{%- else -%}
weight / ((rank_for_fusion) + {{ (params.k - 1 + params.rank_base) | float | lit }})
{%- endif %}
{%- endmacro %}
