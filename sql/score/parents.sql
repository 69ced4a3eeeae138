{#-
Seed 000 §4–§7.3: one row per (query_id, parent_id) with every normalised input, the three
sub-scores, overall_score, rank and the risk flags. Reads `inputs.parent_features`.
`final` names the CTE to select (default scored_parents), so each stage can be inspected alone.
-#}
{% from 'score/_parent_stages.sql' import parent_stages with context %}
WITH
{{ parent_stages() }}
SELECT * FROM {{ final | ident }}
{% if final == 'scored_parents' and ordered | default(true) %}
ORDER BY query_id, rank
{% endif %}
