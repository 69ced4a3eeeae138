{#-
A retrieval log from OpenInference trace spans (Arize Phoenix's span export, Parquet or JSON
Lines: one row per span, attributes flattened into columns named `attributes.<key>`). Each
RETRIEVER span is one list of a source for one query:

  query_id    the span's trace id (a trace answers one query)
  source      the span's name (the retriever); a RETRIEVER span without one (or with an empty
              one) is a fault
  item_id     retrieval.documents[i].document.id; a document without one is given one by a
              rule (sql/fuse/_documents.sql: the metadata's id, doc_id, source and chunk
              index, else a hash of the content), or `ids.doc` chooses a metadata key
  parent_id   the document metadata's `parent_id` (or the key `ids.parent` names), else the
              document id (a document is its own parent); an empty id or parent_id is an
              absent one
  granularity, block_type, total_chunks
              the document metadata's keys of those names, when it has them (NULL otherwise,
              as a log without the columns): a chunk's count of siblings is what seed 000's
              stability reads
  score       retrieval.documents[i].document.score; a document without one is given −rank
              (as a rank-only log)
  rank        the document's position in the list, from 1
  snippet     retrieval.documents[i].document.content (a column only when the documents have
              that attribute)
  query_text  input.value
  trace_id, span_id   the span's ids, kept beside the hit

A retriever that ran more than once in a trace (a multi-query or query-rewriting retriever, a
fusion retriever's sub-queries; spans of one name in one trace) gives one list: each document at
its best position in any of the spans (its score the largest it was given, its other attributes
from the span of its best position), the list ordered by that position, then by the score,
higher first, then by when the spans started (`start_column`, OTLP's startTimeUnixNano; the
order they ran), then by the spans' order in the export, and ranked 1, 2, … in that order. A
document listed twice by one span is taken once, at its first position, the same way. Several
traces of one query (`--query-key`) are one query here too.

Other spans (the chain, the LLM, a reranker's) are not retrievals and are left out, and so is a
RETRIEVER span with another RETRIEVER span below it that returned a document
(sql/fuse/_ensembles.sql: its documents are its children's, already fused), when the export has
the parent column.

Every optional attribute may be absent: the SQL reads only those the input has. Reads
`inputs.spans` (the raw spans, every column, with the file and row of each in `file_column` and
`row_column`), and from the caller what the input holds:
  log_rules        the retrieval_log contract's rules for a document (traces.py's LOG_RULES):
                   score_max, granularities, chunks_min, chunks_max and chunks_max_shown
  ids              the user's choice of the documents' ids and parents: `doc` and `parent`,
                   JSON pointers into the metadata (or none), and `doc_shown`, the key as given
  query_column     the column of input.value, or none
  operation        where gen_ai.operation.name is (a `key_value`: column, pointer, kind), or
                   none (only the census reads it)
  start_column     the column of the span's start time (Phoenix's `start_time`), or none
  otlp             the spans are OTLP JSON export requests (`inputs.lines`), read as the export
                   they make (sql/fuse/_otlp.sql): a span's place is its request
  parent_column    the column of the span's parent (Phoenix's `parent_id`), or none
  documents        none (no column of documents: no retrieval returned one), or
    .column        the column of retrieval.documents
    .container     `list` (a list), or `json` (JSON text of a list)
    .element       a document is a `struct`, a `map`, `json` (JSON, or JSON text), or `null`
                   (every list empty)
    .fields        the attributes a document has, each with its `name` there and its `kind`:
                   number, text, json, object, list, other, or null (always null)

