{#-
Seed 000 §7–§8 and §10: one row per query — best parent, confidence level (§7.2), top-2 ratio
and HITL (§8.1), web fallback (§8.2, including queries with no candidates), thresholds used and
the top-N parents. Reads `inputs.scored_parents`: the stage a runner materialised, or, when
`standalone` is true, the CTE computed from `inputs.parent_features` in the same statement.
With `inputs.query_ids` set, every query listed there gets a row even without candidates.
A policy with a `probability` map (issue 24, fitted by `duckscore calibrate`) adds the stage
`probabilities` and `p_good` to the decisions and the contract; without one, neither appears.
A policy with `diagnostics` (§13, issue 50) adds the stage `query_actions` and `actions` — the
sorted union of the actions its rules give the query's flags (the best parent's, and
ambiguous_candidate, which sits on the runner-up) — and a rule with `need_hitl` raises it;
without the block, neither appears.
-#}
{% from 'score/_parent_stages.sql' import parent_stages with context %}
{% set p = policy %}
{% set prob = p.get('probability') %}
{% set diagnostics = p.get('diagnostics') %}
{% set hitl_flags = (diagnostics or {}).items() | selectattr('1.need_hitl') | map(attribute=0) | list %}
{% set zero, one = 0.0 | lit, 1.0 | lit %}
WITH
{% if standalone %}
{{ parent_stages() }},
{% endif %}
per_query AS (
    -- from the first top-n parents only: the best is among them, top2_ratio is the query's on
    -- every row, and the ordered list is built from top-n rows, not from every candidate
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
        ) AS top_parents
    FROM {{ inputs.scored_parents | ident }}
    WHERE rank <= {{ top_n | int | lit }}
    GROUP BY query_id
),
all_queries AS (
    SELECT query_id FROM per_query
{% if inputs.query_ids %}
    UNION
    SELECT query_id FROM {{ inputs.query_ids | ident }}
{% endif %}
),
{% if diagnostics is not none %}
query_actions AS (
    -- §13: a flag of the query (the best parent's, or the runner-up's ambiguous_candidate)
    -- gives its rule's actions, each once, in order; a query without such a flag has none
    SELECT
        query_id,
        list(action ORDER BY action ASC NULLS LAST) AS actions,
        bool_or(need_hitl) AS rule_needs_hitl
    FROM (
        SELECT f.query_id, r.action, bool_or(r.need_hitl) AS need_hitl
        FROM (
            SELECT query_id, unnest(risk_flags) AS flag
            FROM {{ inputs.scored_parents | ident }}
            WHERE rank = 1
            UNION ALL
            SELECT query_id, 'ambiguous_candidate' AS flag
            FROM {{ inputs.scored_parents | ident }}
            WHERE rank = 2 AND flag_ambiguous_candidate
        ) AS f
        JOIN (
            VALUES
{% for flag, rule in diagnostics.items() %}
{% set outer = loop %}
{% for action in rule.actions %}
                ({{ flag | lit }}, {{ action | lit }}, {{ rule.need_hitl | lit }}){{ ',' if not (loop.last and outer.last) }}
{% endfor %}
{% endfor %}
        ) AS r (flag, action, need_hitl) ON r.flag = f.flag
        GROUP BY f.query_id, r.action
    ) AS acting
    GROUP BY query_id
),
{% endif %}
{% if prob %}
probabilities AS (
    -- P(good answer) from the best OverallScore (0 for a query without candidates)
    SELECT
        s.query_id,
{% if prob.method in ('platt', 'beta') %}
        -- logistic of the logit, in the form whose exp() cannot overflow
        CASE
            WHEN s.logit >= 0 THEN {{ one }} / ({{ one }} + exp(-s.logit))
            ELSE exp(s.logit) / ({{ one }} + exp(s.logit))
        END AS p_good
    FROM (
{% if prob.method == 'platt' %}
        SELECT
            a.query_id,
            {{ prob.platt.intercept | lit }}
            + {{ prob.platt.best_overall_score | lit }} * coalesce(q.best_overall_score, {{ zero }})
            + {{ prob.platt.top2_ratio | lit }} * coalesce(q.top2_ratio, {{ zero }}) AS logit
        FROM all_queries AS a
        LEFT JOIN per_query AS q ON q.query_id = a.query_id
{% else %}
        -- beta calibration (Kull et al. 2017): the logit is linear in ln(x) and ln(1 - x), x the
        -- best score clipped into (0, 1), where both logarithms are finite (beta_clip)
        SELECT
            c.query_id,
            {{ prob.beta.intercept | lit }}
            + {{ prob.beta.ln_score | lit }} * ln(c.x)
            + {{ prob.beta.ln_one_minus_score | lit }} * ln({{ one }} - c.x) AS logit
        FROM (
            SELECT
                a.query_id,
                greatest(
                    least(coalesce(q.best_overall_score, {{ zero }}), {{ (1 - beta_clip) | lit }}),
                    {{ beta_clip | lit }}
                ) AS x
            FROM all_queries AS a
            LEFT JOIN per_query AS q ON q.query_id = a.query_id
        ) AS c
{% endif %}
    ) AS s
{% else %}
{% set x, y = prob.isotonic.x, prob.isotonic.y %}
        -- linear between the breakpoints, constant beyond the first and the last
        CASE
            WHEN s.x <= {{ x[0] | lit }} THEN {{ y[0] | lit }}
            WHEN s.x >= {{ x[-1] | lit }} THEN {{ y[-1] | lit }}
            ELSE m.y_lo + (m.y_hi - m.y_lo) * (s.x - m.x_lo) / nullif(m.x_hi - m.x_lo, {{ zero }})
        END AS p_good
    FROM (
        SELECT a.query_id, coalesce(q.best_overall_score, {{ zero }}) AS x
        FROM all_queries AS a
        LEFT JOIN per_query AS q ON q.query_id = a.query_id
    ) AS s
    LEFT JOIN (
        VALUES
{% for i in range(x | length - 1) %}
            ({{ x[i] | lit }}, {{ x[i + 1] | lit }}, {{ y[i] | lit }}, {{ y[i + 1] | lit }}){{ ',' if not loop.last }}
{% endfor %}
    ) AS m (x_lo, x_hi, y_lo, y_hi) ON s.x >= m.x_lo AND s.x < m.x_hi
{% endif %}
),
{% endif %}
decisions AS (
    SELECT
        a.query_id,
        q.best_parent_id,
        q.best_overall_score,
{% if prob %}
        pr.p_good,
{% endif %}
        CASE
            -- the empty-result decision is low, whatever a probability map makes of score 0
            WHEN q.best_overall_score IS NULL THEN 'low'
{% if prob and prob.levels_by == 'probability' %}
            WHEN pr.p_good < {{ prob.p_low | lit }} THEN 'low'
            WHEN pr.p_good < {{ prob.p_high | lit }} THEN 'medium'
{% else %}
            WHEN q.best_overall_score < {{ p.T_low | lit }} THEN 'low'
            WHEN q.best_overall_score < {{ p.T_high | lit }} THEN 'medium'
{% endif %}
            ELSE 'high'
        END AS confidence_level,
        q.top2_ratio,
        coalesce(q.top2_ratio >= {{ p.R_hitl | lit }}, FALSE){{ ' OR coalesce(qa.rule_needs_hitl, FALSE)' if hitl_flags }} AS need_hitl,
        q.best_parent_id IS NULL AS empty_result,
        coalesce(q.top_parents, []) AS top_parents{{ ',' if diagnostics is not none }}
{% if diagnostics is not none %}
        coalesce(qa.actions, []) AS actions
{% endif %}
    FROM all_queries AS a
    LEFT JOIN per_query AS q ON q.query_id = a.query_id
{% if diagnostics is not none %}
    LEFT JOIN query_actions AS qa ON qa.query_id = a.query_id
{% endif %}
{% if prob %}
    LEFT JOIN probabilities AS pr ON pr.query_id = a.query_id
{% endif %}
),
contract AS (
    SELECT
        {{ policy_version | lit }} AS score_policy_version,
        query_id,
        best_parent_id,
        best_overall_score,
{% if prob %}
        p_good,
{% endif %}
        confidence_level,
        struct_pack(
            T_low := {{ p.T_low | lit }},
            T_high := {{ p.T_high | lit }},
{% if prob and prob.levels_by == 'probability' %}
            p_low := {{ prob.p_low | lit }},
            p_high := {{ prob.p_high | lit }},
{% endif %}
            R_hitl := {{ p.R_hitl | lit }}
        ) AS thresholds_used,
        top_parents,
{% if diagnostics is not none %}
        actions,
{% endif %}
        need_hitl,
        empty_result OR (confidence_level = 'low' AND NOT need_hitl) AS web_fallback,
        top2_ratio
    FROM decisions
)
SELECT * FROM {{ final | ident }}
ORDER BY query_id
