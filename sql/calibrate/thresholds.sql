{#-
Seed 000 §9.2 thresholds per fit, from the best overall score and top-2 ratio of each labelled
training query (issue 4).

- quantile method (the seed): T_low = P[bad_quantile] of the `bad` scores (P90: 90% of bad
  queries fall below it), T_high = P[good_quantile] of the `good` scores (P10: 90% of good
  queries reach it). The caller refuses the result when T_low ≥ T_high.
- precision method (beside the seed, measured in the report): T_high = the lowest score t
  at which the `good` share among the queries scoring ≥ t reaches target_precision;
  T_low = the seed's P90 of bad, lowered to T_high when it would exceed it (no medium band).
- R_hitl = P[hitl_quantile] (from the seed's P50–P70 band) of the `ambiguous` top-2 ratios
  (queries with one candidate have no ratio and are left out).

Quantiles are continuous (quantile_cont). Context: inputs.predictions (fit, query_id, score,
top2_ratio, label), bad_quantile, good_quantile, hitl_quantile, target_precision, final.
Stages: class_stats, score_groups, cumulative, precise_enough, thresholds.
-#}
WITH
class_stats AS (
    SELECT
        fit,
        count(*) FILTER (WHERE label = 'good') AS n_good,
        count(*) FILTER (WHERE label = 'ambiguous') AS n_ambiguous,
        count(*) FILTER (WHERE label = 'bad') AS n_bad,
        count(top2_ratio) FILTER (WHERE label = 'ambiguous') AS n_ambiguous_ratios,
        quantile_cont(score, {{ bad_quantile | lit }}) FILTER (WHERE label = 'bad') AS bad_quantile_score,
        quantile_cont(score, {{ good_quantile | lit }}) FILTER (WHERE label = 'good') AS good_quantile_score,
        quantile_cont(top2_ratio, {{ hitl_quantile | lit }}) FILTER (WHERE label = 'ambiguous') AS ambiguous_ratio_quantile
    FROM {{ inputs.predictions | ident }}
    GROUP BY fit
),
score_groups AS (
    SELECT
        fit,
        score,
        count(*) FILTER (WHERE label = 'good') AS n_good,
        count(*) AS n
    FROM {{ inputs.predictions | ident }}
    GROUP BY fit, score
),
cumulative AS (
    SELECT
        fit,
        score,
        sum(n_good) OVER (PARTITION BY fit ORDER BY score DESC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS good_at_or_above,
        sum(n) OVER (PARTITION BY fit ORDER BY score DESC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS at_or_above
    FROM score_groups
),
precise_enough AS (
    SELECT
        fit,
        min(score) AS lowest_precise_score
    FROM cumulative
    WHERE CAST(good_at_or_above AS DOUBLE) / NULLIF(at_or_above, 0) >= {{ target_precision | lit }}
    GROUP BY fit
),
thresholds AS (
    SELECT
        s.*,
        p.lowest_precise_score
    FROM class_stats AS s
    LEFT JOIN precise_enough AS p ON p.fit = s.fit
)
SELECT * FROM {{ final | ident }}
ORDER BY fit
