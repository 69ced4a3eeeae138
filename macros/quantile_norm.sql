{#-
quantile_norm(x, lo, hi, eps=1e-9, zero_spread_value=0.0) — seed 000 §4.2:
  norm(x) = clamp((x - lo) / (hi - lo + eps), 0, 1)

`lo` and `hi` are SQL expressions for the bounds: per-query quantiles as columns computed by
window functions (`quantile_cont(x, 0.1) OVER (PARTITION BY query_id)`: DuckDB spills a window
under a memory limit, not a large grouped quantile), or reference quantiles stored in a policy
(rendered literals). When the spread is zero
(hi = lo: one candidate, or all equal) a value equal to the bound gets `zero_spread_value`; the
formula itself would give 0 there, values below give 0 and values above give 1.

Args:
  x                  (required, SQL expression)
  lo, hi             (required, SQL expressions) — the P_lo / P_hi bounds
  eps                (optional, number > 0, default 1e-9) — keeps the denominator positive
  zero_spread_value  (optional, number in [0, 1], default 0.0)
Usage:
  {{ quantile_norm('rrf_sum', 'rrf_sum_p_lo', 'rrf_sum_p_hi') }}
  {{ quantile_norm('rrf_sum', 0.01 | lit, 0.05 | lit) }}
-#}
{% macro quantile_norm(x, lo, hi, eps=1e-9, zero_spread_value=0.0) -%}
CASE
    WHEN ({{ x }}) IS NULL THEN NULL
    WHEN ({{ hi }}) - ({{ lo }}) = 0 AND ({{ x }}) = ({{ lo }}) THEN {{ zero_spread_value | lit }}
    ELSE {{ clamp('((' ~ x ~ ') - (' ~ lo ~ ')) / (((' ~ hi ~ ') - (' ~ lo ~ ')) + ' ~ (eps | lit) ~ ')') }}
END
{%- endmacro %}
