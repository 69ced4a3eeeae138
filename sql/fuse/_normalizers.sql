{#-
One SQL expression per seed-003 normaliser (§6.3, docs/fusion-semantics.md step 3), over a row
of the `stats` stage: raw_score, list_rank (1-based), list_n and the list's statistics.
-#}
{% macro normalizer(name, np) -%}
{% set deg = np.degenerate_value | lit %}
{% if name == 'none' -%}
raw_score
{%- elif name == 'rank' -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(list_n, 0)
{%- elif name == 'minmax' -%}
CASE WHEN s_max - s_min = 0 THEN {{ deg }} ELSE (raw_score - s_min) / greatest(s_max - s_min, {{ np.eps | lit }}) END
{%- elif name == 'max' -%}
raw_score / greatest(s_max, {{ np.eps | lit }})
{%- elif name == 'sum' -%}
CASE WHEN s_max - s_min = 0 THEN {{ deg }} ELSE (raw_score - s_min) / greatest(s_sum - list_n * s_min, {{ np.eps | lit }}) END
{%- elif name == 'zscore' -%}
CASE WHEN s_sd_z IS NULL OR s_sd_z = 0 THEN {{ deg }} ELSE (raw_score - s_mean) / greatest(s_sd_z, {{ np.eps | lit }}) END
{%- elif name == 'l2' -%}
CASE WHEN s_l2 < {{ np.eps | lit }} THEN {{ deg }} ELSE raw_score / NULLIF(s_l2, 0) END
{%- elif name == 'softmax' -%}
exp((raw_score - s_max) / {{ np.softmax_temperature | lit }}) / NULLIF(s_softmax_sum, 0)
{%- elif name == 'sigmoid' -%}
{{ 1.0 | lit }} / ({{ 1.0 | lit }} + exp(-(raw_score - {{ np.sigmoid_center | lit }}) / {{ np.sigmoid_scale | lit }}))
{%- elif name == 'quantile' -%}
{{ quantile_norm('raw_score', 's_q_lo', 's_q_hi', np.eps, np.degenerate_value) }}
{%- elif name == 'dbsf' -%}
CASE WHEN list_n = 1 OR s_sd_dbsf IS NULL OR s_sd_dbsf = 0 THEN {{ np.dbsf_degenerate_value | lit }}
     ELSE (raw_score - (s_mean - {{ 3.0 | lit }} * s_sd_dbsf)) / NULLIF({{ 6.0 | lit }} * s_sd_dbsf, 0) END
{%- elif name == 'bounds' -%}
{% set lo, hi = np.bounds[0], np.bounds[1] %}
{% set scaled = '(raw_score - ' ~ (lo | lit) ~ ') / ' ~ ((hi - lo) | lit) %}
{{ clamp(scaled) if np.bounds_clip else scaled }}
{%- elif name == 'borda' -%}
{{ 1.0 | lit }} - (list_rank - 1) / NULLIF(n_candidates, 0)
{%- else -%}
{{ fail('unknown normaliser ' ~ name) }}
{%- endif %}
{%- endmacro %}
