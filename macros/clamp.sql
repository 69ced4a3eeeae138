{#-
clamp(x, lo=0.0, hi=1.0) — `x` limited to [lo, hi]; NULL stays NULL.

DuckDB's greatest/least skip NULLs, so a bare `greatest(lo, least(hi, x))` would turn a NULL
into `hi`; the CASE keeps it NULL.

Args:
  x   (required, SQL expression)
  lo  (optional, number, default 0.0) — lower bound, rendered through `lit`
  hi  (optional, number, default 1.0) — upper bound, rendered through `lit`
Usage:
  {{ clamp('coverage_ratio * 2') }}  ->  CASE WHEN (...) IS NULL THEN NULL ELSE greatest(0, least(1, ...)) END
-#}
{% macro clamp(x, lo=0.0, hi=1.0) -%}
CASE WHEN ({{ x }}) IS NULL THEN NULL ELSE greatest({{ lo | lit }}, least({{ hi | lit }}, {{ x }})) END
{%- endmacro %}
