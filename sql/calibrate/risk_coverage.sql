{#-
Risk–coverage curve (issue 4): keep the queries scored at or above a threshold, for every
distinct score from the highest down; coverage = kept / N, risk = errors among kept / kept.

Context: inputs.predictions (query_id unique, score DOUBLE, outcome INTEGER 0/1), final.

Stages: preds, score_groups, cumulative, curve.

- Tied scores are kept or dropped together (a threshold cannot split them without an arbitrary
  order), so the curve has one point per distinct score; the last point has coverage 1.
- score_groups holds one row per distinct score, so ordering windows by score alone is total.
-#}
WITH
preds AS (
    SELECT
        score,
        outcome
    FROM {{ inputs.predictions | ident }}
),
score_groups AS (
    SELECT
        score,
        count(*) AS n,
        count(*) - sum(outcome) AS n_errors
    FROM preds
    GROUP BY score
),
cumulative AS (
    SELECT
        score,
        sum(n) OVER (ORDER BY score DESC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS kept,
        sum(n_errors) OVER (ORDER BY score DESC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS errors,
        sum(n) OVER () AS total
    FROM score_groups
),
curve AS (
    SELECT
        score AS threshold,
        kept,
        errors,
        CAST(kept AS DOUBLE) / NULLIF(total, 0) AS coverage,
        CAST(errors AS DOUBLE) / NULLIF(kept, 0) AS risk
    FROM cumulative
)
SELECT * FROM {{ final | ident }}
ORDER BY threshold DESC
