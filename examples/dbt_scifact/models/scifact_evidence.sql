-- The package's macros in a model of your own: seed 000's building blocks over the parent
-- features — the parent's RRF normalised between its query's P10 and P90, the log-scaled count
-- of its chunks in the log, their weighted geometric mean, and a rank by it per query.
WITH chunks AS (
    SELECT query_id, parent_id, count(*) AS chunks
    FROM {{ source('scifact', 'retrieval_log') }}
    GROUP BY ALL
),
evidence AS (
    SELECT
        f.query_id,
        f.parent_id,
        {{ duckscore.duckscore_weighted_geomean(
            duckscore.duckscore_quantile_norm(
                'f.rrf_sum',
                'quantile_cont(f.rrf_sum, 0.1) OVER q',
                'quantile_cont(f.rrf_sum, 0.9) OVER q'),
            '0.7',
            duckscore.duckscore_clamp(
                duckscore.duckscore_log_scale('c.chunks') ~ ' / ' ~ duckscore.duckscore_log_scale('60')),
            '0.3') }} AS evidence
    FROM {{ ref('duckscore_parent_features') }} AS f
    JOIN chunks AS c USING (query_id, parent_id)
    WINDOW q AS (PARTITION BY f.query_id)
)
SELECT *, {{ duckscore.duckscore_rank_desc('evidence', 'query_id', 'parent_id') }} AS evidence_rank
FROM evidence
