{#-
`duckscore recalibrate` (issue 32): a policy's thresholds moved to a new domain without labels —
each to the quantile of the new domain's distribution at which the calibration queries held it
(the shares recorded in the policy's metadata.score_distribution) — and the shares that given
thresholds take there. A query without candidates counts as best score 0 and top-2 ratio 0
(always low, never HITL), as in the recorded shares.

Stage `quantiles` gives the new domain's best scores and top-2 ratios at the quantile `levels`
(0 … 1), a row each, in order: the quantile adaptation of p_good pairs the scores with the
calibration's own, and the new policy records both (a later diagnosis compares with them).

Context: inputs.decisions (query_id, best_overall_score, top2_ratio); below_T_low, below_T_high,
hitl (the recorded shares); levels (a list); thresholds (T_low, T_high, R_hitl) for stage
shares, else none; final. Stages: domain_values, moved, quantiles, shares.
-#}
WITH
domain_values AS (
    SELECT
        coalesce(best_overall_score, {{ 0.0 | lit }}) AS score,
        coalesce(top2_ratio, {{ 0.0 | lit }}) AS ratio
    FROM {{ inputs.decisions | ident }}
),
moved AS (
    SELECT
        count(*) AS queries,
        quantile_cont(score, {{ below_T_low | lit }}) AS T_low,
        quantile_cont(score, {{ below_T_high | lit }}) AS T_high,
        quantile_cont(ratio, {{ (1.0 - hitl) | lit }}) AS R_hitl
    FROM domain_values
),
quantiles AS (
    SELECT
        unnest(quantile_cont(score, {{ levels | lit }})) AS best_score,
        unnest(quantile_cont(ratio, {{ levels | lit }})) AS top2_ratio
    FROM domain_values
){% if thresholds %},
shares AS (
    SELECT
        count(*) AS queries,
        count(*) FILTER (WHERE score < {{ thresholds.T_low | lit }}) / nullif(count(*), 0) AS below_T_low,
        count(*) FILTER (WHERE score < {{ thresholds.T_high | lit }}) / nullif(count(*), 0) AS below_T_high,
        count(*) FILTER (WHERE ratio >= {{ thresholds.R_hitl | lit }}) / nullif(count(*), 0) AS hitl
    FROM domain_values
){% endif %}
SELECT * FROM {{ final | ident }}
