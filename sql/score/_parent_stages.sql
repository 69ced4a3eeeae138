{#-
The seed-000 stages, per candidate parent, each a named CTE (§4 normalise, §5 sub-scores,
§6 combine, rank, §7.3 flags). Imported `with context` by parents.sql and queries.sql; reads the
policy parameters from `policy` and the input table name from `inputs.parent_features`.
-#}
{% set p = policy %}
{% set nz = p.normalization %}
{% set features_normalised = ['rrf_sum', 'max_score', 'coverage', 'log_chunks'] %}
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
        {{ log_scale('total_chunks', 1.0) }} AS log_chunks,
        count(*) OVER (PARTITION BY query_id) AS n_candidates
    FROM {{ inputs.parent_features | ident }}
),
bounds AS (
    SELECT
        *,
{% for f in by_quantile %}
{% if nz.mode == 'per_query' %}
        quantile_cont({{ f }}, {{ nz.p_lo | lit }}) OVER (PARTITION BY query_id) AS {{ f }}_p_lo,
        quantile_cont({{ f }}, {{ nz.p_hi | lit }}) OVER (PARTITION BY query_id) AS {{ f }}_p_hi{{ ',' if not loop.last }}
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
        {{ p.alpha | lit }} * rrf_sum_norm + {{ (1 - p.alpha) | lit }} * max_score_norm AS s_strength,
        {{ p.beta | lit }} * coverage_norm + {{ (1 - p.beta) | lit }} * coverage_ratio AS s_coverage,
        {{ clamp('coverage_ratio * (' ~ (p.stability_base | lit) ~ ' + ' ~ (p.stability_size_weight | lit) ~ ' * log_chunks_norm)') }} AS s_stability
    FROM normalized
),
combined AS (
    SELECT
        *,
        {{ weighted_geomean([('s_strength', p.w1), ('s_coverage', p.w2), ('s_stability', p.w3)], p.subscore_floor) }} AS overall_score
    FROM subscores
),
ranked AS (
    SELECT
        *,
        {{ rank_desc('overall_score', ['query_id'], 'parent_id') }} AS rank
    FROM combined
),
top_two AS (
    SELECT
        *,
        max(CASE WHEN rank = 1 THEN overall_score END) OVER (PARTITION BY query_id) AS top1_score,
        max(CASE WHEN rank = 2 THEN overall_score END) OVER (PARTITION BY query_id) AS top2_score
    FROM ranked
),
flagged AS (
    SELECT
        *,
        top2_score / NULLIF(top1_score, 0) AS top2_ratio,
        s_strength >= {{ p.risk_flags.low_coverage.strength_at_least | lit }}
            AND s_coverage < {{ p.risk_flags.low_coverage.coverage_below | lit }} AS flag_low_coverage,
        max_score_norm >= {{ p.risk_flags.single_spike.max_score_norm_at_least | lit }}
            AND rrf_sum_norm < {{ p.risk_flags.single_spike.rrf_sum_norm_below | lit }} AS flag_single_spike,
        coverage_ratio < {{ p.risk_flags.sparse_evidence.coverage_ratio_below | lit }} AS flag_sparse_evidence,
        total_chunks >= {{ p.risk_flags.huge_doc_sparse.total_chunks_at_least | lit }}
            AND coverage_ratio < {{ p.risk_flags.huge_doc_sparse.coverage_ratio_below | lit }} AS flag_huge_doc_sparse,
        coalesce(rank = 2 AND top2_score / NULLIF(top1_score, 0) >= {{ p.risk_flags.ambiguous_candidate.ratio_at_least | lit }}, FALSE) AS flag_ambiguous_candidate
    FROM top_two
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
        rrf_sum,
        max_score,
        coverage,
        total_chunks,
        coverage_ratio,
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
{% for name in ['strength', 'coverage', 'stability'] %}
            CASE WHEN s_{{ name }} <= 0 THEN 'zero_subscore:{{ name }}' END,
{% endfor %}
{% for name in ['strength', 'coverage', 'stability'] %}
            CASE WHEN s_{{ name }} > 0 AND s_{{ name }} < {{ p.subscore_floor | lit }} THEN 'floored:{{ name }}' END{{ ',' if not loop.last }}
{% endfor %}
        ], lambda flag: flag IS NOT NULL) AS row_flags
    FROM flagged
)
{%- endmacro %}
