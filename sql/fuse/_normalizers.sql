{#-
What the built-in normalisers (sql/fuse/components/normalizer/, each one SQL expression over a
row of fused.sql's `list_stats` stage) share: the engines' own rules
(normalizer_params.nonpositive_value, minmax_degenerate_below, and a source's lower_bound and
upper_bound), which render nothing when left out. `np` is the normaliser's params.
-#}
{#- a formula's value; with nonpositive_value, a value <= 0 becomes it (OpenSearch MIN_SCORE) -#}
{% macro floored(value, np) -%}
{% if np.get('nonpositive_value') is not none %}CASE WHEN {{ value }} <= 0 THEN {{ np.nonpositive_value | lit }} ELSE {{ value }} END{% else %}{{ value }}{% endif %}
{%- endmacro %}
{#- minmax's zero spread; with minmax_degenerate_below, any spread below it (Elasticsearch) -#}
{% macro degenerate_spread(spread, np) -%}
{% if np.get('minmax_degenerate_below') is not none %}{{ spread }} < {{ np.minmax_degenerate_below | lit }}{% else %}{{ spread }} = 0{% endif %}
{%- endmacro %}
{#- One end of minmax's range with a bound, as OpenSearch's bounds/LowerBound.java and
    UpperBound.java make it: `own` the list's end (s_min, s_max), `far` the other, `inward` how a
    score inside the range compares with the bound ('>' for a lower bound). apply: the bound,
    for a score on its inner side when the list reaches past it; clip: the bound, unless the
    list stays short of it; ignore (or no bound): the list's own. -#}
{% macro bounded_end(bound, own, far, inward) -%}
{% set outward = '<' if inward == '>' else '>' %}
{% if bound and bound.mode == 'apply' -%}
(CASE WHEN {{ far }} {{ inward }} {{ bound.score | lit }} AND raw_score {{ inward }} {{ bound.score | lit }} THEN {{ bound.score | lit }} ELSE {{ own }} END)
{%- elif bound and bound.mode == 'clip' -%}
(CASE WHEN {{ far }} {{ outward }} {{ bound.score | lit }} THEN {{ own }} ELSE {{ bound.score | lit }} END)
{%- else -%}
{{ own }}
{%- endif %}
{%- endmacro %}
{#- OpenSearch min_max with per-sub-query bounds (MinMaxScoreNormalizationTechnique): a score
    beyond a clip bound is 0 (1); an empty effective range is degenerate. -#}
{% macro bounded_minmax(np, lower, upper) -%}
{% set lo = bounded_end(lower, 's_min', 's_max', '>') %}
{% set hi = bounded_end(upper, 's_max', 's_min', '<') %}
CASE WHEN {{ degenerate_spread('s_max - s_min', np) }} THEN {{ np.degenerate_value | lit }}
{% if lower and lower.mode == 'clip' %}
     WHEN raw_score < {{ lo }} THEN {{ floored(0.0 | lit, np) }}
{% endif %}
{% if upper and upper.mode == 'clip' %}
     WHEN raw_score > {{ hi }} THEN {{ 1.0 | lit }}
{% endif %}
     WHEN {{ hi }} - {{ lo }} = 0 THEN {{ np.degenerate_value | lit }}
     ELSE {{ floored('(raw_score - ' ~ lo ~ ') / greatest(' ~ hi ~ ' - ' ~ lo ~ ', ' ~ (np.eps | lit) ~ ')', np) }} END
{%- endmacro %}
