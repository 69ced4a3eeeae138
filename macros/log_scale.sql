{#-
log_scale(x, offset=1.0) — seed 000 §4.4: ln(x + offset), the natural log, written as `ln`
because DuckDB's one-argument `log` is base 10 and other engines read it as ln.

The domain is guarded: where x + offset <= 0 the result is NULL, not DuckDB's -inf/NaN.

Args:
  x       (required, SQL expression)
  offset  (optional, number, default 1.0)
Usage:
  {{ log_scale('total_chunks') }}  ->  ln(total_chunks + 1)
-#}
{% macro log_scale(x, offset=1.0) -%}
CASE WHEN ({{ x }}) + {{ offset | lit }} > 0 THEN ln(({{ x }}) + {{ offset | lit }}) ELSE NULL END
{%- endmacro %}
