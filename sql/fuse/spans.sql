{#-
spans.parquet: one row per retrieval span of a trace export, so that a score can be joined back
to its trace.

  query_id      the span's query: its trace id (or its `--query-key`), the query_id of every
                other output
  source        the retriever, as in the retrieval_log
  trace_id      the span's trace id
  span_id       the span's id
  root_span_id  the id of the trace's root span (the span without a parent), when the export
                holds it; NULL when it does not (a partial export, or no parent column)

Reads `inputs.spans`: every span of the export, retrieval or not (query_id: the trace's query,
its trace id unless `--query-key` names another; trace_id, span_id, source,
is_retrieval: false for a nested retriever's, sql/fuse/_ensembles.sql; is_root: NULL when the
export does not say), as sql/fuse/openinference.sql and
sql/fuse/otel_genai.sql give them with `final` = `spans`. A retrieval span that returned no
document has a row too. A trace with several spans without a parent (a malformed export) takes
the smallest of their ids.
-#}
WITH
roots AS (
    SELECT trace_id, min(span_id) AS root_span_id
    FROM {{ inputs.spans | ident }}
    WHERE is_root
    GROUP BY trace_id
),
retrieval_spans AS (
    SELECT
        s.query_id,
        s.source,
        s.trace_id,
        s.span_id,
        r.root_span_id
    FROM {{ inputs.spans | ident }} AS s
    LEFT JOIN roots AS r ON r.trace_id = s.trace_id
    WHERE s.is_retrieval
)
SELECT *
FROM retrieval_spans
ORDER BY query_id, source, span_id
