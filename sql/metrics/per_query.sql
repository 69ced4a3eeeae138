{#-
Retrieval evaluation (`duckscore eval`): one row per evaluated query with every requested metric,
defined as trec_eval and ranx define them.

Context: inputs.run (query_id, doc_id, score, rank), inputs.qrels (query_id, doc_id, relevance),
order_by ('rank': rank ascending, or 'score': score descending; ties by doc_id ascending),
cutoffs (list of {suffix, k}; k none = the whole run), metrics (list of {column, name, suffix, k}),
final (the CTE to select).

Stages: ranked, judgments, evaluated, ideal, judged_run, positioned, run_stats, ideal_stats,
per_query.

- A query is evaluated when the qrels judge at least one of its documents. Relevant means
  relevance > 0; gain = 2^relevance - 1 (0 when not relevant); discount = log2(position + 1).
  The gains of a query are divided by 2^s, s = max(0, floor(its largest relevance) - 52): nDCG,
  a ratio of two sums of gains, is unchanged by the common factor, no gain exceeds 2^52, and a
  grade of 1024 or more no longer makes 2^grade inf and nDCG inf / inf = NaN. For grades up to
  52, s = 0 and the gains are 2^relevance - 1 exactly as written.
- Run rows of queries without judgments are ignored; an evaluated query without run rows scores
  0 on every metric, as does a judged query with no relevant document.
-#}
{% macro upto(k, position='position') -%}
{% if k is not none %}{{ position }} <= {{ k | int | lit }}{% endif %}
{%- endmacro %}
{% macro where(conditions) -%}
{% set kept = conditions | select | list %}
{% if kept %} FILTER (WHERE {{ kept | join(' AND ') }}){% endif %}
{%- endmacro %}
{% macro ordered_sum(value, position='position') -%}
sum({{ value }} ORDER BY {{ position }} ASC NULLS LAST)
{%- endmacro %}
{% macro metric_value(m) -%}
{% if m.name == 'ndcg' -%}
coalesce(s.dcg{{ m.suffix }} / NULLIF(i.idcg{{ m.suffix }}, 0), {{ 0.0 | lit }})
{%- elif m.name == 'recall' -%}
coalesce(CAST(s.hits{{ m.suffix }} AS DOUBLE) / NULLIF(e.n_relevant, 0), {{ 0.0 | lit }})
{%- elif m.name == 'precision' -%}
{% if m.k is none %}{{ fail('precision needs a cutoff k') }}{% endif %}
CAST(coalesce(s.hits{{ m.suffix }}, 0) AS DOUBLE) / {{ m.k | int | lit }}
{%- elif m.name == 'mrr' -%}
{% if m.k is none %}
coalesce({{ 1.0 | lit }} / NULLIF(s.first_relevant, 0), {{ 0.0 | lit }})
{%- else %}
coalesce(CASE WHEN {{ upto(m.k, 's.first_relevant') }} THEN {{ 1.0 | lit }} / NULLIF(s.first_relevant, 0) END, {{ 0.0 | lit }})
{%- endif %}
{%- elif m.name == 'map' -%}
coalesce(s.ap_sum{{ m.suffix }} / NULLIF(e.n_relevant, 0), {{ 0.0 | lit }})
{%- elif m.name == 'hit_rate' -%}
CASE WHEN coalesce(s.hits{{ m.suffix }}, 0) > 0 THEN {{ 1.0 | lit }} ELSE {{ 0.0 | lit }} END
{%- elif m.name == 'hits' -%}
CAST(coalesce(s.hits{{ m.suffix }}, 0) AS DOUBLE)
{%- else -%}
{{ fail('unknown metric ' ~ m.name) }}
{%- endif %}
{%- endmacro %}
{% from 'metrics/_ranked_run.sql' import ranked_run with context %}
WITH
{{ ranked_run() }},
judgments AS (
    SELECT
        query_id,
        doc_id,
        relevance,
        relevance > 0 AS is_relevant,
        -- (2^relevance - 1) / 2^gain_scale, which never overflows (2^1024 is inf in a double)
        CASE WHEN relevance > 0 THEN pow({{ 2.0 | lit }}, relevance - gain_scale) - pow({{ 2.0 | lit }}, -gain_scale) ELSE {{ 0.0 | lit }} END AS gain
    FROM (
        SELECT
            *,
            greatest(floor(max(relevance) OVER (PARTITION BY query_id)) - {{ 52.0 | lit }}, {{ 0.0 | lit }}) AS gain_scale
        FROM {{ inputs.qrels | ident }}
    )
),
evaluated AS (
    SELECT
        query_id,
        count(*) FILTER (WHERE is_relevant) AS n_relevant,
        count(*) AS n_judged
    FROM judgments
    GROUP BY query_id
),
ideal AS (
    SELECT
        query_id,
        doc_id,
        gain,
        row_number() OVER (PARTITION BY query_id ORDER BY gain DESC NULLS LAST, doc_id ASC NULLS LAST) AS ideal_position
    FROM judgments
    WHERE is_relevant
),
judged_run AS (
    SELECT
        r.query_id,
        r.doc_id,
        r.position,
        coalesce(j.is_relevant, FALSE) AS is_relevant,
        coalesce(j.gain, {{ 0.0 | lit }}) AS gain
    FROM ranked AS r
    JOIN evaluated AS e ON e.query_id = r.query_id
    LEFT JOIN judgments AS j ON j.query_id = r.query_id AND j.doc_id = r.doc_id
),
positioned AS (
    SELECT
        *,
        sum(CASE WHEN is_relevant THEN 1 ELSE 0 END) OVER (
            PARTITION BY query_id ORDER BY position ASC NULLS LAST, doc_id ASC NULLS LAST
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS relevant_so_far,
        gain / NULLIF(log2(position + 1), 0) AS discounted_gain
    FROM judged_run
),
run_stats AS (
    SELECT
        query_id,
        count(*) AS n_retrieved,
        min(position) FILTER (WHERE is_relevant) AS first_relevant,
{% for c in cutoffs %}
        {{ ordered_sum('discounted_gain') }}{{ where([upto(c.k)]) }} AS dcg{{ c.suffix }},
        count(*){{ where(['is_relevant', upto(c.k)]) }} AS hits{{ c.suffix }},
        {{ ordered_sum('CAST(relevant_so_far AS DOUBLE) / NULLIF(position, 0)') }}{{ where(['is_relevant', upto(c.k)]) }} AS ap_sum{{ c.suffix }}{{ ',' if not loop.last }}
{% endfor %}
    FROM positioned
    GROUP BY query_id
),
ideal_stats AS (
    SELECT
        query_id,
{% for c in cutoffs %}
        {{ ordered_sum('gain / NULLIF(log2(ideal_position + 1), 0)', 'ideal_position') }}{{ where([upto(c.k, 'ideal_position')]) }} AS idcg{{ c.suffix }}{{ ',' if not loop.last }}
{% endfor %}
    FROM ideal
    GROUP BY query_id
),
per_query AS (
    SELECT
        e.query_id,
        e.n_relevant,
        coalesce(s.n_retrieved, 0) AS n_retrieved,
{% for m in metrics %}
        {{ metric_value(m) }} AS {{ m.column | ident }}{{ ',' if not loop.last }}
{% endfor %}
    FROM evaluated AS e
    LEFT JOIN run_stats AS s ON s.query_id = e.query_id
    LEFT JOIN ideal_stats AS i ON i.query_id = e.query_id
)
SELECT * FROM {{ final | ident }}
ORDER BY query_id
