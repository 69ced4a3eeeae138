{#-
Bootstrap percentile interval of the AUROC (issue 4), reproducible to the last digit.

Context: inputs.predictions (query_id unique, score DOUBLE, outcome INTEGER 0/1), resamples (B ≥ 0),
seed (0 ≤ seed < 2³²), alpha (e.g. 0.05 for a 95% interval), final (the CTE to select).

Stages: preds, sizes, resample_ids, streams, stream_keys, draw_keys, draws, picked, score_groups,
cumulative, per_resample, aurocs, bootstrap_interval.

- Queries are numbered 0 … n−1 by query_id. Resample b (0 … B−1) draws n queries with
  replacement: draw i picks query mix32(mix32(seed ⊕ mix32(b)) ⊕ i) mod n, where mix32 is the
  lowbias32 integer finaliser (x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b;
  x ^= x >> 16, all modulo 2³²) in plain UBIGINT arithmetic: no engine hash or RNG, so the
  draws are the same on every DuckDB version, run and thread count.
- Each resample's AUROC is the Mann–Whitney U of summary.sql, in exact integers; a resample
  with one class only has no AUROC (NULL) and is left out of the quantiles (valid_resamples
  counts the others).
- The interval is quantile_cont(α/2) and quantile_cont(1 − α/2) of the valid AUROCs; NULL when
  none is valid (B = 0, n = 1, or one class only).
-#}
{% macro xorshift(x, bits) -%}
xor({{ x }}, ({{ x }}) >> {{ bits | int | lit }})
{%- endmacro %}
{% macro times(x, constant) -%}
(({{ x }}) * CAST({{ constant | int | lit }} AS UBIGINT)) % CAST({{ 4294967296 | lit }} AS UBIGINT)
{%- endmacro %}
{% macro mix32(x) -%}
{{ xorshift(times(xorshift(times(xorshift(x, 16), 2146121005), 15), 2221713035), 16) }}
{%- endmacro %}
WITH
preds AS (
    SELECT
        score,
        outcome,
        CAST(row_number() OVER (ORDER BY query_id ASC NULLS LAST) - 1 AS UBIGINT) AS slot
    FROM {{ inputs.predictions | ident }}
),
sizes AS (
    SELECT CAST(count(*) AS UBIGINT) AS n FROM preds
),
resample_ids AS (
    SELECT CAST(b AS UBIGINT) AS b FROM range(0, {{ resamples | int | lit }}) AS boots(b)
),
streams AS (
    SELECT
        b,
        xor(CAST({{ seed | int | lit }} AS UBIGINT), {{ mix32('b') }}) AS premix
    FROM resample_ids
),
stream_keys AS (
    SELECT b, {{ mix32('premix') }} AS stream FROM streams
),
draw_keys AS (
    SELECT
        k.b,
        xor(k.stream, p.slot) AS key
    FROM stream_keys AS k
    CROSS JOIN preds AS p
),
draws AS (
    SELECT
        d.b,
        ({{ mix32('d.key') }}) % NULLIF(s.n, 0) AS pick
    FROM draw_keys AS d
    CROSS JOIN sizes AS s
),
picked AS (
    SELECT
        d.b,
        p.score,
        p.outcome
    FROM draws AS d
    JOIN preds AS p ON p.slot = d.pick
),
score_groups AS (
    SELECT
        b,
        score,
        sum(outcome) AS n_pos,
        count(*) - sum(outcome) AS n_neg
    FROM picked
    GROUP BY b, score
),
cumulative AS (
    SELECT
        b,
        n_pos,
        n_neg,
        coalesce(sum(n_neg) OVER (PARTITION BY b ORDER BY score ASC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS neg_below
    FROM score_groups
),
per_resample AS (
    SELECT
        b,
        sum(n_pos * (2 * neg_below + n_neg)) AS twice_u,
        sum(n_pos) AS n_positive,
        sum(n_neg) AS n_negative
    FROM cumulative
    GROUP BY b
),
aurocs AS (
    SELECT
        b,
        CAST(twice_u AS DOUBLE) / NULLIF(2 * n_positive * n_negative, 0) AS auroc
    FROM per_resample
),
bootstrap_interval AS (
    SELECT
        quantile_cont(auroc, {{ (alpha / 2) | float | lit }}) AS ci_lower,
        quantile_cont(auroc, {{ (1 - alpha / 2) | float | lit }}) AS ci_upper,
        count(auroc) AS valid_resamples,
        count(*) AS resamples
    FROM aurocs
)
SELECT * FROM {{ final | ident }}
