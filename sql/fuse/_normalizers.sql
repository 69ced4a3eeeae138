{#-
One SQL expression per seed-003 normaliser (§6.3, docs/fusion-semantics.md step 3), over a row
of the `stats` stage: raw_score, list_rank (1-based), list_n and the list's statistics.
`source` is the source's recipe entry (minmax's lower_bound and upper_bound). A plugin's
(`components`, from the recipe's plugins) is its macro with its parameters bound. The engines' own
rules (normalizer_params.nonpositive_value, minmax_degenerate_below, zscore_at_mean,
l2_degenerate_raw, borda_points) render nothing when left out.
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
{% macro normalizer(name, np, source) -%}
{% set deg = np.degenerate_value | lit %}
{% if name == 'none' -%}
raw_score
{%- elif name == 'rank' -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(list_n, 0)
{%- elif name == 'minmax' and (source.get('lower_bound') or source.get('upper_bound')) -%}
{{ bounded_minmax(np, source.get('lower_bound'), source.get('upper_bound')) }}
{%- elif name == 'minmax' -%}
CASE WHEN {{ degenerate_spread('s_max - s_min', np) }} THEN {{ deg }} ELSE {{ floored('(raw_score - s_min) / greatest(s_max - s_min, ' ~ (np.eps | lit) ~ ')', np) }} END
{%- elif name == 'max' -%}
raw_score / greatest(s_max, {{ np.eps | lit }})
{%- elif name == 'sum' -%}
CASE WHEN s_max - s_min = 0 THEN {{ deg }} ELSE (raw_score - s_min) / greatest(s_sum - list_n * s_min, {{ np.eps | lit }}) END
{%- elif name == 'zscore' -%}
{#- OpenSearch z_score compares its float scores with the mean; so a one-item or constant list
    is at its mean, and gets its largest raw score -#}
CASE {% if np.get('zscore_at_mean') == 'raw_max' %}WHEN CAST(raw_score AS FLOAT) = CAST(s_mean AS FLOAT) THEN s_max {% endif %}WHEN s_sd_z IS NULL OR s_sd_z = 0 THEN {{ deg }} ELSE {{ floored('(raw_score - s_mean) / greatest(s_sd_z, ' ~ (np.eps | lit) ~ ')', np) }} END
{%- elif name == 'l2' -%}
CASE WHEN s_l2 < {{ np.eps | lit }} THEN {{ 'raw_score' if np.get('l2_degenerate_raw') else deg }} ELSE raw_score / NULLIF(s_l2, 0) END
{%- elif name == 'softmax' -%}
exp((raw_score - s_max) / {{ np.softmax_temperature | lit }}) / NULLIF(s_softmax_sum, 0)
{%- elif name == 'sigmoid' -%}
{{ 1.0 | lit }} / ({{ 1.0 | lit }} + exp(-(raw_score - {{ np.sigmoid_center | lit }}) / {{ np.sigmoid_scale | lit }}))
{%- elif name == 'quantile' -%}
{#- held within the list's [min, max]: DuckDB interpolates two equal values an ulp away -#}
{{ quantile_norm('raw_score', 'greatest(s_min, least(s_max, s_q_lo))', 'greatest(s_min, least(s_max, s_q_hi))', np.eps, np.degenerate_value) }}
{%- elif name == 'dbsf' -%}
CASE WHEN list_n = 1 OR s_sd_dbsf IS NULL OR s_sd_dbsf = 0 THEN {{ np.dbsf_degenerate_value | lit }}
     ELSE (raw_score - (s_mean - {{ 3.0 | lit }} * s_sd_dbsf)) / NULLIF({{ 6.0 | lit }} * s_sd_dbsf, 0) END
{%- elif name == 'bounds' -%}
{% set lo, hi = np.bounds[0], np.bounds[1] %}
{% set scaled = '(raw_score - ' ~ (lo | lit) ~ ') / ' ~ ((hi - lo) | lit) %}
{{ clamp(scaled) if np.bounds_clip else scaled }}
{%- elif name == 'borda' and np.get('borda_points') -%}
{#- ranx bordafuse's points: |C| - p -#}
CAST(n_candidates - list_rank + 1 AS DOUBLE)
{%- elif name == 'borda' -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(n_candidates, 0)
{%- elif name in components.normalizer -%}
{#- a plugin (orchestrator/fuse/components.py), with its component_params -#}
{{ components.normalizer[name]() }}
{%- else -%}
{{ fail('unknown normaliser ' ~ name) }}
{%- endif %}
{%- endmacro %}
