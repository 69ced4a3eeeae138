{#-
A retrieval log from OTLP JSON exports of GenAI retrieval spans (the collector's file exporter:
one ExportTraceServiceRequest per line, resourceSpans → scopeSpans → spans, attributes as
key/value pairs). A span is one list of a source for one query when it is a retrieval, in one of
the shapes producers write today:

  the OpenTelemetry GenAI conventions   `gen_ai.operation.name` `retrieval`, its documents (each
                                        an `id` and a `score`) in `gen_ai.retrieval.documents`:
                                        a JSON string, or the structured form (an array of
                                        key/value lists)
  OpenLLMetry's LangChain retrievers    `gen_ai.operation.name` `vector_db_retrieve`, its
                                        documents (`page_content`, `metadata`) in the JSON of
                                        `gen_ai.task.output` (else `traceloop.entity.output`),
                                        `{"documents": [...]}`
  OpenLLMetry's vector databases        one `db.query.result` event a document, its attributes
                                        `db.query.result.id`, `.score` or `.distance`,
                                        `.metadata`, `.document` (the content)

  query_id    the span's traceId (a trace answers one query)
  source      `gen_ai.data_source.id`, else `traceloop.entity.name` (OpenLLMetry's retriever),
              else the span's name
  item_id     the document's `id`; a document without one is given one by a rule
              (sql/fuse/_documents.sql: its metadata's id, doc_id, source and chunk index, else
              a hash of its content), or `ids.doc` chooses a metadata key
  parent_id   the document's `parent_id`, else its metadata's (or the key `ids.parent` names),
              else its id
  score       the document's `score`, else minus its `distance`; a document without either is
              given −rank (as a rank-only log)
  rank        the document's position in the list, from 1
  query_text  `gen_ai.retrieval.query.text`, else the `query` of `gen_ai.task.input`'s JSON
  trace_id, span_id   the span's ids, kept beside the hit
An empty id, name or parent_id is an absent one (OTLP: an empty traceId or spanId is invalid). A
document's metadata is an object, or a JSON string of one; anything else (Python's text of a
dict, which some vector database instrumentations write) is no metadata.

A source that ran more than once in a trace (several retrieval spans of one source: a
multi-query retriever's sub-queries) gives one list, as in sql/fuse/openinference.sql: each
document at its best position in any of the spans (its score the largest it was given, its
parent from the span of its best position), ordered by that position, then by the score, higher
first, then by when the spans started (startTimeUnixNano), then by the spans' order in the
export, and ranked 1, 2, … in that order. A retrieval
span with another retrieval span below it that returned a document (by `parentSpanId`, through
any spans between) is left out: its documents are its children's, already fused
(sql/fuse/_ensembles.sql).

Reads the export requests as JSON objects through `inputs.lines` (column `json`, the file in
`file_column` and the request's number in it in `row_column`). Attribute values are OTLP
AnyValues: a string, double, int (a string in OTLP JSON) or bool value is read as such; every
attribute but what makes a span a retrieval may be absent; a retrieval span needs a traceId, a
spanId and a source, and each of its documents an id, and a score (when given) is a finite
number of at most `log_rules.score_max` in magnitude (the retrieval_log contract's, traces.py's
LOG_RULES). `ids`: the user's choice of ids and parents (sql/fuse/_documents.sql).

`final`:
  hits      the rows above
  spans     every span, retrieval or not — trace_id, span_id, source, is_retrieval, and is_root
            (its `parentSpanId` is empty or absent) — which sql/fuse/spans.sql reads
  faults    the first retrieval span or document that cannot be read (file, place, span_id,
            attribute, problem, value), or no row
  summary   one row: hits, unscored and unscored_lists (the documents without a score in a list
            whose other documents have one, and those lists), retrieval_spans, traces,
            ensembles (the retrieval spans left out as nested retrievers that returned a
            document), ensemble_documents (their documents), and derived_ids (the documents
            given an id by a rule: a list of [rule, count])
  census    what the export holds, for a refusal when no span is a retrieval: spans, kinds
            (the `openinference.span.kind` values and their counts, a list of [value, count]),
            operations (the same of `gen_ai.operation.name`), and results (0: a span with
            `db.query.result` events is a retrieval)
-#}
{% from 'fuse/_ensembles.sql' import ensembles %}
{% from 'fuse/_otlp.sql' import any_value, attribute, requests, as_object, otlp_key %}
{% from 'fuse/_documents.sql' import id_paths, identified, bad_score, huge_score, huge_problem, derived_ids, keyed %}
{% set operations = ['retrieval', 'vector_db_retrieve'] %}
WITH RECURSIVE
spans AS (
{{ requests(inputs.lines, file_column, row_column) }}
),
span_rows AS (
    SELECT
        request_file, request, span_index,
        TRY_CAST(json_extract_string(span, '$.startTimeUnixNano') AS BIGINT) AS span_start,
        nullif(json_extract_string(span, '$.traceId'), {{ '' | lit }}) AS trace_id,
        nullif(json_extract_string(span, '$.spanId'), {{ '' | lit }}) AS span_id,
        coalesce(
            nullif(json_extract_string({{ attribute('gen_ai.data_source.id') }}, '$.stringValue'), {{ '' | lit }}),
            nullif(json_extract_string({{ attribute('traceloop.entity.name') }}, '$.stringValue'), {{ '' | lit }}),
            nullif(json_extract_string(span, '$.name'), {{ '' | lit }})
        ) AS source,
        json_extract_string({{ attribute('openinference.span.kind') }}, '$.stringValue') AS kind,
        json_extract_string({{ attribute('gen_ai.operation.name') }}, '$.stringValue') AS operation,
        list_filter(json_extract(span, '$.events[*]'), lambda e: json_extract_string(e, '$.name') = {{ 'db.query.result' | lit }}) AS results,
        nullif(json_extract_string(span, '$.parentSpanId'), {{ '' | lit }}) AS parent_span_id,
        coalesce(json_extract_string(span, '$.parentSpanId'), {{ '' | lit }}) = {{ '' | lit }} AS is_root,
        coalesce(
            json_extract_string({{ attribute('gen_ai.retrieval.query.text') }}, '$.stringValue'),
            json_extract_string(TRY_CAST(json_extract_string({{ attribute('gen_ai.task.input') }}, '$.stringValue') AS JSON), '$.query')
        ) AS query_text,
{% if query_key %}
        {{ otlp_key(query_key) }} AS key_value,
{% endif %}
        {{ attribute('gen_ai.retrieval.documents') }} AS documents,
        json_extract_string(coalesce({{ attribute('gen_ai.task.output') }}, {{ attribute('traceloop.entity.output') }}), '$.stringValue') AS task_output
    FROM spans
),
{{ keyed('span_rows', query_key, ['request_file', 'request', 'span_index']) }},
parsed AS (
    SELECT
        * EXCLUDE (documents),
        coalesce(operation IN ({{ operations | map('lit') | join(', ') }}), FALSE) OR len(results) > 0 AS is_retrieval,
        documents AS documents_given,
        CASE
            WHEN documents IS NOT NULL THEN {{ 'gen_ai.retrieval.documents' | lit }}
            WHEN task_output IS NOT NULL THEN {{ 'gen_ai.task.output' | lit }}
            ELSE {{ 'db.query.result' | lit }}
        END AS documents_attribute,
        CASE
            WHEN json_extract_string(documents, '$.stringValue') IS NOT NULL
                THEN TRY_CAST(json_extract_string(documents, '$.stringValue') AS JSON[])
            WHEN json_extract(documents, '$.arrayValue') IS NOT NULL THEN list_transform(
                json_extract(documents, '$.arrayValue.values[*]'),
                lambda v: CASE WHEN json_extract(v, '$.kvlistValue') IS NOT NULL THEN {{ as_object("json_extract(v, '$.kvlistValue.values[*]')") }} END
            )
            WHEN documents IS NOT NULL THEN NULL
            WHEN task_output IS NOT NULL THEN TRY_CAST(json_extract(TRY_CAST(task_output AS JSON), '$.documents') AS JSON[])
            -- an event's attributes as one object, their keys without the event's prefix
            ELSE list_transform(results, lambda e: {{ as_object("json_extract(e, '$.attributes[*]')", 'db.query.result.') }})
        END AS document_list
    FROM keyed
),
returns AS (
    SELECT *, coalesce(len(document_list), 0) > 0 AS returned FROM parsed
),
{{ ensembles('returns', 'described') }},
listed AS (
    SELECT
        request_file, request, span_index, span_start, trace_id, query_id, span_id, source, query_text,
        documents_given, task_output, documents_attribute, document_list AS documents
    FROM described
    WHERE is_retrieval
),
read AS (
    SELECT
        request_file, request, span_index, span_start, trace_id, query_id, span_id, source, query_text, documents_attribute, position,
        document IS NULL OR json_type(document) <> 'OBJECT' AS not_a_document,
        nullif(json_extract_string(document, '$.id'), {{ '' | lit }}) AS document_id,
        nullif(json_extract_string(document, '$.parent_id'), {{ '' | lit }}) AS document_parent,
        json_extract_string(document, '$.score') AS given_score,
        json_extract_string(document, '$.distance') AS distance_text,
        coalesce(json_extract_string(document, '$.content'), json_extract_string(document, '$.page_content'), json_extract_string(document, '$.document')) AS content,
        CASE json_type(json_extract(document, '$.metadata'))
            WHEN 'OBJECT' THEN json_extract(document, '$.metadata')
            WHEN 'VARCHAR' THEN CASE WHEN json_type(TRY_CAST(json_extract_string(document, '$.metadata') AS JSON)) = 'OBJECT'
                THEN TRY_CAST(json_extract_string(document, '$.metadata') AS JSON) END
        END AS metadata
    FROM (
        SELECT *, unnest(documents) AS document, generate_subscripts(documents, 1) AS position
        FROM listed
    )
),
typed AS (
    SELECT
        * EXCLUDE (id_keys),
{{ identified(ids, "coalesce(document_parent, nullif(json_extract_string(metadata, " ~ ('$.parent_id' | lit) ~ "), " ~ ('' | lit) ~ "))") }}
    FROM (
        SELECT
            *,
            coalesce(given_score, distance_text) AS score_text,
            CASE WHEN given_score IS NOT NULL THEN TRY_CAST(given_score AS DOUBLE) ELSE -TRY_CAST(distance_text AS DOUBLE) END AS document_score,
            list_transform(json_extract_string(metadata, [{{ id_paths(ids) }}]), lambda v: nullif(v, {{ '' | lit }})) AS id_keys
        FROM read
    )
)
{% if final == 'faults' %}
, faults AS (
    -- a document's fault has its position; a span's own, or its trace's, has none and is told
    -- before its documents' (NULLS FIRST)
    SELECT
        request_file, request, span_index, position, span_id,
        documents_attribute || {{ '[' | lit }} || position || {{ ']' | lit }} || CASE
            WHEN not_a_document THEN {{ '' | lit }}
            WHEN item_id IS NULL THEN {{ ('.metadata.' ~ ids.doc_shown) | lit if ids.doc else '.id' | lit }}
            WHEN given_score IS NULL THEN {{ '.distance' | lit }}
            ELSE {{ '.score' | lit }}
        END AS attribute,
        CASE
            WHEN not_a_document THEN {{ 'is not a document (an object with an id)' | lit }}
            WHEN item_id IS NULL THEN {{ ('is missing: --doc-id names each document\'s id' if ids.doc else 'is missing: a document needs an id') | lit }}
            WHEN {{ bad_score() }} THEN {{ 'is not a finite number' | lit }}
            ELSE {{ huge_problem(log_rules) }}
        END AS problem,
        CASE WHEN not_a_document OR item_id IS NULL THEN NULL ELSE score_text END AS value
    FROM typed
    WHERE not_a_document OR item_id IS NULL OR ({{ bad_score() }}) OR {{ huge_score(log_rules) }}
    UNION ALL
    SELECT
        request_file, request, span_index, CAST(NULL AS BIGINT) AS position, span_id,
        CASE WHEN trace_id IS NULL THEN {{ 'traceId' | lit }} WHEN span_id IS NULL THEN {{ 'spanId' | lit }}
             WHEN source IS NULL THEN {{ 'gen_ai.data_source.id' | lit }}
             ELSE documents_attribute END AS attribute,
        CASE WHEN trace_id IS NULL OR span_id IS NULL THEN {{ 'is missing' | lit }}
             WHEN source IS NULL THEN {{ 'is missing, and the span has no name' | lit }}
             WHEN documents_given IS NULL THEN {{ 'is not JSON with a list of documents' | lit }}
             WHEN json_extract_string(documents_given, '$.stringValue') IS NOT NULL THEN {{ 'is not a JSON array of documents' | lit }}
             ELSE {{ 'is neither a JSON string nor an array' | lit }} END AS problem,
        CASE WHEN trace_id IS NULL OR span_id IS NULL OR source IS NULL THEN NULL
             WHEN documents_given IS NULL THEN task_output
             ELSE coalesce(json_extract_string(documents_given, '$.stringValue'), CAST(documents_given AS VARCHAR)) END AS value
    FROM listed
    WHERE trace_id IS NULL OR span_id IS NULL OR source IS NULL OR ((documents_given IS NOT NULL OR task_output IS NOT NULL) AND documents IS NULL)
{% if query_key %}
    UNION ALL
    -- a trace without its query key: told at its first retrieval span
    SELECT request_file, request, span_index, CAST(NULL AS BIGINT) AS position, span_id,
           {{ query_key.shown | lit }} AS attribute,
           {{ 'is missing in the trace (--query-key names each trace\'s query)' | lit }} AS problem,
           trace_id AS value
    FROM listed
    WHERE trace_id IS NOT NULL AND query_id IS NULL
{% endif %}
)
SELECT request_file AS file, {{ 'request ' | lit }} || request AS place, span_id, attribute, problem, value
FROM faults
ORDER BY request_file, request, span_index, position NULLS FIRST
LIMIT 1
{% elif final == 'spans' %}
SELECT query_id, trace_id, span_id, source, is_retrieval, is_root
FROM described
{% elif final == 'census' %}
SELECT
    (SELECT count(*) FROM span_rows) AS spans,
    (SELECT list([kind, CAST(n AS VARCHAR)] ORDER BY kind) FROM (SELECT kind, count(*) AS n FROM span_rows WHERE kind IS NOT NULL GROUP BY kind)) AS kinds,
    (SELECT list([operation, CAST(n AS VARCHAR)] ORDER BY operation) FROM (SELECT operation, count(*) AS n FROM span_rows WHERE operation IS NOT NULL GROUP BY operation)) AS operations,
    -- a span with db.query.result events is a retrieval here: none is left when this is asked
    0 AS results
{% else %}
-- one list per (trace, source): each document once, at its best position
, occurrences AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY query_id, source, item_id
            ORDER BY position NULLS LAST, span_start NULLS LAST, request_file NULLS LAST, request NULLS LAST, span_index NULLS LAST, span_id NULLS LAST
        ) AS occurrence,
        max(document_score) OVER (PARTITION BY query_id, source, item_id) AS best_score
    FROM typed
),
ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY query_id, source
            ORDER BY position NULLS LAST, best_score DESC NULLS LAST, span_start NULLS LAST, request_file NULLS LAST, request NULLS LAST, span_index NULLS LAST, item_id NULLS LAST
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
    (SELECT count(*) FROM described WHERE is_ensemble AND returned) AS ensembles,
    (SELECT coalesce(sum(len(document_list)), 0) FROM described WHERE is_ensemble) AS ensemble_documents,
    {{ derived_ids('ranked') }} AS derived_ids
FROM (
    SELECT query_id, source, count(*) - count(best_score) AS unscored, count(best_score) AS scored
    FROM ranked
    GROUP BY query_id, source
)
WHERE unscored > 0 AND scored > 0
{% else %}
SELECT
    query_id,
    source,
    item_id,
    coalesce(chosen_parent, item_id) AS parent_id,
    coalesce(best_score, -CAST(list_rank AS DOUBLE)) AS score,
    list_rank AS rank,
    query_text,
    trace_id,
    span_id
FROM ranked
ORDER BY request_file, request, span_index, position
{% endif %}
{% endif %}
