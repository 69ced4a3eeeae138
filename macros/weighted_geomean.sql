{#-
weighted_geomean(terms, floor=0.01) — seed 000 §6: the weighted geometric mean
  exp(Σ w_i · ln(max(s_i, floor)) / Σ w_i)
which, with weights summing to 1, is the seed's S1^w1 · S2^w2 · S3^w3.

§6.2: any term that is 0 (or below) makes the result 0 ("missing key evidence"); otherwise each
term is floored at `floor` so ln never sees 0. A NULL term gives NULL. A term whose weight is
the number 0 is not part of the product (s^0 = 1): it is left out, so it can neither zero the
result nor make it NULL. A weight may also be a column (`column('w1')`, used by `calibrate` to
score many candidate policies in one query): a term whose weight column is 0 on a row is left
out on that row the same way.

Args:
  terms  (required, list of (SQL expression, weight) pairs; weights are numbers ≥ 0 with a
         positive sum, or column(name) references)
  floor  (optional, number in (0, 1], default 0.01)
Usage:
  {{ weighted_geomean([('s_strength', 0.5), ('s_coverage', 0.3), ('s_stability', 0.2)]) }}
  {{ weighted_geomean([('s_strength', column('w1')), ('s_coverage', column('w2'))]) }}
-#}
{% macro weighted_geomean(terms, floor=0.01) -%}
{% set active = terms | selectattr(1, 'ne', 0) | list %}
{% set numeric = (active | map(attribute=1) | select('number') | list | length) == (active | length) %}
{% if active | length == 0 or (numeric and (active | map(attribute=1) | sum) <= 0) %}{{ fail('weighted_geomean needs terms with a positive total weight') }}{% endif %}
{% macro counts(weight) %}{% if weight is not number %} AND {{ weight | lit }} > 0{% endif %}{% endmacro %}
CASE
    WHEN {% for expr, weight in active %}(({{ expr }}) IS NULL{{ counts(weight) }}){{ ' OR ' if not loop.last }}{% endfor %} THEN NULL
    WHEN {% for expr, weight in active %}(({{ expr }}) <= 0{{ counts(weight) }}){{ ' OR ' if not loop.last }}{% endfor %} THEN {{ 0.0 | lit }}
    ELSE exp(({% for expr, weight in active %}{{ weight | lit }} * ln(greatest({% if weight is number %}{{ expr }}{% else %}coalesce({{ expr }}, {{ 1.0 | lit }}){% endif %}, {{ floor | lit }})){{ ' + ' if not loop.last }}{% endfor %}) / {% if numeric %}{{ active | map(attribute=1) | sum | lit }}{% else %}NULLIF({% for _, weight in active %}{{ weight | lit }}{{ ' + ' if not loop.last }}{% endfor %}, 0){% endif %})
END
{%- endmacro %}
