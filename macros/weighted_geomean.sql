{#-
weighted_geomean(terms, floor=0.01) — seed 000 §6: the weighted geometric mean
  exp(Σ w_i · ln(max(s_i, floor)) / Σ w_i)
which, with weights summing to 1, is the seed's S1^w1 · S2^w2 · S3^w3.

§6.2: any term that is 0 (or below) makes the result 0 ("missing key evidence"); otherwise each
term is floored at `floor` so ln never sees 0. A NULL term gives NULL.

Args:
  terms  (required, list of (SQL expression, weight) pairs; weights are numbers > 0)
  floor  (optional, number in (0, 1], default 0.01)
Usage:
  {{ weighted_geomean([('s_strength', 0.5), ('s_coverage', 0.3), ('s_stability', 0.2)]) }}
-#}
{% macro weighted_geomean(terms, floor=0.01) -%}
{% set total_weight = terms | map(attribute=1) | sum %}
{% if terms | length == 0 or total_weight <= 0 %}{{ fail('weighted_geomean needs terms with a positive total weight') }}{% endif %}
CASE
    WHEN {% for expr, _ in terms %}({{ expr }}) IS NULL{{ ' OR ' if not loop.last }}{% endfor %} THEN NULL
    WHEN {% for expr, _ in terms %}({{ expr }}) <= 0{{ ' OR ' if not loop.last }}{% endfor %} THEN {{ 0.0 | lit }}
    ELSE exp(({% for expr, weight in terms %}{{ weight | lit }} * ln(greatest({{ expr }}, {{ floor | lit }})){{ ' + ' if not loop.last }}{% endfor %}) / {{ total_weight | lit }})
END
{%- endmacro %}
