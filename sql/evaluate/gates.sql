{#-
Seed 002 §12: the acceptance gates that logs can measure, one row of values. Nearest-rank P95:
the ceil(0.95 n)-th smallest value.
-#}
{% macro p95(table, column) -%}
(SELECT max({{ column }}) FROM (
    SELECT {{ column }}, row_number() OVER (ORDER BY {{ column }} ASC NULLS LAST, {{ column }} ASC NULLS LAST) AS position,
           count(*) OVER () AS n
    FROM {{ table }}
    WHERE {{ column }} IS NOT NULL
) WHERE position = ceil({{ 0.95 | lit }} * n))
{%- endmacro %}
SELECT
    (SELECT count(*) FILTER (WHERE resolvable) / NULLIF(count(chunk_id), 0) FROM claim_citation_checks) AS citation_resolution_rate,
    (SELECT count(*) FILTER (WHERE status = 'unsupported_claim') / NULLIF(count(*), 0) FROM claim_results) AS unsupported_claim_rate,
    {{ p95('queries', 'retrieval_ms') }} AS retrieval_p95_ms,
    {{ p95('evaluations', 'scoring_ms') }} AS scoring_p95_ms,
    (SELECT count(*) FILTER (WHERE degraded) / NULLIF(count(*), 0) FROM candidates) AS rerank_degradation_ratio
