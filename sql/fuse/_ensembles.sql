{#-
Nested retrievers, for the trace readers (sql/fuse/openinference.sql, sql/fuse/otel_genai.sql):
a retrieval span with another retrieval span below it in its trace that returned a document,
through any spans between, holds its children's lists already fused (an ensemble, a fusion or
multi-query retriever). Read as one more source, the same evidence would count twice: it is not
a retrieval of the log. A retrieval span below which no retrieval span returned a document is a
leaf (LlamaIndex's `BM25Retriever.retrieve` has an empty `_retrieve` span below it).

`ensembles(rows, name)`: three CTEs, the last named `name`, over `rows` (trace_id, span_id,
parent_span_id: NULL for a root, is_retrieval, returned: the span listed a document):
retriever_ancestors, every (trace, span) above a retrieval span that returned a document (UNION:
a cycle in a malformed export ends); ensembles, the retrieval spans among them; and `name`, the
rows with is_retrieval false for an ensemble and is_ensemble beside it.
-#}
{% macro ensembles(rows, name) -%}
retriever_ancestors AS (
    SELECT trace_id, parent_span_id AS ancestor_id
    FROM {{ rows | ident }}
    WHERE is_retrieval AND returned AND parent_span_id IS NOT NULL
    UNION
    SELECT s.trace_id, s.parent_span_id
    FROM retriever_ancestors AS a
    JOIN {{ rows | ident }} AS s ON s.trace_id = a.trace_id AND s.span_id = a.ancestor_id
    WHERE s.parent_span_id IS NOT NULL
),
ensembles AS (
    SELECT DISTINCT s.trace_id, s.span_id
    FROM retriever_ancestors AS a
    JOIN {{ rows | ident }} AS s ON s.trace_id = a.trace_id AND s.span_id = a.ancestor_id
    WHERE s.is_retrieval
),
{{ name | ident }} AS (
    SELECT
        r.* REPLACE (r.is_retrieval AND e.span_id IS NULL AS is_retrieval),
        e.span_id IS NOT NULL AS is_ensemble
    FROM {{ rows | ident }} AS r
    LEFT JOIN ensembles AS e ON e.trace_id = r.trace_id AND e.span_id = r.span_id
)
{%- endmacro %}
