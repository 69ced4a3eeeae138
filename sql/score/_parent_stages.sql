{#-
The seed-000 stages, per candidate parent, each a named CTE (§4 normalise, §5 sub-scores,
§6 combine, rank, §7.3 flags). Imported `with context` by parents.sql and queries.sql; reads the
policy parameters from `policy` and the input table name from `inputs.parent_features`.

Beyond the seed (overall_v2, issue 4), all off in overall_v1: §5.1's multi-evidence term may be
`parent_rrf` (document-level RRF) instead of `rrf_sum`, and two more sub-scores may join the
geometric mean with a non-zero weight: S_agreement = source_agreement and
S_separation = separation_base + (1 − separation_base) · score_lead (see
sql/fuse/parent_features.sql). Optional `carry`: input columns passed through every
stage up to `flagged` (calibrate's candidate parameters; policy values may be column(...)).

§4.4's optional smoothing (issue 50; a `coverage_smoothing` block, absent in overall_v1..v3, which
then render as before): the sub-scores read coverage_ratio_smoothed =
(coverage_ratio·total_chunks + pseudo_chunks·prior) / (total_chunks + pseudo_chunks), the hit
chunks shrunk towards `prior` by `pseudo_chunks` imaginary ones; the §7.3 flags keep the input's.
-#}
{% set p = policy %}
{% set nz = p.normalization %}
{% set evidence = p.strength_evidence %}
{% set carried = carry | default([]) %}
{% set smoothing = p.get('coverage_smoothing') %}
{% set ratio = 'coverage_ratio_smoothed' if smoothing else 'coverage_ratio' %}
{% set features_normalised = [evidence, 'max_score', 'coverage', 'log_chunks'] %}
{% set extra_subscores = [('agreement', p.w_agreement), ('separation', p.w_separation)] | selectattr(1, 'ne', 0) | map(attribute=0) | list %}
{% set subscore_names = ['strength', 'coverage', 'stability'] + extra_subscores %}
{% set subscore_weights = {'strength': p.w1, 'coverage': p.w2, 'stability': p.w3, 'agreement': p.w_agreement, 'separation': p.w_separation} %}
{% set geomean_terms = [] %}
{% for name in subscore_names %}{% set _ = geomean_terms.append(('s_' ~ name, subscore_weights[name])) %}{% endfor %}
{% set evidence_columns = ([evidence] if evidence != 'rrf_sum' else [])
    + (['source_agreement'] if 'agreement' in extra_subscores else [])
    + (['score_lead'] if 'separation' in extra_subscores else []) %}
{% if nz.coverage == 'divide_by_max' %}
{% set by_quantile = features_normalised | reject('equalto', 'coverage') | list %}
{% else %}
{% set by_quantile = features_normalised %}
{% endif %}
{% macro parent_stages() -%}
features AS (
    SELECT
        query_id,
        parent_id,
        rrf_sum,
        max_score,
        coverage,
        total_chunks,
        coverage_ratio,
{% if smoothing %}
        (coverage_ratio * total_chunks + {{ (smoothing.pseudo_chunks * smoothing.prior) | lit }})
            / (total_chunks + {{ smoothing.pseudo_chunks | lit }}) AS coverage_ratio_smoothed,
{% endif %}
{% for c in evidence_columns + carried %}
        {{ c | ident }},
{% endfor %}
        {{ log_scale('total_chunks', 1.0) }} AS log_chunks,
        count(*) OVER (PARTITION BY query_id) AS n_candidates
    FROM {{ inputs.parent_features | ident }}
),
{# Per-query bounds as window functions, never grouped and joined back: DuckDB spills a window
    under a memory limit where a large grouped quantile runs out of memory (30M log rows at 1 GB).
    `duckscore sql --dialect postgres` regroups them (PostgreSQL has no windowed percentile).
    Each quantile is held within the query's [min, max]: DuckDB interpolates two equal values
    as lo·(1−d) + hi·d, an ulp away from either, so all-equal candidates would lose their zero
    spread. #}
bounds AS (
    SELECT
        *,
{% for f in by_quantile %}
{% if nz.mode == 'per_query' %}
{% set last_feature = loop.last %}
{% for end, q in [('p_lo', nz.p_lo), ('p_hi', nz.p_hi)] %}
        greatest(min({{ f }}) OVER (PARTITION BY query_id), least(max({{ f }}) OVER (PARTITION BY query_id), quantile_cont({{ f }}, {{ q | lit }}) OVER (PARTITION BY query_id))) AS {{ f }}_{{ end }}{{ ',' if not (loop.last and last_feature) }}
{% endfor %}
{% else %}
        {{ nz.reference[f][0] | lit }} AS {{ f }}_p_lo,
        {{ nz.reference[f][1] | lit }} AS {{ f }}_p_hi{{ ',' if not loop.last }}
{% endif %}
{% endfor %}
    FROM features
),
normalized AS (
    SELECT
        *,
{% for f in features_normalised %}
{% if f in by_quantile %}
        {{ quantile_norm(f, f ~ '_p_lo', f ~ '_p_hi', nz.eps, nz.zero_spread_value) }} AS {{ f }}_norm,
        {{ f ~ '_p_hi - ' ~ f ~ '_p_lo = 0' if nz.mode == 'per_query' else 'FALSE' }} AS {{ f }}_zero_spread{{ ',' if not loop.last }}
{% else %}
        {{ clamp(f ~ ' / ' ~ (nz.coverage_max | float | lit)) }} AS {{ f }}_norm,
        FALSE AS {{ f }}_zero_spread{{ ',' if not loop.last }}
{% endif %}
{% endfor %}
    FROM bounds
),
subscores AS (
    SELECT
        *,
        {{ p.alpha | lit }} * {{ evidence }}_norm + (1 - {{ p.alpha | lit }}) * max_score_norm AS s_strength,
        {{ p.beta | lit }} * coverage_norm + (1 - {{ p.beta | lit }}) * {{ ratio }} AS s_coverage,
{% if 'agreement' in extra_subscores %}
        source_agreement AS s_agreement,
{% endif %}
{% if 'separation' in extra_subscores %}
        {{ p.separation_base | lit }} + (1 - {{ p.separation_base | lit }}) * score_lead AS s_separation,
{% endif %}
        {{ clamp(ratio ~ ' * (' ~ (p.stability_base | lit) ~ ' + ' ~ (p.stability_size_weight | lit) ~ ' * log_chunks_norm)') }} AS s_stability
    FROM normalized
),
combined AS (
    SELECT
        *,
        {{ weighted_geomean(geomean_terms, p.subscore_floor) }} AS overall_score
    FROM subscores
),
{# the rank and the scores ranked first and second, from one ordering of the query's parents
    (DuckDB sorts once for window functions of the same partition and order) #}
{% set by_score = 'PARTITION BY query_id ORDER BY overall_score DESC NULLS LAST, parent_id ASC NULLS LAST' %}
{% set whole_query = by_score ~ ' ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING' %}
ranked AS (
    SELECT
        *,
        {{ rank_desc('overall_score', ['query_id'], 'parent_id') }} AS rank,
        first_value(overall_score) OVER ({{ whole_query }}) AS top1_score,
        nth_value(overall_score, 2) OVER ({{ whole_query }}) AS top2_score
    FROM combined
),
flagged AS (
    SELECT
        *,
        top2_score / NULLIF(top1_score, 0) AS top2_ratio,
        s_strength >= {{ p.risk_flags.low_coverage.strength_at_least | lit }}
            AND s_coverage < {{ p.risk_flags.low_coverage.coverage_below | lit }} AS flag_low_coverage,
        max_score_norm >= {{ p.risk_flags.single_spike.max_score_norm_at_least | lit }}
            AND {{ evidence }}_norm < {{ p.risk_flags.single_spike.rrf_sum_norm_below | lit }} AS flag_single_spike,
        coverage_ratio < {{ p.risk_flags.sparse_evidence.coverage_ratio_below | lit }} AS flag_sparse_evidence,
        total_chunks >= {{ p.risk_flags.huge_doc_sparse.total_chunks_at_least | lit }}
            AND coverage_ratio < {{ p.risk_flags.huge_doc_sparse.coverage_ratio_below | lit }} AS flag_huge_doc_sparse,
        coalesce(rank = 2 AND top2_score / NULLIF(top1_score, 0) >= {{ p.risk_flags.ambiguous_candidate.ratio_at_least | lit }}, FALSE) AS flag_ambiguous_candidate
    FROM ranked
),
scored_parents AS (
    SELECT
        query_id,
        parent_id,
        rank,
        overall_score,
        s_strength,
        s_coverage,
        s_stability,
{% for name in extra_subscores %}
        s_{{ name }},
{% endfor %}
        rrf_sum,
{% for c in evidence_columns %}
        {{ c }},
{% endfor %}
        max_score,
        coverage,
        total_chunks,
        coverage_ratio,
{% if smoothing %}
        coverage_ratio_smoothed,
{% endif %}
        log_chunks,
{% for f in features_normalised %}
        {{ f }}_norm,
{% endfor %}
{% for f in by_quantile %}
        {{ f }}_p_lo,
        {{ f }}_p_hi,
{% endfor %}
        n_candidates,
        top2_ratio,
        flag_low_coverage,
        flag_single_spike,
        flag_sparse_evidence,
        flag_huge_doc_sparse,
        flag_ambiguous_candidate,
        list_filter([
            CASE WHEN flag_low_coverage THEN 'low_coverage' END,
            CASE WHEN flag_single_spike THEN 'single_spike' END,
            CASE WHEN flag_sparse_evidence THEN 'sparse_evidence' END,
            CASE WHEN flag_huge_doc_sparse THEN 'huge_doc_sparse' END,
            CASE WHEN flag_ambiguous_candidate THEN 'ambiguous_candidate' END
        ], lambda flag: flag IS NOT NULL) AS risk_flags,
        list_filter([
            CASE WHEN n_candidates = 1 THEN 'single_candidate' END,
{% for f in by_quantile %}
            CASE WHEN {{ f }}_zero_spread THEN 'zero_spread:{{ f }}' END,
{% endfor %}
{% for name in subscore_names %}
            CASE WHEN s_{{ name }} <= 0 THEN 'zero_subscore:{{ name }}' END,
{% endfor %}
{% for name in subscore_names %}
            CASE WHEN s_{{ name }} > 0 AND s_{{ name }} < {{ p.subscore_floor | lit }} THEN 'floored:{{ name }}' END{{ ',' if not loop.last }}
{% endfor %}
        ], lambda flag: flag IS NOT NULL) AS row_flags
    FROM flagged
)
{%- endmacro %}
