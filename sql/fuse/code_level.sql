{#-
A code run's hits at one level (docs/code.md, "Fusing code"): sql/fuse/code_map.sql's hits with
their parent the module (`code_module_id`) or the entity (`code_entity_id`) each maps to, its file
when it maps to none, so that sql/fuse/fused.sql fuses modules or entities as parents.
Context: inputs.hits (the mapped hits), column (code_module_id or code_entity_id).
-#}
SELECT * REPLACE (coalesce({{ column | ident }}, parent_id) AS parent_id)
FROM {{ inputs.hits | ident }}
