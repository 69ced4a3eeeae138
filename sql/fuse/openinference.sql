{#-
A retrieval log from OpenInference trace spans (Arize Phoenix's span export, Parquet or JSON
Lines: one row per span, attributes flattened into columns named `attributes.<key>`). Each
RETRIEVER span is one source's result list for one query:

  query_id    the span's trace id (a trace answers one query)
  source      the span's name (the retriever)
  item_id     retrieval.documents[i].document.id
  parent_id   the document metadata's `parent_id`, else the document id (a document is its own
              parent)
  granularity, block_type, total_chunks
              the document metadata's keys of those names, when it has them (NULL otherwise,
              as a log without the columns): a chunk's count of siblings is what seed 000's
              stability reads
  score       retrieval.documents[i].document.score; a document without one ranks by its
              position (score −rank, as a rank-only log)
  rank        the document's position in the span's list, from 1
  snippet     retrieval.documents[i].document.content
  query_text  input.value
  trace_id, span_id   the span's ids, kept beside the hit

Other spans (the chain, the LLM, a reranker's) are not retrievals and are left out. Reads
`inputs.spans` (the raw spans, every column, and their row numbers in `row_column`); `metadata_is_text`: the metadata is a JSON string
(the specification's form) rather than a struct; `has_score`, `has_content`: the documents carry a score, a content.

`final`: `hits` (the rows above), or `spans`: every span, retrieval or not — trace_id, span_id,
source, is_retrieval, and is_root (the span has no parent; NULL when the export has no
`parent_id` column, Phoenix's span parent) — which sql/fuse/spans.sql reads; `has_parent`: the
spans have that column.
-#}
{% set document = 'd.document' %}
{% set metadata = document ~ '."document.metadata"' %}
{% set metadata_json = metadata if metadata_is_text else 'to_json(' ~ metadata ~ ')' %}
WITH
spans AS (
    SELECT
        {{ row_column | ident }} AS span_row,
        CAST("context.trace_id" AS VARCHAR) AS trace_id,
        CAST("context.span_id" AS VARCHAR) AS span_id,
        name AS source,
        coalesce("attributes.openinference.span.kind" = {{ 'RETRIEVER' | lit }}, FALSE) AS is_retrieval,
{% if has_parent %}
        coalesce(CAST(parent_id AS VARCHAR), {{ '' | lit }}) = {{ '' | lit }} AS is_root,
{% else %}
        CAST(NULL AS BOOLEAN) AS is_root,
{% endif %}
        "attributes.input.value" AS query_text,
        "attributes.retrieval.documents" AS documents
    FROM {{ inputs.spans | ident }}
),
documents AS (
    SELECT
        span_row, trace_id, span_id, source, query_text,
        unnest(documents) AS document,
        generate_subscripts(documents, 1) AS position
    FROM spans
    WHERE is_retrieval
)
{% if final == 'spans' %}
SELECT trace_id, span_id, source, is_retrieval, is_root
FROM spans
{% else %}
SELECT
    trace_id AS query_id,
    source,
    CAST(d.document."document.id" AS VARCHAR) AS item_id,
    coalesce(
        json_extract_string({{ metadata_json }}, {{ '$.parent_id' | lit }}),
        CAST(d.document."document.id" AS VARCHAR)
    ) AS parent_id,
    json_extract_string({{ metadata_json }}, {{ '$.granularity' | lit }}) AS granularity,
    json_extract_string({{ metadata_json }}, {{ '$.block_type' | lit }}) AS block_type,
    -- a number, for the contract to check (whole, >= 0); text that is no number becomes NaN,
    -- which the contract refuses naming the row, rather than NULL, which it would take
    CASE WHEN json_extract_string({{ metadata_json }}, {{ '$.total_chunks' | lit }}) IS NOT NULL
         THEN coalesce(TRY_CAST(json_extract_string({{ metadata_json }}, {{ '$.total_chunks' | lit }}) AS DOUBLE), {{ 'NaN' | lit }}::DOUBLE)
    END AS total_chunks,
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
    trace_id,
    span_id
FROM documents AS d
ORDER BY span_row, position
{% endif %}
