{#-
Calibration summary (issue 4): one row with the ranking and calibration figures of a table of
predictions, one CTE per stage.

Context: inputs.predictions (query_id unique, score DOUBLE finite, outcome INTEGER 0/1),
z (the Wilson normal quantile), final (the CTE to select).

Stages: preds, score_groups, cumulative, totals, summary.

- AUROC in the Mann–Whitney form: the probability that a random positive outscores a random
  negative, ties counting 1/2 (= sklearn roc_auc_score). Computed exactly in integers as
  U2 = Σ over distinct scores of n_pos · (2 · negatives below + negatives at the score), then
  U2 / (2 · P · N). NULL when either class is absent (undefined).
- Average precision as sklearn's average_precision_score: Σ over distinct scores, descending, of
  (n_pos at the score / P) · precision at that threshold (every row with score ≥ it is kept,
  so tied rows enter together). NULL when there is no positive (undefined: recall has no
  denominator); 1 when every row is positive.
- Brier score: mean of (score − outcome)², only when every score is in [0, 1], else NULL.
- score_groups holds one row per distinct score, so ordering windows by score alone is total.
- Float sums are ordered aggregates (by score or query_id), so results do not depend on threads.
-#}
WITH
preds AS (
    SELECT
        query_id,
        score,
        outcome
    FROM {{ inputs.predictions | ident }}
),
score_groups AS (
    SELECT
        score,
        sum(outcome) AS n_pos,
        count(*) - sum(outcome) AS n_neg
    FROM preds
    GROUP BY score
),
cumulative AS (
    SELECT
        score,
        n_pos,
        n_neg,
        sum(n_pos) OVER (ORDER BY score DESC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS tp_at,
        sum(n_neg) OVER (ORDER BY score DESC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS fp_at,
        coalesce(sum(n_neg) OVER (ORDER BY score ASC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS neg_below
    FROM score_groups
),
totals AS (
    SELECT
        count(*) AS n,
        coalesce(sum(outcome), 0) AS n_positive,
        count(*) - coalesce(sum(outcome), 0) AS n_negative,
        min(score) AS min_score,
        max(score) AS max_score,
        sum((score - outcome) * (score - outcome) ORDER BY query_id ASC NULLS LAST) AS squared_error
    FROM preds
),
ranking AS (
    SELECT
        sum(n_pos * (2 * neg_below + n_neg)) AS twice_u,
        sum(CAST(n_pos AS DOUBLE) * tp_at / NULLIF(tp_at + fp_at, 0) ORDER BY score DESC NULLS LAST) AS precision_mass
    FROM cumulative
),
summary AS (
    SELECT
        t.n,
        t.n_positive,
        t.n_negative,
        t.min_score,
        t.max_score,
        coalesce(t.min_score >= {{ 0.0 | lit }} AND t.max_score <= {{ 1.0 | lit }}, FALSE) AS scores_in_unit_interval,
        CAST(t.n_positive AS DOUBLE) / NULLIF(t.n, 0) AS accuracy,
        {{ wilson_interval('t.n_positive', 't.n', z, 'lower') }} AS accuracy_wilson_lower,
        {{ wilson_interval('t.n_positive', 't.n', z, 'upper') }} AS accuracy_wilson_upper,
        CAST(r.twice_u AS DOUBLE) / NULLIF(2 * t.n_positive * t.n_negative, 0) AS auroc,
        r.precision_mass / NULLIF(t.n_positive, 0) AS average_precision,
        CASE WHEN t.min_score >= {{ 0.0 | lit }} AND t.max_score <= {{ 1.0 | lit }}
             THEN t.squared_error / NULLIF(t.n, 0) END AS brier
    FROM totals AS t
    CROSS JOIN ranking AS r
)
SELECT * FROM {{ final | ident }}
