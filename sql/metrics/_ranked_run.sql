{#-
The `ranked` stage shared by sql/metrics/per_query.sql and sql/metrics/labels.sql, so `eval` and
`labels` order a run identically: positions 1, 2, … per query by rank ascending
(order_by = 'rank') or score descending ('score'), ties by doc_id ascending. Imported
`with context`; reads inputs.run and order_by.
-#}
{% macro ranked_run() -%}
ranked AS (
    SELECT
        query_id,
        doc_id,
{% if order_by == 'rank' %}
        row_number() OVER (PARTITION BY query_id ORDER BY rank ASC NULLS LAST, doc_id ASC NULLS LAST) AS position
{% elif order_by == 'score' %}
        row_number() OVER (PARTITION BY query_id ORDER BY score DESC NULLS LAST, doc_id ASC NULLS LAST) AS position
{% else %}
        {{ fail('order_by must be rank or score') }}
{% endif %}
    FROM {{ inputs.run | ident }}
)
{%- endmacro %}
