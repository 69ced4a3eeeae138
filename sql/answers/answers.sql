{#-
Seed 001: the confidence of logged answers — citation quality, answer quality, retrieval recall
and language certainty, each from 0 to 1, weighted into a total out of the weights' sum, a
percentage and a level; Self-RAG contradiction events lower the level (never raise it).
One row per answer with every factor and sub-factor. `final` names the CTE to select (default
scored_answers), so each stage can be run on its own.
-#}
{% from 'answers/_answer_stages.sql' import answer_stages with context %}
WITH
{{ answer_stages() }}
SELECT * FROM {{ final | ident }}
{% if final == 'scored_answers' and ordered %}
ORDER BY answer_id
{% endif %}
