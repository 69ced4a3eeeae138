{#-
Retrieval evaluation (`duckscore eval`): the mean of every metric over the evaluated queries.
Reads `inputs.per_query` (the per-query metrics of metrics/per_query.sql, materialised by the
runner). Context: metrics (list of {column}). Sums run in query_id order, so the means do not
depend on the thread count.
-#}
WITH
means AS (
    SELECT
        count(*) AS n_queries,
{% for m in metrics %}
        sum({{ m.column | ident }} ORDER BY query_id ASC NULLS LAST) / NULLIF(count(*), 0) AS {{ m.column | ident }}{{ ',' if not loop.last }}
{% endfor %}
    FROM {{ inputs.per_query | ident }}
)
SELECT * FROM means
