{#-
Reference quantiles for `normalization.mode: reference` (issue 4, docs/design.md): for each fit, the
P_lo / P_hi of each feature's per-query best value over the fit's training queries. A query's
best value is the maximum over its candidate parents, so the bounds span the range in which a
query's best parent moves: the absolute level a per-query normalisation erases.

Context: inputs.parent_features, inputs.membership (fit, scope, query_id; the rows with scope
'train' are used), features (names among rrf_sum, parent_rrf, max_score, coverage, log_chunks),
p_lo, p_hi, final. Stages: best_values, bounds.
-#}
WITH
best_values AS (
    SELECT
        m.fit,
        f.query_id,
{% for name in features %}
{% if name == 'log_chunks' %}
        max({{ log_scale('f.total_chunks', 1.0) }}) AS log_chunks{{ ',' if not loop.last }}
{% else %}
        max(f.{{ name | ident }}) AS {{ name | ident }}{{ ',' if not loop.last }}
{% endif %}
{% endfor %}
    FROM {{ inputs.parent_features | ident }} AS f
    JOIN {{ inputs.membership | ident }} AS m ON m.query_id = f.query_id AND m.scope = 'train'
    GROUP BY m.fit, f.query_id
),
bounds AS (
    SELECT
        fit,
{% for name in features %}
        quantile_cont({{ name | ident }}, {{ p_lo | lit }}) AS {{ (name ~ '_lo') | ident }},
        quantile_cont({{ name | ident }}, {{ p_hi | lit }}) AS {{ (name ~ '_hi') | ident }}{{ ',' if not loop.last }}
{% endfor %}
    FROM best_values
    GROUP BY fit
)
SELECT * FROM {{ final | ident }}
ORDER BY fit
