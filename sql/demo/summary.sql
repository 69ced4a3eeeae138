{#-
Demo summary: per confidence level, how many queries, how often the best parent is relevant
according to the human judgments (qrels), and how many ask for a human or fall back to the web.
-#}
WITH
judged AS (
    SELECT
        d.query_id,
        d.confidence_level,
        d.need_hitl,
        d.web_fallback,
        coalesce(r.relevance > 0, FALSE) AS best_is_relevant
    FROM {{ inputs.decisions | ident }} AS d
    LEFT JOIN {{ inputs.qrels | ident }} AS r
        ON r.query_id = d.query_id AND r.parent_id = d.best_parent_id
),
levels AS (
    SELECT
        coalesce(confidence_level, 'all') AS confidence_level,
        count(*) AS queries,
        avg(CASE WHEN best_is_relevant THEN 1 ELSE 0 END) AS top1_relevant,
        count(*) FILTER (WHERE need_hitl) AS need_hitl,
        count(*) FILTER (WHERE web_fallback) AS web_fallback
    FROM judged
    GROUP BY ROLLUP (confidence_level)
)
SELECT * FROM levels
ORDER BY CASE confidence_level WHEN 'high' THEN 1 WHEN 'medium' THEN 2 WHEN 'low' THEN 3 ELSE 4 END
