{#-
The code mapper (docs/code.md, "Fusing code"): each hit of a code log with its file, and each hit
that has lines — a block, or a module- or entity-level hit — with the innermost entity its lines
overlap in the entities table of its revision (`duckscore entities`): the entity with the
largest overlap, ties by the smallest span, then by entity_id. A hit that overlaps no entity,
and a file-level hit (granularity doc or file), map to their file alone — but a file-level hit
naming a module_path (`module_paths`: the log has the column), a summary document of a module
(seed 003 §7.2), maps to that module and to its entity (the top-level class or function).

Context: inputs.retrieval_log (the typed log, or its ranked view), inputs.entities (the entities
table), parse_ids (the log gives no lines: they are read off ids `path:start:end`, `pattern`),
module_paths (the log has a module_path column), final (the CTE to select).

A hit's file is its file_path, else the path of its id (parse_ids), else its parent_id; its
revision is the log's (NULL: the working tree), matched NULL-safe. `code_hits` is every log row
(its columns, its other columns too) with parent_id, file_path, start_line and end_line as
resolved, and code_module_id, code_entity_id (NULL when it maps to no entity).

Checks, each its CTE: `faults` (a file the entities table does not hold at the hit's revision,
lines past its file's end, a block id given two spans by a source at a revision, a span two
ids, a module_path that is not a module of its hit's file at its revision), `chunking` (seed 003 §9.4: whether the block sources share their ids and line ranges)
and `entity_coverage` (how many of the hits' line ranges an entity overlaps: none is a map
worth a warning).
-#}
{% set lined = "('block', 'module', 'entity')" %}
{% macro same_place(a, b) -%}
{{ a }}.revision IS NOT DISTINCT FROM {{ b }}.revision AND {{ a }}.code_file = {{ b }}.code_file
{%- endmacro %}
WITH
resolved AS (
    SELECT
        l.*,
        coalesce(l.granularity, CASE WHEN l.item_id = l.parent_id THEN 'doc' ELSE 'block' END) AS code_level,
{% if parse_ids %}
        coalesce(l.file_path, nullif(regexp_extract(l.item_id, {{ pattern | lit }}, 1), ''), l.parent_id) AS code_file,
        TRY_CAST(nullif(regexp_extract(l.item_id, {{ pattern | lit }}, 2), '') AS BIGINT) AS code_start,
        TRY_CAST(nullif(regexp_extract(l.item_id, {{ pattern | lit }}, 3), '') AS BIGINT) AS code_end
{% else %}
        coalesce(l.file_path, l.parent_id) AS code_file,
        l.start_line AS code_start,
        l.end_line AS code_end
{% endif %}
    FROM {{ inputs.retrieval_log | ident }} AS l
),
files AS (
    SELECT e.revision, e.file_path AS code_file, max(e.end_line) AS last_line
    FROM {{ inputs.entities | ident }} AS e
    WHERE e.kind = 'file'
    GROUP BY e.revision, e.file_path
),
spans AS (
    SELECT r.revision, r.code_file, r.code_start, r.code_end
    FROM resolved AS r
    WHERE r.code_level IN {{ lined }}
    GROUP BY r.revision, r.code_file, r.code_start, r.code_end
),
candidates AS (
    SELECT
        s.revision, s.code_file, s.code_start, s.code_end, e.entity_id, e.module_id,
        least(s.code_end, e.end_line) - greatest(s.code_start, e.start_line) + 1 AS overlap,
        e.end_line - e.start_line + 1 AS span
    FROM spans AS s
    JOIN {{ inputs.entities | ident }} AS e
        ON e.revision IS NOT DISTINCT FROM s.revision AND e.file_path = s.code_file AND e.kind <> 'file'
        AND e.start_line <= s.code_end AND e.end_line >= s.code_start
),
innermost AS (
    {#- the largest overlap, then the smallest span, then the entity_id: one key for both -#}
{% set key = 'struct_pack(neg_overlap := -overlap, span := span, entity_id := entity_id)' %}
    SELECT
        revision, code_file, code_start, code_end,
        arg_min(entity_id, {{ key }}) AS code_entity_id,
        arg_min(module_id, {{ key }}) AS code_module_id
    FROM candidates
    GROUP BY revision, code_file, code_start, code_end
),
{% if module_paths %}
summaries AS (
    {#- each module_path of the log with the module of its file it names, or NULL (read for the
    file-level hits alone: the joins below); a module's own entity has its id (`duckscore entities`) -#}
    SELECT s.revision, s.code_file, s.module_path, m.module_id
    FROM (
        SELECT r.revision, r.code_file, r.module_path
        FROM resolved AS r
        WHERE r.module_path IS NOT NULL
        GROUP BY r.revision, r.code_file, r.module_path
    ) AS s
    LEFT JOIN (
        SELECT e.revision, e.file_path AS code_file, e.module_id
        FROM {{ inputs.entities | ident }} AS e
        WHERE e.module_id IS NOT NULL
        GROUP BY e.revision, e.file_path, e.module_id
    ) AS m
        ON {{ same_place('m', 's') }} AND m.module_id = s.module_path
),
{% endif %}
entity_coverage AS (
    SELECT (SELECT count(*) FROM spans) AS line_ranges, (SELECT count(*) FROM innermost) AS in_entities
),
code_hits AS (
    SELECT
        r.* EXCLUDE (code_level, code_file, code_start, code_end) REPLACE (
            r.code_file AS parent_id, r.code_file AS file_path,
            CAST(r.code_start AS BIGINT) AS start_line, CAST(r.code_end AS BIGINT) AS end_line
        ),
{% if module_paths %}
        coalesce(i.code_module_id, s.module_id) AS code_module_id,
        coalesce(i.code_entity_id, s.module_id) AS code_entity_id
{% else %}
        i.code_module_id,
        i.code_entity_id
{% endif %}
    FROM resolved AS r
    LEFT JOIN innermost AS i
        ON r.code_level IN {{ lined }} AND {{ same_place('i', 'r') }}
        AND i.code_start = r.code_start AND i.code_end = r.code_end
{% if module_paths %}
    LEFT JOIN summaries AS s
        ON r.code_level NOT IN {{ lined }} AND {{ same_place('s', 'r') }} AND s.module_path = r.module_path
{% endif %}
),
faults AS (
    SELECT
        1 AS priority, 'unknown file' AS fault, r.query_id, r.source, r.item_id, r.code_file, r.revision,
        CAST(NULL AS BIGINT) AS code_start, CAST(NULL AS BIGINT) AS code_end, CAST(NULL AS VARCHAR) AS other, CAST(NULL AS BIGINT) AS last_line
    FROM resolved AS r
    LEFT JOIN files AS f ON {{ same_place('f', 'r') }}
    WHERE f.code_file IS NULL
    UNION ALL
    SELECT
        2 AS priority, 'past its file' AS fault, r.query_id, r.source, r.item_id, r.code_file, r.revision,
        r.code_start, r.code_end, CAST(NULL AS VARCHAR) AS other, f.last_line
    FROM resolved AS r
    JOIN files AS f ON {{ same_place('f', 'r') }}
    WHERE r.code_level IN {{ lined }} AND r.code_end > f.last_line
    UNION ALL
    SELECT
        3 AS priority, 'two spans' AS fault, min(d.query_id) AS query_id, d.source, d.item_id, min(d.code_file) AS code_file, d.revision,
        min(d.code_start) AS code_start, min(d.code_end) AS code_end, CAST(NULL AS VARCHAR) AS other, CAST(NULL AS BIGINT) AS last_line
    FROM (
        SELECT r.source, r.item_id, r.revision, r.code_file, r.code_start, r.code_end, min(r.query_id) AS query_id
        FROM resolved AS r
        WHERE r.code_level IN {{ lined }}
        GROUP BY r.source, r.item_id, r.revision, r.code_file, r.code_start, r.code_end
    ) AS d
    GROUP BY d.source, d.revision, d.item_id
    HAVING count(*) > 1
    UNION ALL
    SELECT
        4 AS priority, 'two ids' AS fault, min(r.query_id) AS query_id, r.source, min(r.item_id) AS item_id, r.code_file, r.revision,
        r.code_start, r.code_end, max(r.item_id) AS other, CAST(NULL AS BIGINT) AS last_line
    FROM resolved AS r
    WHERE r.code_level IN {{ lined }}
    GROUP BY r.source, r.revision, r.code_file, r.code_start, r.code_end
    HAVING min(r.item_id) <> max(r.item_id)
{% if module_paths %}
    UNION ALL
    SELECT
        5 AS priority, 'unknown module' AS fault, r.query_id, r.source, r.item_id, r.code_file, r.revision,
        CAST(NULL AS BIGINT) AS code_start, CAST(NULL AS BIGINT) AS code_end, r.module_path AS other, CAST(NULL AS BIGINT) AS last_line
    FROM resolved AS r
    JOIN summaries AS s
        ON r.code_level NOT IN {{ lined }} AND {{ same_place('s', 'r') }} AND s.module_path = r.module_path
    WHERE s.module_id IS NULL
{% endif %}
),
unknown_files AS (
    {#- how many of the log's files the entities table does not hold (another repository's?) -#}
    SELECT count(*) FILTER (WHERE f.code_file IS NULL) AS unknown, count(*) AS known_or_not
    FROM (SELECT revision, code_file FROM resolved GROUP BY revision, code_file) AS r
    LEFT JOIN files AS f ON {{ same_place('f', 'r') }}
),
first_fault AS (
    SELECT
        f.fault, f.query_id, f.source, f.item_id, f.code_file, f.revision, f.code_start, f.code_end,
        f.other, f.last_line, u.unknown, u.known_or_not
    FROM faults AS f
    CROSS JOIN unknown_files AS u
    ORDER BY f.priority, f.query_id, f.source, f.item_id
    LIMIT 1
),
blocks AS (
    SELECT r.source, r.revision, r.code_file, r.code_start, r.code_end, r.item_id
    FROM resolved AS r
    WHERE r.code_level = 'block'
    GROUP BY r.source, r.revision, r.code_file, r.code_start, r.code_end, r.item_id
),
shared_pairs AS (
    SELECT a.source AS source_a, b.source AS source_b
    FROM blocks AS a
    JOIN blocks AS b
        ON a.source < b.source AND a.item_id = b.item_id AND {{ same_place('a', 'b') }}
        AND a.code_start = b.code_start AND a.code_end = b.code_end
    GROUP BY a.source, b.source
),
unshared AS (
    SELECT
        1 AS priority, a.source AS source_a, b.source AS source_b, a.item_id AS item_a, b.item_id AS item_b, a.code_file,
        a.code_start AS start_a, a.code_end AS end_a, b.code_start AS start_b, b.code_end AS end_b
    FROM blocks AS a
    JOIN blocks AS b
        ON a.source < b.source AND a.item_id = b.item_id AND a.revision IS NOT DISTINCT FROM b.revision
        AND NOT (a.code_file = b.code_file AND a.code_start = b.code_start AND a.code_end = b.code_end)
    UNION ALL
    SELECT
        2 AS priority, a.source AS source_a, b.source AS source_b, a.item_id AS item_a, b.item_id AS item_b, a.code_file,
        a.code_start AS start_a, a.code_end AS end_a, b.code_start AS start_b, b.code_end AS end_b
    FROM blocks AS a
    JOIN blocks AS b
        ON a.source <> b.source AND a.item_id < b.item_id AND {{ same_place('a', 'b') }}
        AND a.code_start = b.code_start AND a.code_end = b.code_end
    UNION ALL
    SELECT
        3 AS priority, o.source_a, o.source_b, CAST(NULL AS VARCHAR) AS item_a, CAST(NULL AS VARCHAR) AS item_b, o.code_file,
        CAST(NULL AS BIGINT) AS start_a, CAST(NULL AS BIGINT) AS end_a, CAST(NULL AS BIGINT) AS start_b, CAST(NULL AS BIGINT) AS end_b
    FROM (
        SELECT a.source AS source_a, b.source AS source_b, min(a.code_file) AS code_file
        FROM blocks AS a
        JOIN blocks AS b
            ON a.source < b.source AND {{ same_place('a', 'b') }}
            AND a.code_start <= b.code_end AND b.code_start <= a.code_end
        GROUP BY a.source, b.source
    ) AS o
    LEFT JOIN shared_pairs AS s ON s.source_a = o.source_a AND s.source_b = o.source_b
    WHERE s.source_a IS NULL
),
chunking AS (
    SELECT source_a, source_b, item_a, item_b, code_file, start_a, end_a, start_b, end_b, priority
    FROM unshared
    ORDER BY priority, source_a, source_b, item_a, item_b, code_file
    LIMIT 1
)
SELECT * FROM {{ final | ident }}