`final`:
  hits      the rows above
  spans     every span, retrieval or not — trace_id, span_id, source, is_retrieval, and is_root
            (the span has no parent; NULL when the export has no parent column) — which
            sql/fuse/spans.sql reads
  faults    the first document that cannot be read (file, place: its span's row, span_id,
            attribute: a path such as `retrieval.documents[2].document.score`, problem, value),
            or no row
  census    what the export holds, for a refusal when no span is a RETRIEVER: spans, kinds (the
            `openinference.span.kind` values and their counts, a list of [value, count]),
            operations (the same of `gen_ai.operation.name`, when the export has it), and
            results (OTLP's spans with `db.query.result` events)
  summary   one row: hits, unscored and unscored_lists (the documents without a score in a list
            whose other documents have one, and those lists), retrieval_spans, traces,
            ensembles (the retrieval spans left out as nested retrievers that returned a
            document), ensemble_documents (their documents), and derived_ids (the documents
            given an id by a rule: a list of [rule, count])
-#}
{% from 'fuse/_ensembles.sql' import ensembles %}
{% from 'fuse/_otlp.sql' import requests, openinference_spans %}
{% from 'fuse/_documents.sql' import id_paths, identified, bad_score, huge_score, huge_problem, derived_ids, keyed %}
{% set fields = documents.fields if documents else {} %}
{% macro value(key) -%}
{% set field = fields[key] %}
{% if documents.element == 'struct' %}d.document.{{ field.name | ident }}
{%- elif documents.element == 'map' %}d.document[{{ field.name | lit }}]
{%- else %}json_extract(d.document, {{ ('$."' ~ field.name ~ '"') | lit }})
{%- endif %}
{%- endmacro %}
{% macro text(key) -%}
{% if key not in fields or fields[key].kind == 'null' %}CAST(NULL AS VARCHAR)
{%- elif fields[key].kind == 'json' %}json_extract_string({{ value(key) }}, '$')
{%- elif fields[key].kind == 'object' %}CAST(to_json({{ value(key) }}) AS VARCHAR)
{%- else %}CAST({{ value(key) }} AS VARCHAR)
{%- endif %}
{%- endmacro %}
{% macro number(key) -%}
{% if key in fields and fields[key].kind == 'number' %}CAST({{ value(key) }} AS DOUBLE)
{%- else %}TRY_CAST({{ text(key) }} AS DOUBLE)
{%- endif %}
{%- endmacro %}
{% macro key_value(k) -%}
{% if k.pointer and k.kind == 'object' %}json_extract_string(to_json({{ k.column | ident }}), {{ k.pointer | lit }})
{%- elif k.pointer %}json_extract_string(TRY_CAST(CAST({{ k.column | ident }} AS VARCHAR) AS JSON), {{ k.pointer | lit }})
{%- else %}CAST({{ k.column | ident }} AS VARCHAR)
{%- endif %}
{%- endmacro %}
{% macro json_text(key) -%}
{% if key in fields and fields[key].kind == 'json' %}CASE WHEN json_type({{ value(key) }}) = 'VARCHAR' THEN json_extract_string({{ value(key) }}, '$') ELSE CAST({{ value(key) }} AS VARCHAR) END
{%- else %}{{ text(key) }}
{%- endif %}
{%- endmacro %}
{% set bad_metadata = "metadata_text IS NOT NULL AND (metadata IS NULL OR json_type(metadata) NOT IN ('OBJECT', 'NULL'))" %}
{#- the retrieval_log contract's rules for the score and these columns (log_rules: orchestrator/fusion/traces.py's LOG_RULES, read off the contract), so that a fault names the span #}
{% set bad_granularity = "granularity IS NOT NULL AND granularity NOT IN (" ~ (log_rules.granularities | map('lit') | join(', ')) ~ ")" %}
{% set bad_chunks = "total_chunks_text IS NOT NULL AND NOT coalesce(total_chunks BETWEEN " ~ (log_rules.chunks_min | lit) ~ " AND " ~ (log_rules.chunks_max | lit) ~ " AND total_chunks = round(total_chunks), FALSE)" %}
WITH{{ ' RECURSIVE' if parent_column }}
{% if otlp %}
otlp_requests AS (
{{ requests(inputs.lines, file_column, row_column) }}
),
{{ openinference_spans('otlp_requests', file_column, row_column, query_key) }},
{% endif %}
span_rows AS (
    SELECT
        {{ file_column | ident }} AS span_file,
        {{ row_column | ident }} AS span_row,
{% if otlp %}
        place AS span_place,
{% else %}
        {{ 'row ' | lit }} || {{ row_column | ident }} AS span_place,
{% endif %}
{% if otlp %}
        start_ns AS span_start,
{% elif start_column %}
        epoch_ns(TRY_CAST({{ start_column | ident }} AS TIMESTAMPTZ)) AS span_start,
{% else %}
        CAST(NULL AS BIGINT) AS span_start,
{% endif %}
        CAST("context.trace_id" AS VARCHAR) AS trace_id,
        CAST("context.span_id" AS VARCHAR) AS span_id,
        nullif(name, {{ '' | lit }}) AS source,
        coalesce("attributes.openinference.span.kind" = {{ 'RETRIEVER' | lit }}, FALSE) AS is_retrieval,
        CAST("attributes.openinference.span.kind" AS VARCHAR) AS kind,
        {{ key_value(operation) if operation else 'CAST(NULL AS VARCHAR)' }} AS operation,
        {{ 'results' if otlp else '0' }} AS results,
{% if parent_column %}
        nullif(CAST({{ parent_column | ident }} AS VARCHAR), {{ '' | lit }}) AS parent_span_id,
        coalesce(CAST({{ parent_column | ident }} AS VARCHAR), {{ '' | lit }}) = {{ '' | lit }} AS is_root,
{% else %}
        CAST(NULL AS BOOLEAN) AS is_root,
{% endif %}
{% if query_column %}
        CAST({{ query_column | ident }} AS VARCHAR) AS query_text,
{% else %}
        CAST(NULL AS VARCHAR) AS query_text,
{% endif %}
{% if query_key %}
        {{ 'query_key' if otlp else key_value(query_key) }} AS key_value,
{% endif %}
{% if not documents %}
        CAST(NULL AS JSON[]) AS documents,
        CAST(NULL AS VARCHAR) AS documents_text
{% elif documents.container == 'json' %}
        CASE WHEN json_valid(CAST({{ documents.column | ident }} AS VARCHAR)) THEN coalesce(
            TRY_CAST(CAST({{ documents.column | ident }} AS VARCHAR) AS JSON[]),
            TRY_CAST(json_extract_string(CAST({{ documents.column | ident }} AS VARCHAR), '$') AS JSON[])
        ) END AS documents,
        CAST({{ documents.column | ident }} AS VARCHAR) AS documents_text
{% else %}
        {{ documents.column | ident }} AS documents,
        CAST(NULL AS VARCHAR) AS documents_text
{% endif %}
    FROM {{ ('otlp_spans' if otlp else inputs.spans) | ident }}
),
{{ keyed('span_rows', query_key, ['span_file', 'span_row']) }},
returns AS (
    SELECT *, coalesce(len(documents), 0) > 0 AS returned FROM keyed
),
{% if parent_column %}
{{ ensembles('returns', 'spans') }},
{% else %}
spans AS (
    SELECT *, FALSE AS is_ensemble FROM returns
),
{% endif %}
listed AS (
    SELECT
        span_file, span_row, span_place, span_start, trace_id, query_id, span_id, source, query_text,
        unnest(documents) AS document,
        generate_subscripts(documents, 1) AS position
    FROM spans
    WHERE is_retrieval
),
documents AS (
    SELECT
        span_file, span_row, span_place, span_start, trace_id, query_id, span_id, source, query_text, position,
{% if documents and documents.element == 'json' %}
        CASE WHEN is_object THEN CAST(l.document AS JSON) END AS document,
        NOT coalesce(is_object, FALSE) AS not_a_document
    FROM (
        SELECT
            *,
            CASE WHEN json_valid(CAST(document AS VARCHAR)) THEN json_type(CAST(document AS VARCHAR)) = 'OBJECT' END AS is_object
        FROM listed
    ) AS l
{% else %}
        l.document,
        l.document IS NULL AS not_a_document
    FROM listed AS l
{% endif %}
),
read AS (
    SELECT
        span_file, span_row, span_place, span_start, trace_id, query_id, span_id, source, query_text, position, not_a_document,
        nullif({{ text('document.id') }}, {{ '' | lit }}) AS document_id,
        {{ text('document.score') }} AS score_text,
        {{ number('document.score') }} AS document_score,
        {{ text('document.content') }} AS content,
        {{ json_text('document.metadata') }} AS metadata_text
    FROM documents AS d
),
typed AS (
    SELECT
        *,
        CASE WHEN json_valid(metadata_text) THEN CAST(metadata_text AS JSON) END AS metadata
    FROM read
),
described AS (
    SELECT
        * EXCLUDE (keys, id_keys),
        keys[2] AS granularity,
        keys[3] AS block_type,
        keys[4] AS total_chunks_text,
        TRY_CAST(keys[4] AS DOUBLE) AS total_chunks,
{{ identified(ids, "nullif(keys[1], " ~ ('' | lit) ~ ")") }}
    FROM (
        SELECT *, list_transform(keys[5:], lambda v: nullif(v, {{ '' | lit }})) AS id_keys
        FROM (
            SELECT
                *,
                json_extract_string(metadata, [{{ '$.parent_id' | lit }}, {{ '$.granularity' | lit }}, {{ '$.block_type' | lit }}, {{ '$.total_chunks' | lit }}, {{ id_paths(ids) }}]) AS keys
            FROM typed
        )
    )
)
{% if final == 'faults' %}
, faults AS (
    -- a document's fault has its position; a span's own, or its trace's, has none and is told
    -- before its documents' (NULLS FIRST)
    SELECT
        span_file, span_row, span_place, span_id, position,
        {{ 'retrieval.documents[' | lit }} || position || {{ ']' | lit }} || CASE
            WHEN not_a_document THEN {{ '' | lit }}
            WHEN item_id IS NULL THEN {{ ('.document.metadata.' ~ ids.doc_shown) | lit if ids.doc else '.document.id' | lit }}
            WHEN {{ bad_score() }} OR {{ huge_score(log_rules) }} THEN {{ '.document.score' | lit }}
            WHEN {{ bad_metadata }} THEN {{ '.document.metadata' | lit }}
            WHEN {{ bad_granularity }} THEN {{ '.document.metadata.granularity' | lit }}
            ELSE {{ '.document.metadata.total_chunks' | lit }}
        END AS attribute,
        CASE
            WHEN not_a_document THEN {{ 'is not a document (an object with a document.id)' | lit }}
            WHEN item_id IS NULL THEN {{ ('is missing: --doc-id names each document\'s id' if ids.doc else 'is missing: a document needs an id') | lit }}
            WHEN {{ bad_score() }} THEN {{ 'is not a finite number' | lit }}
            WHEN {{ huge_score(log_rules) }} THEN {{ huge_problem(log_rules) }}
            WHEN {{ bad_metadata }} THEN {{ 'is not a JSON object' | lit }}
            WHEN {{ bad_granularity }} THEN {{ ('is not one of ' ~ log_rules.granularities | join(', ')) | lit }}
            ELSE {{ ('is not a whole number from ' ~ log_rules.chunks_min ~ ' to ' ~ log_rules.chunks_max_shown) | lit }}
        END AS problem,
        CASE
            WHEN not_a_document OR item_id IS NULL THEN NULL
            WHEN {{ bad_score() }} OR {{ huge_score(log_rules) }} THEN score_text
            WHEN {{ bad_metadata }} THEN metadata_text
            WHEN {{ bad_granularity }} THEN granularity
            ELSE total_chunks_text
        END AS value
    FROM described
    WHERE not_a_document OR item_id IS NULL OR ({{ bad_score() }}) OR {{ huge_score(log_rules) }} OR ({{ bad_metadata }}) OR ({{ bad_granularity }}) OR ({{ bad_chunks }})
    UNION ALL
    SELECT span_file, span_row, span_place, span_id, CAST(NULL AS BIGINT) AS position,
           -- OTLP's spans are not checked as a table: their ids here (Phoenix's export has them,
           -- the spans contract refused it before otherwise)
           CASE WHEN trace_id IS NULL THEN {{ 'traceId' | lit }} WHEN span_id IS NULL THEN {{ 'spanId' | lit }}
                WHEN source IS NULL THEN {{ 'name' | lit }} ELSE {{ 'retrieval.documents' | lit }} END AS attribute,
           CASE WHEN trace_id IS NULL OR span_id IS NULL THEN {{ 'is missing' | lit }}
                WHEN source IS NULL THEN {{ "is missing: a RETRIEVER span's name is its source" | lit }}
                ELSE {{ 'is not a JSON list of documents' | lit }} END AS problem,
           CASE WHEN source IS NOT NULL THEN documents_text END AS value
    FROM spans
    WHERE is_retrieval AND (trace_id IS NULL OR span_id IS NULL OR source IS NULL OR (documents_text IS NOT NULL AND documents IS NULL))
{% if query_key %}
    UNION ALL
    -- a trace without its query key: told at its first retrieval span
    SELECT span_file, span_row, span_place, span_id, CAST(NULL AS BIGINT) AS position,
           {{ query_key.shown | lit }} AS attribute,
           {{ 'is missing in the trace (--query-key names each trace\'s query)' | lit }} AS problem,
           trace_id AS value
    FROM spans
    WHERE is_retrieval AND query_id IS NULL
{% endif %}
)
SELECT span_file AS file, span_place AS place, span_id, attribute, problem, value
FROM faults
ORDER BY span_file, span_row, position NULLS FIRST
LIMIT 1
{% elif final == 'spans' %}
SELECT query_id, trace_id, span_id, source, is_retrieval, is_root
FROM spans
{% elif final == 'census' %}
SELECT
    (SELECT count(*) FROM span_rows) AS spans,
    (SELECT list([kind, CAST(n AS VARCHAR)] ORDER BY kind) FROM (SELECT kind, count(*) AS n FROM span_rows WHERE kind IS NOT NULL GROUP BY kind)) AS kinds,
    (SELECT list([operation, CAST(n AS VARCHAR)] ORDER BY operation) FROM (SELECT operation, count(*) AS n FROM span_rows WHERE operation IS NOT NULL GROUP BY operation)) AS operations,
    (SELECT count(*) FROM span_rows WHERE results > 0) AS results
{% else %}
-- one list per (trace, retriever): each document once, at its best position
, occurrences AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY query_id, source, item_id
            ORDER BY position NULLS LAST, span_start NULLS LAST, span_file NULLS LAST, span_row NULLS LAST, span_id NULLS LAST
        ) AS occurrence,
        max(document_score) OVER (PARTITION BY query_id, source, item_id) AS best_score
    FROM described
),
ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY query_id, source
            ORDER BY position NULLS LAST, best_score DESC NULLS LAST, span_start NULLS LAST, span_file NULLS LAST, span_row NULLS LAST, item_id NULLS LAST
        ) AS list_rank
    FROM occurrences
    WHERE occurrence = 1
)
{% if final == 'summary' %}
SELECT
    (SELECT count(*) FROM ranked) AS hits,
    coalesce(sum(unscored), 0) AS unscored,
    count(*) AS unscored_lists,
    (SELECT count(*) FROM spans WHERE is_retrieval) AS retrieval_spans,
    (SELECT count(*) FROM (SELECT trace_id FROM spans WHERE is_retrieval GROUP BY trace_id)) AS traces,
    (SELECT count(*) FROM spans WHERE is_ensemble AND returned) AS ensembles,
    (SELECT coalesce(sum(len(documents)), 0) FROM spans WHERE is_ensemble) AS ensemble_documents,
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
    granularity,
    block_type,
    total_chunks,
    coalesce(best_score, -CAST(list_rank AS DOUBLE)) AS score,
    list_rank AS rank,
{% if 'document.content' in fields %}
    content AS snippet,
{% endif %}
    query_text,
    trace_id,
    span_id
FROM ranked
ORDER BY span_file, span_row, position
{% endif %}
{% endif %}
