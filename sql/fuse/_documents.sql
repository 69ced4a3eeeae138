{#-
A retrieved document's id, parent and score rules, shared by the trace readers
(sql/fuse/openinference.sql, sql/fuse/otel_genai.sql), over columns they both give a document:
`document_id` (its own id, NULL when absent or empty), `content` (its text, or NULL),
`document_score` (its score, a DOUBLE or NULL) and `score_text` (the score as given), and the
list `id_keys`: the values of its metadata at the paths `id_paths(ids)` lists, an empty one
NULL (json_extract_string reads them with the reader's own, in one pass over the metadata).

A document without an id (LangChain's instrumentations write none) is given one by a rule, the
first that applies (docs/traces.md#documents-without-an-id):

  metadata      `--doc-id KEY`: the metadata's KEY, for every document (its own id or not);
                a document without it has no id (a fault)
  id, doc_id    the metadata's `id`, else its `doc_id`
  source        the metadata's `source` and chunk index (`chunk_index`, else `start_index`:
                LangChain's text splitters), as SOURCE#INDEX
  content       `sha256:` and the first 16 hex digits of the SHA-256 of the content

Its parent: `--parent-id KEY`, the metadata's KEY, else the reader's own (`parent`: the
metadata's `parent_id`); else the document itself, whichever rule gave its id (a loader's
`source` often names one file of the whole corpus: no parent).

`ids`: what the user chose — `doc` and `parent`, each a JSON pointer into the metadata (from a
dotted KEY, `/a/b`), or none.

Also the trace readers' query key (`keyed`: `--query-key`) and their score rules.
-#}
{% macro id_paths(ids) -%}
{{ '$.id' | lit }}, {{ '$.doc_id' | lit }}, {{ '$.source' | lit }}, {{ '$.chunk_index' | lit }}, {{ '$.start_index' | lit }}{% if ids.doc %}, {{ ids.doc | lit }}{% endif %}{% if ids.parent %}, {{ ids.parent | lit }}{% endif %}
{%- endmacro %}
{#- the document's id, the rule that gave it, and its parent (`parent`, the SQL of the reader's
own, unless --parent-id names a key; NULL: the document is its own) -#}
{% macro identified(ids, parent) -%}
{% if ids.doc %}
        id_keys[6] AS item_id,
        {{ 'metadata' | lit }} AS id_rule,
{% else %}
        coalesce(document_id, id_keys[1], id_keys[2], id_keys[3] || {{ '#' | lit }} || coalesce(id_keys[4], id_keys[5]), {{ 'sha256:' | lit }} || left(sha256(nullif(content, {{ '' | lit }})), 16)) AS item_id,
        CASE
            WHEN document_id IS NOT NULL THEN {{ 'document.id' | lit }}
            WHEN id_keys[1] IS NOT NULL THEN {{ 'id' | lit }}
            WHEN id_keys[2] IS NOT NULL THEN {{ 'doc_id' | lit }}
            WHEN id_keys[3] IS NOT NULL AND coalesce(id_keys[4], id_keys[5]) IS NOT NULL THEN {{ 'source' | lit }}
            WHEN nullif(content, {{ '' | lit }}) IS NOT NULL THEN {{ 'content' | lit }}
        END AS id_rule,
{% endif %}
        {{ ('id_keys[' ~ (7 if ids.doc else 6) ~ ']') if ids.parent else parent }} AS chosen_parent
{%- endmacro %}
{#- the log's score rules (traces.py's LOG_RULES), so that a fault names the span -#}
{% macro bad_score() -%}
score_text IS NOT NULL AND NOT coalesce(isfinite(document_score), FALSE)
{%- endmacro %}
{% macro huge_score(log_rules) -%}
abs(document_score) > {{ log_rules.score_max | lit }}
{%- endmacro %}
{% macro huge_problem(log_rules) -%}
{{ ('is outside the log\'s range, -' ~ log_rules.score_max ~ ' to ' ~ log_rules.score_max) | lit }}
{%- endmacro %}
{#- the summary's counts of documents by the rule that gave them an id (not their own, nor
--doc-id's): a list of [rule, count] -#}
{% macro derived_ids(rows) -%}
(SELECT list([id_rule, CAST(n AS VARCHAR)]) FROM (
    SELECT id_rule, count(*) AS n FROM {{ rows | ident }}
    WHERE id_rule NOT IN ({{ 'document.id' | lit }}, {{ 'metadata' | lit }})
    GROUP BY id_rule
))
{%- endmacro %}
{#- A trace's query: `query_key` none, its trace id; else the key's value (`key_value` of
`rows`) on its root span, else on its first span (in `order`) that has one — several traces of
one value are one query (their retrievers' spans one list each, as a retriever that ran more
than once). `keyed(rows, query_key, order)`: the CTE `keyed`, `rows` with query_id beside. -#}
{% macro keyed(rows, query_key, order) -%}
{% if query_key %}
trace_keys AS (
    SELECT
        trace_id,
        first(key_value ORDER BY is_root DESC NULLS LAST{% for column in order %}, {{ column | ident }} NULLS LAST{% endfor %}) FILTER (WHERE key_value IS NOT NULL) AS query_id
    FROM {{ rows | ident }}
    GROUP BY trace_id
),
keyed AS (
    SELECT r.*, k.query_id
    FROM {{ rows | ident }} AS r
    LEFT JOIN trace_keys AS k ON k.trace_id = r.trace_id
)
{%- else %}
keyed AS (
    SELECT *, trace_id AS query_id FROM {{ rows | ident }}
)
{%- endif %}
{%- endmacro %}
