{#-
Every grid point of `duckscore tune` as one run and one set of judgments, so that
sql/metrics/per_query.sql evaluates all of them in one query: each (grid point, query) is its own
query id, the grid point's key (`g000001:`, fixed width) before the query id, the way
sql/calibrate/candidates.sql scores calibration candidates.

Context: grid_points (list of {key, view}: the view is sql/fuse/fused.sql's `ranked` stage for
that grid point's recipe), inputs.qrels (query_id, doc_id, relevance), final ('runs' or 'qrels').
Stages: runs (query_id, doc_id, score, rank: eval's run), grid, qrels (eval's judgments, once per
grid point).
-#}
WITH
runs AS (
{% for g in grid_points %}
    SELECT {{ g.key | lit }} || query_id AS query_id, target_id AS doc_id, fused_score AS score, rank
    FROM {{ g.view | ident }}
{% if not loop.last %}
    UNION ALL
{% endif %}
{% endfor %}
),
grid AS (
    SELECT * FROM (VALUES
{% for g in grid_points %}
        ({{ g.key | lit }}){{ ',' if not loop.last }}
{% endfor %}
    ) AS g (grid_key)
),
qrels AS (
    SELECT g.grid_key || q.query_id AS query_id, q.doc_id, q.relevance
    FROM {{ inputs.qrels | ident }} AS q
    CROSS JOIN grid AS g
)
SELECT * FROM {{ final | ident }}
