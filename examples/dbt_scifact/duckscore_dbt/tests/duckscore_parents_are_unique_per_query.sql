-- duckscore_parents: one row per (query, parent), ranked 1, 2, … n within the query
SELECT query_id, count(*) AS parents, count(DISTINCT parent_id) AS distinct_parents,
       count(DISTINCT rank) AS ranks, max(rank) AS last_rank
FROM {{ ref('duckscore_parents') }}
GROUP BY query_id
HAVING count(DISTINCT parent_id) <> count(*) OR count(DISTINCT rank) <> count(*)
    OR min(rank) <> 1 OR max(rank) <> count(*)
