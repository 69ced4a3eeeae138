{#-
Seed 002 §12: the acceptance gates that logs can measure, one row of values. Nearest-rank P95:
the ceil(0.95 n)-th smallest value. With a --ragas table (`ragas`), §12.1's RAGAS gates follow:
each metric's mean over the queries that have a value, and how many have one.
-#}
{% macro p95(table, column) -%}
(SELECT list_sort(list({{ column }}) FILTER (WHERE {{ column }} IS NOT NULL))[CAST(ceil({{ 0.95 | lit }} * count({{ column }})) AS BIGINT)]
 FROM {{ table }})
{%- endmacro %}
SELECT
    (SELECT count(*) FILTER (WHERE resolvable) / NULLIF(count(chunk_id), 0) FROM claim_citation_checks) AS citation_resolution_rate,
    (SELECT count(*) FILTER (WHERE status = 'unsupported_claim') / NULLIF(count(*), 0) FROM claim_results) AS unsupported_claim_rate,
    {{ p95('queries', 'retrieval_ms') }} AS retrieval_p95_ms,
    {{ p95('evaluations', 'scoring_ms') }} AS scoring_p95_ms,
    (SELECT count(*) FILTER (WHERE degraded) / NULLIF(count(*), 0) FROM candidates) AS rerank_degradation_ratio{{ ',' if ragas_metrics }}
    {% for metric in ragas_metrics %}
    (SELECT list_avg(list({{ metric | ident }} ORDER BY query_id ASC NULLS LAST)) FROM ragas) AS {{ metric | ident }},
    (SELECT count({{ metric | ident }}) FROM ragas) AS {{ (metric ~ '_measured') | ident }}{{ ',' if not loop.last }}
    {% endfor %}
