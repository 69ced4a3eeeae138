{#-
Reliability diagram and expected calibration error (issue 4), for scores in [0, 1].

Context: inputs.predictions (query_id unique, score DOUBLE in [0, 1], outcome INTEGER 0/1),
bins (n ≥ 1), z (Wilson quantile), final ('bins': one row per bin; 'ece': one row).

Stages: preds, binned, bin_ids, bin_stats, bins, ece.

- Bin edge rule: n equal-width bins over [0, 1]; a score s goes to bin
  k = min(floor(s · n), n − 1), computed in doubles. Bin k is [k/n, (k+1)/n) — the lower edge
  belongs to the bin — except the last, [(n−1)/n, 1], which also holds s = 1.
- Every bin is reported, empty ones with count 0 and NULL mean score, accuracy and interval.
- ECE = Σ over non-empty bins of (count / N) · |accuracy − mean score|; NULL for no rows.
-#}
WITH
preds AS (
    SELECT
        query_id,
        score,
        outcome
    FROM {{ inputs.predictions | ident }}
),
binned AS (
    SELECT
        query_id,
        score,
        outcome,
        least(CAST(floor(score * {{ bins | int | lit }}) AS BIGINT), {{ (bins - 1) | int | lit }}) AS bin
    FROM preds
),
bin_ids AS (
    SELECT bin FROM range(0, {{ bins | int | lit }}) AS edges(bin)
),
bin_stats AS (
    SELECT
        bin,
        count(*) AS n,
        sum(outcome) AS n_correct,
        sum(score ORDER BY query_id ASC NULLS LAST) AS score_sum
    FROM binned
    GROUP BY bin
),
bins AS (
    SELECT
        i.bin,
        CAST(i.bin AS DOUBLE) / {{ bins | int | lit }} AS lower_edge,
        CAST(i.bin + 1 AS DOUBLE) / {{ bins | int | lit }} AS upper_edge,
        coalesce(s.n, 0) AS n,
        coalesce(s.n_correct, 0) AS n_correct,
        s.score_sum / NULLIF(s.n, 0) AS mean_score,
        CAST(s.n_correct AS DOUBLE) / NULLIF(s.n, 0) AS accuracy,
        {{ wilson_interval('s.n_correct', 's.n', z, 'lower') }} AS accuracy_wilson_lower,
        {{ wilson_interval('s.n_correct', 's.n', z, 'upper') }} AS accuracy_wilson_upper
    FROM bin_ids AS i
    LEFT JOIN bin_stats AS s ON s.bin = i.bin
),
ece AS (
    SELECT
        sum(CAST(n AS DOUBLE) * abs(accuracy - mean_score) ORDER BY bin ASC NULLS LAST) FILTER (WHERE n > 0)
            / NULLIF(sum(n), 0) AS ece
    FROM bins
)
SELECT * FROM {{ final | ident }}
{% if final == 'bins' %}
ORDER BY bin
{% endif %}
