{#-
One row per (fit, candidate, labelled query of the candidate's scope): the candidate's best
score (0 for a query without candidates: an empty result is `low`), its top-2 ratio and best
parent, the label, `outcome` for good-vs-bad (1 good, 0 bad, NULL ambiguous) and, with qrels,
whether the best parent is relevant.

Context: inputs.candidates, inputs.membership, inputs.labels (query_id, label), inputs.best
(from candidates.sql), inputs.qrels (query_id, parent_id, relevance) or none, final.
Stages: predictions.
-#}
WITH
predictions AS (
    SELECT
        c.fit,
        c.scope,
        c.candidate,
        m.query_id,
        coalesce(b.score, {{ 0.0 | lit }}) AS score,
        b.top2_ratio,
        b.best_parent_id,
        l.label,
        CASE l.label WHEN 'good' THEN 1 WHEN 'bad' THEN 0 END AS outcome,
{% if inputs.qrels %}
        coalesce(q.relevance > 0, FALSE) AS best_parent_relevant
{% else %}
        CAST(NULL AS BOOLEAN) AS best_parent_relevant
{% endif %}
    FROM {{ inputs.candidates | ident }} AS c
    JOIN {{ inputs.membership | ident }} AS m ON m.fit = c.fit AND m.scope = c.scope
    JOIN {{ inputs.labels | ident }} AS l ON l.query_id = m.query_id
    LEFT JOIN {{ inputs.best | ident }} AS b
        ON b.fit = c.fit AND b.candidate = c.candidate AND b.query_id = m.query_id
{% if inputs.qrels %}
    LEFT JOIN {{ inputs.qrels | ident }} AS q ON q.query_id = m.query_id AND q.parent_id = b.best_parent_id
{% endif %}
)
SELECT * FROM {{ final | ident }}
ORDER BY fit, candidate, query_id
