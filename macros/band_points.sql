{#-
band_points(x, bands) — the points of the first band whose threshold `x` reaches: seed 001's
"≥5 citations: 0.5, 3–4: 0.4 …" tables. `bands` is a list of {at_least, points} sorted by
at_least descending; the last band is the floor (every value below the others gets its points).
NULL stays NULL.

Args:
  x      (required, SQL expression)
  bands  (required, list of mappings with `at_least` and `points`, highest threshold first;
          values rendered through `lit`)
Usage:
  {{ band_points('citation_count', [{'at_least': 5, 'points': 0.5}, {'at_least': 0, 'points': 0.0}]) }}
  ->  CASE WHEN (citation_count) IS NULL THEN NULL WHEN (citation_count) >= 5 THEN 0.5 ELSE 0.0 END
-#}
{% macro band_points(x, bands) -%}
CASE WHEN ({{ x }}) IS NULL THEN NULL
{%- for band in bands[:-1] %} WHEN ({{ x }}) >= {{ band.at_least | lit }} THEN {{ band.points | float | lit }}{% endfor %}
 ELSE {{ bands[-1].points | float | lit }} END
{%- endmacro %}
