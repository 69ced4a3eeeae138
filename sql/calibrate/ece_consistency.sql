{#-
Consistency resampling of the expected calibration error (issue 24; Bröcker & Smith 2007): the
ECEs a perfectly calibrated predictor would show with these same predictions and this many
queries — the ECE that sampling alone produces.

Context: inputs.predictions (query_id unique, score DOUBLE in [0, 1]), bins (n ≥ 1, as in
reliability.sql), simulations (≥ 1), seed, final (the CTE to select).

Stages: draws, per_bin, per_simulation, consistency.

- Simulation s redraws every outcome as Bernoulli(score): outcome = u < score, u uniform in
  [0, 1) from the top 53 bits of hash('seed/s/query_id') (DuckDB's hash: the figure is the
  same run to run and thread to thread on one DuckDB version).
- Each simulation's ECE is reliability.sql's: bins k = min(floor(score · n), n − 1), ECE =
  Σ over non-empty bins of (count / N) · |accuracy − mean score|.
- consistency: the mean ECE and its 95th percentile (quantile_cont) over the simulations.
-#}
WITH
draws AS (
    SELECT
        s.simulation,
        p.query_id,
        p.score,
        least(CAST(floor(p.score * {{ bins | int | lit }}) AS BIGINT), {{ (bins - 1) | int | lit }}) AS bin,
        CAST(
            CAST(hash(concat_ws('/', {{ seed | int | lit }}, s.simulation, p.query_id)) >> 11 AS DOUBLE)
            / {{ (2 ** 53) | float | lit }} < p.score AS INTEGER
        ) AS outcome
    FROM {{ inputs.predictions | ident }} AS p
    CROSS JOIN range(0, {{ simulations | int | lit }}) AS s(simulation)
),
per_bin AS (
    SELECT
        simulation,
        bin,
        count(*) AS n,
        sum(outcome) AS n_correct,
        sum(score ORDER BY query_id ASC NULLS LAST) AS score_sum
    FROM draws
    GROUP BY simulation, bin
),
per_simulation AS (
    SELECT
        simulation,
        sum(abs(CAST(n_correct AS DOUBLE) - score_sum) ORDER BY bin ASC NULLS LAST)
            / NULLIF(sum(n), 0) AS ece
    FROM per_bin
    GROUP BY simulation
),
consistency AS (
    SELECT
        count(*) AS simulations,
        avg(ece ORDER BY simulation ASC NULLS LAST) AS ece_mean,
        quantile_cont(ece, {{ 0.95 | lit }}) AS ece_p95
    FROM per_simulation
)
SELECT * FROM {{ final | ident }}
