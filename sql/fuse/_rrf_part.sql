{#-
rrf_part: a (query, source, parent) group's Σ over its hits of weight / (rank + offset), summed
exactly (the same bits in any order, a fixed-size state DuckDB can spill), in one of two ways —
the recipe's `parent_features.rrf_sum`:

  decimal (default)  each term as DECIMAL(38, 24), the sum cast to DOUBLE
  fixed64            each term as a 64-bit integer count of 2^-scale_bits, the sum (HUGEINT in
                     DuckDB, NUMERIC in PostgreSQL) cast to DOUBLE and scaled back: exact
                     below 2^-scale_bits, about a fifth cheaper than the decimal sum; its last
                     bits may differ from decimal's, so it is a recipe version of its own

`scale_bits` (fixed64 only) is FusePlan.rrf_scale_bits: the largest power of two whose terms
cannot exceed 2^62 for the recipe's weights, boosts, k and rank_base.
-#}
{% macro rrf_part(offset, scale_bits) -%}
{% if scale_bits is none -%}
CAST(sum(CAST(weight / (rank + {{ offset }}) AS DECIMAL(38, 24))) AS DOUBLE)
{%- else -%}
{% set scale = (2.0 ** scale_bits) | lit %}
CAST(sum(CAST(round(weight / (rank + {{ offset }}) * {{ scale }}) AS BIGINT)) AS DOUBLE) / {{ scale }}
{%- endif %}
{%- endmacro %}
