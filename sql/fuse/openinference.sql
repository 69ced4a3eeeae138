{#-
A retrieval log from OpenInference trace spans (Arize Phoenix's span export, Parquet or JSON
Lines: one row per span, attributes flattened into columns named `attributes.<key>`). Each
RETRIEVER span is one source's result list for one query:

  query_id    the span's trace id (a trace answers one query)
  source      the span's name (the retriever)
  item_id     retrieval.documents[i].document.id
  parent_id   the document metadata's `parent_id`, else the document id (a document is its own
              parent)
  score       retrieval.documents[i].document.score; a document without one ranks by its
              position (score −rank, as a rank-only log)
  rank        the document's position in the span's list, from 1
  snippet     retrieval.documents[i].document.content
  query_text  input.value
  trace_id, span_id   the span's ids, kept beside the hit

Other spans (the chain, the LLM, a reranker's) are not retrievals and are left out. Reads
`inputs.spans` (the raw spans, every column, and their row numbers in `row_column`); `metadata_is_text`: the metadata is a JSON string
(the specification's form) rather than a struct; `has_score`, `has_content`: the documents carry a score, a content.
-#}
{% set document = 'd.document' %}
{% set metadata = document ~ '."document.metadata"' %}
WITH
retrievers AS (
    SELECT
        {{ row_column | ident }} AS span_row,
        "context.trace_id" AS trace_id,
        "context.span_id" AS span_id,
        name AS source,
        "attributes.input.value" AS query_text,
        "attributes.retrieval.documents" AS documents
    FROM {{ inputs.spans | ident }}
    WHERE "attributes.openinference.span.kind" = {{ 'RETRIEVER' | lit }}
),
documents AS (
    SELECT
        span_row, trace_id, span_id, source, query_text,
        unnest(documents) AS document,
        generate_subscripts(documents, 1) AS position
    FROM retrievers
)
SELECT
    CAST(trace_id AS VARCHAR) AS query_id,
    source,
    CAST(d.document."document.id" AS VARCHAR) AS item_id,
    coalesce(
        json_extract_string({{ metadata if metadata_is_text else 'to_json(' ~ metadata ~ ')' }}, {{ '$.parent_id' | lit }}),
        CAST(d.document."document.id" AS VARCHAR)
    ) AS parent_id,
{% if has_score %}
    coalesce(CAST(d.document."document.score" AS DOUBLE), -CAST(position AS DOUBLE)) AS score,
{% else %}
    -CAST(position AS DOUBLE) AS score,
{% endif %}
    position AS rank,
{% if has_content %}
    CAST(d.document."document.content" AS VARCHAR) AS snippet,
{% endif %}
    query_text,
    CAST(trace_id AS VARCHAR) AS trace_id,
    CAST(span_id AS VARCHAR) AS span_id
FROM documents AS d
ORDER BY span_row, position
