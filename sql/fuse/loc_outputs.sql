{#-
loc_outputs.jsonl (docs/code.md, "loc_outputs.jsonl"): per query of the log, the code-localization
benchmarks' lists from one run — its files, modules and entities as the recipe fuses each level
(sql/fuse/fused.sql over sql/fuse/code_level.sql's hits), in fused order (rank: the score, ties
by id), the first top_k of each. A module list holds module ids, an entity list entity ids: a
hit that maps to none ranks its file at those levels, which is left out of them.
Context: inputs.hits (the mapped hits: code_hits), inputs.files, inputs.modules, inputs.entities
(the fused items of each level), top_k (files, modules, entities).
-#}
{% macro found(fused, k, ids=none) -%}
    SELECT f.query_id, list(f.item_id ORDER BY f.rank ASC NULLS LAST, f.item_id ASC NULLS LAST)[1:{{ k | int | lit }}] AS found
    FROM {{ fused | ident }} AS f
{% if ids %}
    JOIN {{ ids }} AS i ON i.item_id = f.item_id
{% endif %}
    GROUP BY f.query_id
{%- endmacro %}
WITH
queries AS (
    SELECT h.query_id FROM {{ inputs.hits | ident }} AS h GROUP BY h.query_id
),
module_ids AS (
    SELECT h.code_module_id AS item_id FROM {{ inputs.hits | ident }} AS h
    WHERE h.code_module_id IS NOT NULL GROUP BY h.code_module_id
),
entity_ids AS (
    SELECT h.code_entity_id AS item_id FROM {{ inputs.hits | ident }} AS h
    WHERE h.code_entity_id IS NOT NULL GROUP BY h.code_entity_id
),
found_files AS (
{{ found(inputs.files, top_k.files) }}
),
found_modules AS (
{{ found(inputs.modules, top_k.modules, 'module_ids') }}
),
found_entities AS (
{{ found(inputs.entities, top_k.entities, 'entity_ids') }}
)
SELECT
    q.query_id AS instance_id,
    coalesce(ff.found, CAST([] AS VARCHAR[])) AS found_files,
    coalesce(fm.found, CAST([] AS VARCHAR[])) AS found_modules,
    coalesce(fe.found, CAST([] AS VARCHAR[])) AS found_entities,
    CAST([] AS VARCHAR[]) AS raw_output_loc
FROM queries AS q
LEFT JOIN found_files AS ff ON ff.query_id = q.query_id
LEFT JOIN found_modules AS fm ON fm.query_id = q.query_id
LEFT JOIN found_entities AS fe ON fe.query_id = q.query_id
