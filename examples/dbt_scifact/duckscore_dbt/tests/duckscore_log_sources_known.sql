-- duckscore_log_sources_known: a row for each source of the log the models do not fuse, each source the recipe
-- declares that the log lacks, and the hits without a source (`dbt show --select duckscore_log_sources_known`).
-- recipe canonical_rrf fuses every source of a log, as `duckscore run` does; the models fuse dense, sparse, summary.
WITH log_sources AS (
    SELECT CAST(source AS VARCHAR) AS source, count(*) AS hits
    FROM {{ source(var('duckscore_source_name'), var('duckscore_source_table')) }}
    GROUP BY ALL
)
SELECT source,
    CASE WHEN source IS NULL THEN 'no source: duckscore run refuses such hits'
        ELSE 'not fused: the package fuses dense, sparse, summary; generate it again with `duckscore dbt package --log` on this log' END AS problem,
    hits
FROM log_sources
WHERE source IS NULL OR source NOT IN ('dense', 'sparse', 'summary')
ORDER BY source NULLS FIRST
