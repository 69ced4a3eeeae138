{#-
AUROC per group (calibrate's ablation, issue 4): the Mann–Whitney form of summary.sql — the
probability that a positive outscores a negative, ties counting 1/2 — computed exactly in
integers per (fit, candidate). NULL when a group lacks a class.

Context: inputs.predictions (fit, candidate, query_id, score, outcome 0/1), final.
Stages: score_groups, cumulative, aurocs.
-#}
WITH
score_groups AS (
    SELECT
        fit,
        candidate,
        score,
        sum(outcome) AS n_pos,
        count(*) - sum(outcome) AS n_neg
    FROM {{ inputs.predictions | ident }}
    GROUP BY fit, candidate, score
),
cumulative AS (
    SELECT
        *,
        coalesce(sum(n_neg) OVER (PARTITION BY fit, candidate ORDER BY score ASC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS neg_below
    FROM score_groups
),
aurocs AS (
    SELECT
        fit,
        candidate,
        sum(n_pos) AS n_positive,
        sum(n_neg) AS n_negative,
        CAST(sum(n_pos * (2 * neg_below + n_neg)) AS DOUBLE) / NULLIF(2 * sum(n_pos) * sum(n_neg), 0) AS auroc
    FROM cumulative
    GROUP BY fit, candidate
)
SELECT * FROM {{ final | ident }}
ORDER BY fit, candidate
