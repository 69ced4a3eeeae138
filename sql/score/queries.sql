{#-
Seed 000 §7–§8 and §10: one row per query — best parent, confidence level (§7.2), top-2 ratio
and HITL (§8.1), web fallback (§8.2, including queries with no candidates), thresholds used and
the top-N parents. Reads `inputs.scored_parents` (materialised by the runner), or, when
`standalone` is true, computes it from `inputs.parent_features` in the same statement.
With `inputs.query_ids` set, every query listed there gets a row even without candidates.
-#}
{% from 'score/_parent_stages.sql' import parent_stages with context %}
{% set p = policy %}
WITH
{% if standalone %}
{{ parent_stages() }},
{% endif %}
per_query AS (
    SELECT
        query_id,
        max(CASE WHEN rank = 1 THEN parent_id END) AS best_parent_id,
        max(CASE WHEN rank = 1 THEN overall_score END) AS best_overall_score,
        max(top2_ratio) AS top2_ratio,
        list(
            struct_pack(
                parent_id := parent_id,
                overall_score := overall_score,
                strength := s_strength,
                coverage := s_coverage,
                stability := s_stability,
                risk_flags := risk_flags
            ) ORDER BY rank ASC NULLS LAST
        ) FILTER (WHERE rank <= {{ top_n | int | lit }}) AS top_parents
    FROM {{ 'scored_parents' if standalone else inputs.scored_parents | ident }}
    GROUP BY query_id
),
all_queries AS (
    SELECT query_id FROM per_query
{% if inputs.query_ids %}
    UNION
    SELECT query_id FROM {{ inputs.query_ids | ident }}
{% endif %}
),
decisions AS (
    SELECT
        a.query_id,
        q.best_parent_id,
        q.best_overall_score,
        CASE
            WHEN q.best_overall_score IS NULL THEN 'low'
            WHEN q.best_overall_score < {{ p.T_low | lit }} THEN 'low'
            WHEN q.best_overall_score < {{ p.T_high | lit }} THEN 'medium'
            ELSE 'high'
        END AS confidence_level,
        q.top2_ratio,
        coalesce(q.top2_ratio >= {{ p.R_hitl | lit }}, FALSE) AS need_hitl,
        q.best_parent_id IS NULL AS empty_result,
        coalesce(q.top_parents, []) AS top_parents
    FROM all_queries AS a
    LEFT JOIN per_query AS q ON q.query_id = a.query_id
),
contract AS (
    SELECT
        {{ policy_version | lit }} AS score_policy_version,
        query_id,
        best_parent_id,
        best_overall_score,
        confidence_level,
        struct_pack(
            T_low := {{ p.T_low | lit }},
            T_high := {{ p.T_high | lit }},
            R_hitl := {{ p.R_hitl | lit }}
        ) AS thresholds_used,
        top_parents,
        need_hitl,
        empty_result OR (confidence_level = 'low' AND NOT need_hitl) AS web_fallback,
        top2_ratio
    FROM decisions
)
SELECT * FROM {{ final | ident }}
ORDER BY query_id
