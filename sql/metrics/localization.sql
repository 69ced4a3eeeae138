{#-
Code localization (`duckscore eval --loc`): per instance and level, the code-localization
benchmarks' metrics (LocAgent's evaluation code, docs/metrics.md#code-localization-eval---loc),
and their means per level.

Context: inputs.predictions (instance_id, level, position, location: one row per entry of a
found_* list, position 1, 2, … in the list's order), inputs.gold (instance_id, level, location),
levels (list of {name, max_k}: file, module, function), cutoffs (the k of any level, ascending),
metrics (list of {kind: acc | ndcg | precision | recall | map, k, column, levels: the levels
asking it}), merge_init (boolean), final (the CTE to select).

Stages: normalized_predictions, normalized_gold, gold_sets, evaluated, kept_predictions,
ranked_predictions, judged, positioned, prediction_stats, ideal, ideal_stats, per_query, means.

- Both sides: backslashes become `/`, leading `./` are dropped; with merge_init, a function-level
  location ending in `.__init__` loses that suffix (`a.py:C.__init__` is `a.py:C`). Then each
  location counts once: the gold is a set, a prediction keeps its first position.
- An instance is evaluated at a level when its gold has a location there; one without a
  prediction scores 0 (all miss). Predictions beyond the level's largest k (max_k) are dropped.
- With G the gold set, hits@k the gold locations among the first k predictions:
  Acc@k = 1 when hits@k = min(|G|, k), else 0; Recall@k = hits@k / min(|G|, max_k);
  P@k = hits@k / k; NDCG@k = DCG@k / ideal DCG@k, gain 1, discount log2(rank + 1), the ideal
  ranking min(|G|, max_k) hits first; MAP@k = (Σ over hits at rank r <= k of hits@r / r) / k.
-#}
{% macro normalized(column) -%}
regexp_replace(replace({{ column }}, chr(92), '/'), '^([.]/)+', '')
{%- endmacro %}
{% macro merged(column) -%}
{% if merge_init %}
CASE WHEN level = 'function' AND right({{ column }}, 9) = '.__init__' THEN left({{ column }}, length({{ column }}) - 9) ELSE {{ column }} END
{%- else %}
{{ column }}
{%- endif %}
{%- endmacro %}
{% macro ordered_sum(value, rank='rank') -%}
sum({{ value }} ORDER BY {{ rank }} ASC NULLS LAST)
{%- endmacro %}
{% macro upto(k, rank='rank') -%}
{{ rank }} <= {{ k | int | lit }}
{%- endmacro %}
{% macro metric_value(m) -%}
{% if m.kind == 'acc' -%}
CASE WHEN coalesce(s.hits_at_{{ m.k | int }}, 0) = least(e.n_gold, {{ m.k | int | lit }}) THEN {{ 1.0 | lit }} ELSE {{ 0.0 | lit }} END
{%- elif m.kind == 'ndcg' -%}
coalesce(s.dcg_at_{{ m.k | int }}, {{ 0.0 | lit }}) / NULLIF(i.idcg_at_{{ m.k | int }}, 0)
{%- elif m.kind == 'precision' -%}
CAST(coalesce(s.hits_at_{{ m.k | int }}, 0) AS DOUBLE) / {{ m.k | int | lit }}
{%- elif m.kind == 'recall' -%}
CAST(coalesce(s.hits_at_{{ m.k | int }}, 0) AS DOUBLE) / NULLIF(least(e.n_gold, e.max_k), 0)
{%- elif m.kind == 'map' -%}
coalesce(s.ap_sum_at_{{ m.k | int }}, {{ 0.0 | lit }}) / {{ m.k | int | lit }}
{%- else -%}
{{ fail('unknown localization metric ' ~ m.kind) }}
{%- endif %}
{%- endmacro %}
{% if not levels %}{{ fail('levels must name at least one level') }}{% endif %}
{% for c in cutoffs %}{% if (c | int) < 1 or (c | int) != c %}{{ fail('k must be a whole number >= 1') }}{% endif %}{% endfor %}
{% set level_names = levels | map(attribute='name') | list %}
WITH
level_cutoffs AS (
    SELECT * FROM (VALUES
{% for l in levels %}
        ({{ l.name | lit }}, {{ l.max_k | int | lit }}){{ ',' if not loop.last }}
{% endfor %}
    ) AS c(level, max_k)
),
normalized_predictions AS (
    SELECT
        instance_id,
        level,
        position,
        {{ merged('path') }} AS location_id
    FROM (
        SELECT instance_id, level, position, {{ normalized('location') }} AS path
        FROM {{ inputs.predictions | ident }}
        WHERE level IN ({{ level_names | map('lit') | join(', ') }})
    )
),
normalized_gold AS (
    SELECT
        instance_id,
        level,
        {{ merged('path') }} AS location_id
    FROM (
        SELECT instance_id, level, {{ normalized('location') }} AS path
        FROM {{ inputs.gold | ident }}
        WHERE level IN ({{ level_names | map('lit') | join(', ') }})
    )
),
gold_sets AS (
    SELECT instance_id, level, location_id
    FROM normalized_gold
    GROUP BY instance_id, level, location_id
),
evaluated AS (
    SELECT g.instance_id, g.level, g.n_gold, c.max_k
    FROM (
        SELECT instance_id, level, count(*) AS n_gold
        FROM gold_sets
        GROUP BY instance_id, level
    ) AS g
    JOIN level_cutoffs AS c ON c.level = g.level
),
kept_predictions AS (
    SELECT instance_id, level, location_id, min(position) AS first_position
    FROM normalized_predictions
    GROUP BY instance_id, level, location_id
),
ranked_predictions AS (
    SELECT
        instance_id,
        level,
        location_id,
        row_number() OVER (
            PARTITION BY instance_id, level ORDER BY first_position ASC NULLS LAST, location_id ASC NULLS LAST
        ) AS rank
    FROM kept_predictions
),
judged AS (
    SELECT
        p.instance_id,
        p.level,
        p.location_id,
        p.rank,
        g.location_id IS NOT NULL AS is_hit
    FROM ranked_predictions AS p
    JOIN evaluated AS e ON e.instance_id = p.instance_id AND e.level = p.level
    LEFT JOIN gold_sets AS g
        ON g.instance_id = p.instance_id AND g.level = p.level AND g.location_id = p.location_id
    WHERE p.rank <= e.max_k
),
positioned AS (
    SELECT
        *,
        sum(CASE WHEN is_hit THEN 1 ELSE 0 END) OVER (
            PARTITION BY instance_id, level ORDER BY rank ASC NULLS LAST, location_id ASC NULLS LAST
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS hits_so_far,
        {{ 1.0 | lit }} / NULLIF(log2(rank + 1), 0) AS discount
    FROM judged
),
prediction_stats AS (
    SELECT
        instance_id,
        level,
{% for k in cutoffs %}
        count(*) FILTER (WHERE is_hit AND {{ upto(k) }}) AS hits_at_{{ k | int }},
        {{ ordered_sum('discount') }} FILTER (WHERE is_hit AND {{ upto(k) }}) AS dcg_at_{{ k | int }},
        {{ ordered_sum('CAST(hits_so_far AS DOUBLE) / NULLIF(rank, 0)') }} FILTER (WHERE is_hit AND {{ upto(k) }}) AS ap_sum_at_{{ k | int }}{{ ',' if not loop.last }}
{% endfor %}
    FROM positioned
    GROUP BY instance_id, level
),
ideal AS (
    SELECT instance_id, level, unnest(range(1, least(n_gold, max_k) + 1)) AS ideal_rank
    FROM evaluated
),
ideal_stats AS (
    SELECT
        instance_id,
        level,
{% for k in cutoffs %}
        {{ ordered_sum(1.0 | lit ~ ' / NULLIF(log2(ideal_rank + 1), 0)', 'ideal_rank') }} FILTER (WHERE {{ upto(k, 'ideal_rank') }}) AS idcg_at_{{ k | int }}{{ ',' if not loop.last }}
{% endfor %}
    FROM ideal
    GROUP BY instance_id, level
),
predicted_counts AS (
    SELECT instance_id, level, count(*) AS n_predicted
    FROM kept_predictions
    GROUP BY instance_id, level
),
per_query AS (
    SELECT
        e.instance_id,
        e.level,
        e.n_gold,
        coalesce(n.n_predicted, 0) AS n_predicted,
{% for m in metrics %}
        CASE WHEN e.level IN ({{ m.levels | map('lit') | join(', ') }}) THEN {{ metric_value(m) }} END AS {{ m.column | ident }}{{ ',' if not loop.last }}
{% endfor %}
    FROM evaluated AS e
    LEFT JOIN prediction_stats AS s ON s.instance_id = e.instance_id AND s.level = e.level
    LEFT JOIN ideal_stats AS i ON i.instance_id = e.instance_id AND i.level = e.level
    LEFT JOIN predicted_counts AS n ON n.instance_id = e.instance_id AND n.level = e.level
),
means AS (
    SELECT
        level,
        count(*) AS n_instances,
        count(*) FILTER (WHERE n_predicted = 0) AS n_without_predictions,
{% for m in metrics %}
        sum({{ m.column | ident }} ORDER BY instance_id ASC NULLS LAST) / NULLIF(count(*), 0) AS {{ m.column | ident }}{{ ',' if not loop.last }}
{% endfor %}
    FROM per_query
    GROUP BY level
)
SELECT * FROM {{ final | ident }}
