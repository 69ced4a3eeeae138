-- duckscore_fused: within each query the ranks are 1, 2, … n, each once (n the query's items)
SELECT query_id, count(*) AS items, count(DISTINCT rank) AS ranks, min(rank) AS first_rank,
       max(rank) AS last_rank
FROM {{ ref('duckscore_fused') }}
GROUP BY query_id
HAVING count(rank) <> count(*) OR count(DISTINCT rank) <> count(*) OR min(rank) <> 1
    OR max(rank) <> count(*)
