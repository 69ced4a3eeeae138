{#-
Query labels (`duckscore labels`): one row per judged query, `good`, `ambiguous` or `bad`, from
the same run and qrels conventions as `duckscore eval` (sql/metrics/per_query.sql).

Context: inputs.run (query_id, doc_id, score, rank), inputs.qrels (query_id, doc_id, relevance),
order_by ('rank': rank ascending, or 'score': score descending; ties by doc_id ascending),
k (the cutoff, >= 1), final (the CTE to select).

Stages: ranked, judgments, judged, judged_run, run_stats, labels.

- A query is labelled when the qrels judge at least one of its documents; relevant means
  relevance > 0. Run rows of queries without judgments are ignored (no label).
- good: the document at position 1 is relevant. bad: no relevant document at positions 1..k
  (including a judged query absent from the run, and one with no relevant judgment).
  ambiguous: otherwise (the first relevant document is at a position from 2 to k).
- first_relevant_rank is the position of the first relevant document in the whole run (null when
  the run holds none), so it may exceed k for a `bad` query; n_relevant counts the relevant
  judgments of the query, as in `duckscore eval`.
-#}
{% if k is number and ((k | int) < 1 or (k | int) != k) %}{{ fail('k must be a whole number >= 1') }}{% endif %}
{% from 'metrics/_ranked_run.sql' import ranked_run with context %}
WITH
{{ ranked_run() }},
judgments AS (
    SELECT
        query_id,
        doc_id,
        relevance > 0 AS is_relevant
    FROM {{ inputs.qrels | ident }}
),
judged AS (
    SELECT
        query_id,
        count(*) FILTER (WHERE is_relevant) AS n_relevant
    FROM judgments
    GROUP BY query_id
),
judged_run AS (
    SELECT
        r.query_id,
        r.doc_id,
        r.position,
        coalesce(j.is_relevant, FALSE) AS is_relevant
    FROM ranked AS r
    JOIN judged AS e ON e.query_id = r.query_id
    LEFT JOIN judgments AS j ON j.query_id = r.query_id AND j.doc_id = r.doc_id
),
run_stats AS (
    SELECT
        query_id,
        min(doc_id) FILTER (WHERE position = 1) AS top1_doc_id,
        min(position) FILTER (WHERE is_relevant) AS first_relevant_rank
    FROM judged_run
    GROUP BY query_id
),
labels AS (
    SELECT
        e.query_id,
        CASE
            WHEN s.first_relevant_rank = 1 THEN 'good'
            WHEN s.first_relevant_rank IS NULL OR s.first_relevant_rank > {{ k | int | lit }} THEN 'bad'
            ELSE 'ambiguous'
        END AS label,
        s.top1_doc_id,
        s.first_relevant_rank,
        e.n_relevant
    FROM judged AS e
    LEFT JOIN run_stats AS s ON s.query_id = e.query_id
)
SELECT * FROM {{ final | ident }}
ORDER BY query_id
