{#-
A retrieval log from OTLP JSON exports of spans that follow the OpenTelemetry GenAI semantic
conventions for retrieval (the collector's file exporter: one ExportTraceServiceRequest per
line, resourceSpans → scopeSpans → spans, attributes as key/value pairs). Each span whose
`gen_ai.operation.name` is `retrieval` is one list of a source for one query:

  query_id    the span's traceId (a trace answers one query)
  source      `gen_ai.data_source.id`, else the span's name
  item_id     the document's `id` in `gen_ai.retrieval.documents` (a JSON string, or the
              structured form: an array of key/value lists)
  parent_id   the document's `parent_id`, else its id
  score       the document's `score`; a document without one is given −rank (as a rank-only log)
  rank        the document's position in the list, from 1
  query_text  `gen_ai.retrieval.query.text`
  trace_id, span_id   the span's ids, kept beside the hit
An empty id, name or parent_id is an absent one (OTLP: an empty traceId or spanId is invalid).

A source that ran more than once in a trace (several retrieval spans of one source: a
multi-query retriever's sub-queries) gives one list, as in sql/fuse/openinference.sql: each
document at its best position in any of the spans (its score the largest it was given, its
parent from the span of its best position), ordered by that position, then by the score, higher
first, then by the spans' order in the export, and ranked 1, 2, … in that order. A retrieval
span with another retrieval span below it (by `parentSpanId`, through any spans between) is left
out: its documents are its children's, already fused (sql/fuse/_ensembles.sql).

Reads the export requests as JSON objects through `inputs.lines` (column `json`, the file in
`file_column` and the request's number in it in `row_column`). Attribute values are OTLP
AnyValues: a string, double, int (a string in OTLP JSON) or bool value is read as such; every
attribute but the operation name may be absent; a retrieval span needs a traceId, a spanId and
a source, and each of its documents an id, and a score (when given) is a finite number of at
most `log_rules.score_max` in magnitude (the retrieval_log contract's, traces.py's LOG_RULES).

`final`:
  hits      the rows above
  spans     every span, retrieval or not — trace_id, span_id, source, is_retrieval, and is_root
            (its `parentSpanId` is empty or absent) — which sql/fuse/spans.sql reads
  faults    the first retrieval span or document that cannot be read (file, place, span_id,
            attribute, problem, value), or no row
  summary   one row: hits, unscored and unscored_lists (the documents without a score in a list
            whose other documents have one, and those lists), retrieval_spans, traces, and
            ensembles (the retrieval spans left out as nested retrievers)
-#}
{% from 'fuse/_ensembles.sql' import ensembles %}
{% macro any_value(value) -%}
coalesce(json_extract({{ value }}, '$.stringValue'), json_extract({{ value }}, '$.doubleValue'), json_extract({{ value }}, '$.intValue'), json_extract({{ value }}, '$.boolValue'))
{%- endmacro %}
{% macro attribute(name) -%}
json_extract(list_filter(json_extract(span, '$.attributes[*]'), lambda a: json_extract_string(a, '$.key') = {{ name | lit }})[1], '$.value')
{%- endmacro %}
{% set bad_score = 'score_text IS NOT NULL AND NOT coalesce(isfinite(document_score), FALSE)' %}
{% set huge_score = 'abs(document_score) > ' ~ (log_rules.score_max | lit) %}
{% set huge_problem = 'is outside the log\'s range, -' ~ log_rules.score_max ~ ' to ' ~ log_rules.score_max %}
WITH RECURSIVE
spans AS (
    SELECT
        request_file, request,
        unnest(spans) AS span,
        generate_subscripts(spans, 1) AS span_index
    FROM (
        SELECT
            {{ file_column | ident }} AS request_file,
            {{ row_column | ident }} AS request,
            json_extract(json, '$.resourceSpans[*].scopeSpans[*].spans[*]') AS spans
        FROM {{ inputs.lines | ident }}
    )
),
span_rows AS (
    SELECT
        request_file, request, span_index,
        nullif(json_extract_string(span, '$.traceId'), {{ '' | lit }}) AS trace_id,
        nullif(json_extract_string(span, '$.spanId'), {{ '' | lit }}) AS span_id,
        coalesce(
            nullif(json_extract_string({{ attribute('gen_ai.data_source.id') }}, '$.stringValue'), {{ '' | lit }}),
            nullif(json_extract_string(span, '$.name'), {{ '' | lit }})
        ) AS source,
        coalesce(json_extract_string({{ attribute('gen_ai.operation.name') }}, '$.stringValue') = {{ 'retrieval' | lit }}, FALSE) AS is_retrieval,
        nullif(json_extract_string(span, '$.parentSpanId'), {{ '' | lit }}) AS parent_span_id,
        coalesce(json_extract_string(span, '$.parentSpanId'), {{ '' | lit }}) = {{ '' | lit }} AS is_root,
        json_extract_string({{ attribute('gen_ai.retrieval.query.text') }}, '$.stringValue') AS query_text,
        {{ attribute('gen_ai.retrieval.documents') }} AS documents
    FROM spans
),
{{ ensembles('span_rows', 'described') }},
listed AS (
    SELECT
        request_file, request, span_index, trace_id, span_id, source, query_text,
        documents AS documents_given,
        CASE
            WHEN json_extract_string(documents, '$.stringValue') IS NOT NULL
                THEN TRY_CAST(json_extract_string(documents, '$.stringValue') AS JSON[])
            WHEN json_extract(documents, '$.arrayValue') IS NOT NULL THEN list_transform(
                json_extract(documents, '$.arrayValue.values[*]'),
                -- a key/value list as the JSON object it stands for (a key given twice: the first;
                -- an entry without a key is NULL, which array_to_string leaves out)
                lambda v: CASE WHEN json_extract(v, '$.kvlistValue') IS NOT NULL THEN CAST(
                    '{' || array_to_string(list_transform(
                        json_extract(v, '$.kvlistValue.values[*]'),
                        lambda e: to_json(json_extract_string(e, '$.key')) || ':' ||
                            coalesce(CAST({{ any_value("json_extract(e, '$.value')") }} AS VARCHAR), {{ 'null' | lit }})
                    ), ',') || '}' AS JSON) END
            )
        END AS documents
    FROM described
    WHERE is_retrieval
),
read AS (
    SELECT
        request_file, request, span_index, trace_id, span_id, source, query_text, position,
        document IS NULL OR json_type(document) <> 'OBJECT' AS not_a_document,
        nullif(json_extract_string(document, '$.id'), {{ '' | lit }}) AS item_id,
        nullif(json_extract_string(document, '$.parent_id'), {{ '' | lit }}) AS document_parent,
        json_extract_string(document, '$.score') AS score_text
    FROM (
        SELECT *, unnest(documents) AS document, generate_subscripts(documents, 1) AS position
        FROM listed
    )
),
typed AS (
    SELECT *, TRY_CAST(score_text AS DOUBLE) AS document_score
    FROM read
)
{% if final == 'faults' %}
, faults AS (
    SELECT
        -- a span's own fault has no position: it is told before its documents' (NULLS FIRST)
        request_file, request, span_index, CAST(NULL AS BIGINT) AS position, span_id,
        CASE WHEN trace_id IS NULL THEN {{ 'traceId' | lit }} WHEN span_id IS NULL THEN {{ 'spanId' | lit }}
             WHEN source IS NULL THEN {{ 'gen_ai.data_source.id' | lit }}
             ELSE {{ 'gen_ai.retrieval.documents' | lit }} END AS attribute,
        CASE WHEN trace_id IS NULL OR span_id IS NULL THEN {{ 'is missing' | lit }}
             WHEN source IS NULL THEN {{ 'is missing, and the span has no name' | lit }}
             WHEN json_extract_string(documents_given, '$.stringValue') IS NOT NULL THEN {{ 'is not a JSON array of documents' | lit }}
             ELSE {{ 'is neither a JSON string nor an array' | lit }} END AS problem,
        CASE WHEN trace_id IS NULL OR span_id IS NULL OR source IS NULL THEN NULL
             ELSE coalesce(json_extract_string(documents_given, '$.stringValue'), CAST(documents_given AS VARCHAR)) END AS value
    FROM listed
    WHERE trace_id IS NULL OR span_id IS NULL OR source IS NULL OR (documents_given IS NOT NULL AND documents IS NULL)
    UNION ALL
    SELECT
        request_file, request, span_index, position, span_id,
        {{ 'gen_ai.retrieval.documents[' | lit }} || position || {{ ']' | lit }} || CASE
            WHEN not_a_document THEN {{ '' | lit }}
            WHEN item_id IS NULL THEN {{ '.id' | lit }}
            ELSE {{ '.score' | lit }}
        END AS attribute,
        CASE
            WHEN not_a_document THEN {{ 'is not a document (an object with an id)' | lit }}
            WHEN item_id IS NULL THEN {{ 'is missing: a document needs an id' | lit }}
            WHEN {{ bad_score }} THEN {{ 'is not a finite number' | lit }}
            ELSE {{ huge_problem | lit }}
        END AS problem,
        CASE WHEN not_a_document OR item_id IS NULL THEN NULL ELSE score_text END AS value
    FROM typed
    WHERE not_a_document OR item_id IS NULL OR ({{ bad_score }}) OR {{ huge_score }}
)
SELECT request_file AS file, {{ 'request ' | lit }} || request AS place, span_id, attribute, problem, value
FROM faults
ORDER BY request_file, request, span_index, position NULLS FIRST
LIMIT 1
{% elif final == 'spans' %}
SELECT trace_id, span_id, source, is_retrieval, is_root
FROM described
{% else %}
-- one list per (trace, source): each document once, at its best position
, occurrences AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY trace_id, source, item_id
            ORDER BY position NULLS LAST, request_file NULLS LAST, request NULLS LAST, span_index NULLS LAST, span_id NULLS LAST
        ) AS occurrence,
        max(document_score) OVER (PARTITION BY trace_id, source, item_id) AS best_score
    FROM typed
),
ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY trace_id, source
            ORDER BY position NULLS LAST, best_score DESC NULLS LAST, request_file NULLS LAST, request NULLS LAST, span_index NULLS LAST, item_id NULLS LAST
        ) AS list_rank
    FROM occurrences
    WHERE occurrence = 1
)
{% if final == 'summary' %}
SELECT
    (SELECT count(*) FROM ranked) AS hits,
    coalesce(sum(unscored), 0) AS unscored,
    count(*) AS unscored_lists,
    (SELECT count(*) FROM listed) AS retrieval_spans,
    (SELECT count(*) FROM (SELECT trace_id FROM listed GROUP BY trace_id)) AS traces,
    (SELECT count(*) FROM described WHERE is_ensemble) AS ensembles
FROM (
    SELECT trace_id, source, count(*) - count(best_score) AS unscored, count(best_score) AS scored
    FROM ranked
    GROUP BY trace_id, source
)
WHERE unscored > 0 AND scored > 0
{% else %}
SELECT
    trace_id AS query_id,
    source,
    item_id,
    coalesce(document_parent, item_id) AS parent_id,
    coalesce(best_score, -CAST(list_rank AS DOUBLE)) AS score,
    list_rank AS rank,
    query_text,
    trace_id,
    span_id
FROM ranked
ORDER BY request_file, request, span_index, position
{% endif %}
{% endif %}
