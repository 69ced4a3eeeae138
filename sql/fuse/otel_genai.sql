{#-
A retrieval log from OTLP JSON exports of spans that follow the OpenTelemetry GenAI semantic
conventions for retrieval (the collector's file exporter: one ExportTraceServiceRequest per
line, resourceSpans → scopeSpans → spans, attributes as key/value pairs). Each span whose
`gen_ai.operation.name` is `retrieval` is one source's result list for one query:

  query_id    the span's traceId (a trace answers one query)
  source      `gen_ai.data_source.id`, else the span's name
  item_id     the document's `id` in `gen_ai.retrieval.documents` (a JSON string, or the
              structured form: an array of key/value lists)
  parent_id   the document's `parent_id`, else its id
  score       the document's `score`; without one it ranks by its position (score −rank)
  rank        the document's position in the list, from 1
  query_text  `gen_ai.retrieval.query.text`
  trace_id, span_id   the span's ids, kept beside the hit

Reads the export lines as JSON objects through `inputs.lines` (column `json`, and the line
number in `row_column`). Attribute values are OTLP AnyValues: a string, double, int (a string in
OTLP JSON) or bool value is read as such.

`final`: `hits` (the rows above), or `spans`: every span, retrieval or not — trace_id, span_id,
source, is_retrieval, and is_root (its `parentSpanId` is empty or absent) — which
sql/fuse/spans.sql reads.
-#}
{% macro any_value(value) -%}
coalesce(json_extract({{ value }}, '$.stringValue'), json_extract({{ value }}, '$.doubleValue'), json_extract({{ value }}, '$.intValue'), json_extract({{ value }}, '$.boolValue'))
{%- endmacro %}
{% macro attribute(name) -%}
json_extract(list_filter(json_extract(span, '$.attributes[*]'), lambda a: json_extract_string(a, '$.key') = {{ name | lit }})[1], '$.value')
{%- endmacro %}
WITH
spans AS (
    SELECT {{ row_column | ident }} AS line, unnest(json_extract(json, '$.resourceSpans[*].scopeSpans[*].spans[*]')) AS span
    FROM {{ inputs.lines | ident }}
),
described AS (
    SELECT
        line,
        json_extract_string(span, '$.traceId') AS trace_id,
        json_extract_string(span, '$.spanId') AS span_id,
        coalesce(json_extract_string({{ attribute('gen_ai.data_source.id') }}, '$.stringValue'), json_extract_string(span, '$.name')) AS source,
        coalesce(json_extract_string({{ attribute('gen_ai.operation.name') }}, '$.stringValue') = {{ 'retrieval' | lit }}, FALSE) AS is_retrieval,
        coalesce(json_extract_string(span, '$.parentSpanId'), {{ '' | lit }}) = {{ '' | lit }} AS is_root,
        json_extract_string({{ attribute('gen_ai.retrieval.query.text') }}, '$.stringValue') AS query_text,
        {{ attribute('gen_ai.retrieval.documents') }} AS documents
    FROM spans
),
listed AS (
    SELECT
        line, trace_id, span_id, source, query_text,
        coalesce(
            CAST(json(json_extract_string(documents, '$.stringValue')) AS JSON[]),
            list_transform(
                json_extract(documents, '$.arrayValue.values[*].kvlistValue'),
                lambda kv: to_json(map_from_entries(list_transform(
                    json_extract(kv, '$.values[*]'),
                    lambda e: {'k': json_extract_string(e, '$.key'), 'v': {{ any_value("json_extract(e, '$.value')") }}}
                )))
            )
        ) AS documents
    FROM described
    WHERE is_retrieval
),
hits AS (
    SELECT line, trace_id, span_id, source, query_text, unnest(documents) AS document, generate_subscripts(documents, 1) AS position
    FROM listed
)
{% if final == 'spans' %}
SELECT trace_id, span_id, source, is_retrieval, is_root
FROM described
{% else %}
SELECT
    trace_id AS query_id,
    source,
    json_extract_string(document, '$.id') AS item_id,
    coalesce(json_extract_string(document, '$.parent_id'), json_extract_string(document, '$.id')) AS parent_id,
    coalesce(TRY_CAST(json_extract_string(document, '$.score') AS DOUBLE), -CAST(position AS DOUBLE)) AS score,
    position AS rank,
    query_text,
    trace_id,
    span_id
FROM hits
ORDER BY line, trace_id, span_id, position
{% endif %}
