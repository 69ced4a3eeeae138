{#-
OTLP JSON, for the trace readers: export requests (the collector's file exporter, or the SDK's
spans encoded as an ExportTraceServiceRequest: one request per line, or one per file) read as
JSON objects through `lines` (column `json`, the file in `file_column`, the request's number in
it in `row_column`).

`any_value(value)`: an AnyValue as JSON (a string, double, int — a string in OTLP JSON — or bool).
`attribute(name, of)`: the AnyValue of the span's attribute `name` (its first, when given twice).
`as_object(entries, prefix)`: key/value entries as one JSON object.
`requests(lines, file_column, row_column)`: one row per span — request_file, request,
span_index (its place in the request, from 1) and span (its JSON).
`openinference_spans(requests, file_column, row_column, query_key)`: the spans of `requests` as the rows
of Phoenix's span export that sql/fuse/openinference.sql reads — `context.trace_id`,
`context.span_id`, `parent_id` (`parentSpanId`, NULL when empty), `name`,
`attributes.openinference.span.kind`, `attributes.input.value`,
`attributes.gen_ai.operation.name` and `results` (its db.query.result events: a census's),
`start_ns` (`startTimeUnixNano`), and
`attributes.retrieval.documents`, a list of JSON objects gathered from the flattened attributes
`retrieval.documents.<i>.document.<key>` (a list in the order of i; NULL when the span has none),
with the request's file in `file_column`, its number in `place`, and each span's number in its
file (requests, then spans in a request) in `row_column`; with a `query_key`, its value
(`otlp_key`) as `query_key`.
`otlp_key(query_key, of)`: a span's query key (`--query-key`).
-#}
{% macro any_value(value) -%}
coalesce(json_extract({{ value }}, '$.stringValue'), json_extract({{ value }}, '$.doubleValue'), json_extract({{ value }}, '$.intValue'), json_extract({{ value }}, '$.boolValue'))
{%- endmacro %}
{% macro attribute(name, of='span') -%}
json_extract(list_filter(json_extract({{ of }}, '$.attributes[*]'), lambda a: json_extract_string(a, '$.key') = {{ name | lit }})[1], '$.value')
{%- endmacro %}
{#- key/value entries (a kvlistValue's values, an event's attributes) as the JSON object they
stand for, each key without `prefix`: a key given twice, its first value; an entry without a key
is NULL, which array_to_string leaves out -#}
{% macro as_object(entries, prefix='') -%}
CAST('{' || array_to_string(list_transform({{ entries }}, lambda e: to_json(regexp_replace(json_extract_string(e, '$.key'), {{ ('^' ~ prefix | replace('.', '\\.')) | lit }}, {{ '' | lit }})) || ':' || coalesce(CAST({{ any_value("json_extract(e, '$.value')") }} AS VARCHAR), {{ 'null' | lit }})), ',') || '}' AS JSON)
{%- endmacro %}
{% macro requests(lines, file_column, row_column) -%}
SELECT
    request_file, request,
    unnest(spans) AS span,
    generate_subscripts(spans, 1) AS span_index
FROM (
    SELECT
        {{ file_column | ident }} AS request_file,
        {{ row_column | ident }} AS request,
        json_extract(json, '$.resourceSpans[*].scopeSpans[*].spans[*]') AS spans
    FROM {{ lines | ident }}
)
{%- endmacro %}
{% macro openinference_spans(requests, file_column, row_column, query_key) -%}
otlp_documents AS (
    SELECT request_file, request, span_index, list(document ORDER BY i) AS documents
    FROM (
        SELECT request_file, request, span_index, i, json_group_object(a, v) AS document
        FROM (
            SELECT
                request_file, request, span_index,
                CAST(k.i AS BIGINT) AS i, k.a,
                {{ any_value("json_extract(attribute, '$.value')") }} AS v
            FROM (
                SELECT
                    request_file, request, span_index, attribute,
                    regexp_extract(json_extract_string(attribute, '$.key'), {{ '^retrieval\\.documents\\.(\\d+)\\.(.+)$' | lit }}, ['i', 'a']) AS k
                FROM (SELECT request_file, request, span_index, unnest(json_extract(span, '$.attributes[*]')) AS attribute FROM {{ requests | ident }})
            )
            WHERE k.i <> {{ '' | lit }}
        )
        GROUP BY request_file, request, span_index, i
    )
    GROUP BY request_file, request, span_index
),
otlp_span_rows AS (
    SELECT
        s.request_file AS {{ file_column | ident }},
        s.request, s.span_index,
        {{ 'request ' | lit }} || s.request AS place,
        TRY_CAST(json_extract_string(s.span, '$.startTimeUnixNano') AS BIGINT) AS start_ns,
        nullif(json_extract_string(s.span, '$.traceId'), {{ '' | lit }}) AS "context.trace_id",
        nullif(json_extract_string(s.span, '$.spanId'), {{ '' | lit }}) AS "context.span_id",
        json_extract_string(s.span, '$.parentSpanId') AS parent_id,
        json_extract_string(s.span, '$.name') AS name,
        json_extract_string({{ attribute('openinference.span.kind', 's.span') }}, '$.stringValue') AS "attributes.openinference.span.kind",
        json_extract_string({{ any_value(attribute('input.value', 's.span')) }}, '$') AS "attributes.input.value",
        json_extract_string({{ attribute('gen_ai.operation.name', 's.span') }}, '$.stringValue') AS "attributes.gen_ai.operation.name",
        len(list_filter(json_extract(s.span, '$.events[*]'), lambda e: json_extract_string(e, '$.name') = {{ 'db.query.result' | lit }})) AS results,
{% if query_key %}
        {{ otlp_key(query_key, 's.span') }} AS query_key,
{% endif %}
        d.documents AS "attributes.retrieval.documents"
    FROM {{ requests | ident }} AS s
    LEFT JOIN otlp_documents AS d USING (request_file, request, span_index)
),
otlp_spans AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY {{ file_column | ident }} ORDER BY request NULLS LAST, span_index NULLS LAST, "context.span_id" NULLS LAST) AS {{ row_column | ident }}
    FROM otlp_span_rows
)
{%- endmacro %}
{#- an OTLP span's query key: the first of `query_key.splits` ([attribute, pointer]: the
attribute's value, or the JSON pointer into its JSON text) that it has -#}
{% macro otlp_key(query_key, of='span') -%}
coalesce({% for name, pointer in query_key.splits %}{% set value = "json_extract_string(" ~ any_value(attribute(name, of)) ~ ", '$')" %}{% if pointer %}json_extract_string(TRY_CAST({{ value }} AS JSON), {{ pointer | lit }}){% else %}{{ value }}{% endif %}{{ ', ' if not loop.last }}{% endfor %})
{%- endmacro %}
