{#-
Many candidate policies scored in one query (`calibrate`, issue 4): the seed-000 stages of
sql/score/_parent_stages.sql, unchanged, over candidate_features, where each (fit, candidate,
query) is its own query id and each row carries its candidate's parameter values. The policy
passed in holds column(...) references for the tuned parameters and the reference bounds.

Context: inputs.raw_features (the parent_features table), inputs.parent_features (must be
'candidate_features', which the parent stages read), inputs.membership (fit, scope, query_id), inputs.candidates
(fit, scope, candidate, one column per parameter), policy, parameter_columns, final.
Stages: candidate_features, the parent stages, best (one row per fit, candidate and query: the
best parent, its overall score and the top-2 ratio of §8.1).
-#}
{% from 'score/_parent_stages.sql' import parent_stages with context %}
{% if inputs.parent_features != 'candidate_features' %}{{ fail('inputs.parent_features must be candidate_features') }}{% endif %}
WITH
candidate_features AS (
    SELECT
        c.fit || '|' || CAST(c.candidate AS VARCHAR) || '|' || f.query_id AS query_id,
        f.query_id AS label_query_id,
        f.* EXCLUDE (query_id),
        c.fit,
        c.candidate{{ ',' if parameter_columns }}
{% for name in parameter_columns %}
        c.{{ name | ident }}{{ ',' if not loop.last }}
{% endfor %}
    FROM {{ inputs.raw_features | ident }} AS f
    JOIN {{ inputs.membership | ident }} AS m ON m.query_id = f.query_id
    JOIN {{ inputs.candidates | ident }} AS c ON c.fit = m.fit AND c.scope = m.scope
),
{{ parent_stages() }},
best AS (
    SELECT
        fit,
        candidate,
        label_query_id AS query_id,
        parent_id AS best_parent_id,
        overall_score AS score,
        top2_score / NULLIF(top1_score, 0) AS top2_ratio
    FROM ranked
    WHERE rank = 1
)
SELECT * FROM {{ final | ident }}
