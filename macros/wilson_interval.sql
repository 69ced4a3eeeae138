{#-
wilson_interval(successes, trials, z=1.96, bound='lower') — one end of the Wilson score interval
for a binomial proportion (Wilson 1927; Agresti & Coull 1998), written in the form

    (k + z²/2 ± z·sqrt(k(n − k)/n + z²/4)) / (n + z²)

which equals the textbook (p̂ + z²/2n ± z·sqrt(p̂(1 − p̂)/n + z²/4n²)) / (1 + z²/n), p̂ = k/n.
The result is clamped to [0, 1] (at k = 0 or k = n rounding could leave it a hair outside).
NULL when k or n is NULL, n ≤ 0, or k is outside [0, n]: no interval is claimed without data.

Args:
  successes (required, SQL expression) — k, the number of successes
  trials    (required, SQL expression) — n, the number of trials
  z         (optional, number, default 1.96) — the normal quantile (1.96: a 95% interval),
            rendered through `lit`
  bound     (optional, 'lower' or 'upper', default 'lower') — which end to return
Usage:
  {{ wilson_interval('n_correct', 'n', 1.96, 'lower') }}  ->  CASE WHEN … ELSE greatest(0, least(1, (k + z²/2 - …) / (n + z²))) END
-#}
{% macro wilson_interval(successes, trials, z=1.96, bound='lower') -%}
{% if bound not in ('lower', 'upper') %}{{ fail("wilson_interval: bound must be 'lower' or 'upper', got " ~ bound) }}{% endif %}
{% if z is number and not (z > 0) %}{{ fail('wilson_interval: z must be positive') }}{% endif %}
CASE WHEN ({{ successes }}) IS NULL OR ({{ trials }}) IS NULL OR ({{ trials }}) <= 0 OR ({{ successes }}) < 0 OR ({{ successes }}) > ({{ trials }}) THEN NULL ELSE greatest({{ 0.0 | lit }}, least({{ 1.0 | lit }}, (CAST(({{ successes }}) AS DOUBLE) + {{ (z * z / 2) | float | lit }} {{ '-' if bound == 'lower' else '+' }} {{ z | float | lit }} * sqrt(CAST(({{ successes }}) AS DOUBLE) * (({{ trials }}) - ({{ successes }})) / NULLIF(({{ trials }}), 0) + {{ (z * z / 4) | float | lit }})) / (CAST(({{ trials }}) AS DOUBLE) + {{ (z * z) | float | lit }}))) END
{%- endmacro %}
