{#-
Precision per confidence level (issue 4): for each value of the `level` column, how many
queries carry it, how many of them were right, and the Wilson interval of that precision.

Context: inputs.predictions (query_id unique, score DOUBLE, outcome INTEGER 0/1, level),
z (Wilson quantile), final.

Stages: preds, per_level.

- A NULL level is a level of its own (reported as null).
- Rows are ordered by mean score descending, then level, so the most confident level comes first.
-#}
WITH
preds AS (
    SELECT
        query_id,
        level,
        score,
        outcome
    FROM {{ inputs.predictions | ident }}
),
per_level AS (
    SELECT
        level,
        count(*) AS n,
        sum(outcome) AS n_correct,
        CAST(sum(outcome) AS DOUBLE) / NULLIF(count(*), 0) AS precision,
        {{ wilson_interval('sum(outcome)', 'count(*)', z, 'lower') }} AS precision_wilson_lower,
        {{ wilson_interval('sum(outcome)', 'count(*)', z, 'upper') }} AS precision_wilson_upper,
        sum(score ORDER BY query_id ASC NULLS LAST) / NULLIF(count(*), 0) AS mean_score
    FROM preds
    GROUP BY level
)
SELECT * FROM {{ final | ident }}
ORDER BY mean_score DESC NULLS LAST, level ASC NULLS LAST
