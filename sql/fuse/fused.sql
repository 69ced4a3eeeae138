{#-
Seed 003: multi-source fusion of a retrieval log (docs/fusion-semantics.md is the contract).
Context: recipe (validated), sources (names used, sorted), has_rank, missing (effective policy:
zero | skip | list_min), needs_grid, inputs.retrieval_log, final (the CTE to select).
Stages: source_settings, log_rows, cut, [block_items, expanded], entries, lists, stats,
list_stats, normalized, candidates, [grid], per_source, fused, ranked, [parents_fused],
fused_items.
-#}
{% from 'fuse/_normalizers.sql' import normalizer with context %}
{% set r = recipe %}
{% set np = r.normalizer_params %}
{% set f = r.fusion %}
{% set al = r.aligner %}
{% set delayed = al.order == 'after_fusion' and r.target_granularity == 'doc' %}
{% set block_level = r.target_granularity == 'block' or delayed %}
{% macro ordered_sum(value, position) -%}
sum({{ value }} ORDER BY {{ position }} ASC NULLS LAST)
{%- endmacro %}
{% macro aligned_score(value, position) -%}
{% if al.method == 'max' -%}max({{ value }})
{%- elif al.method == 'sum' -%}{{ ordered_sum(value, position) }}
{%- elif al.method == 'mean' -%}{{ ordered_sum(value, position) }} / NULLIF(count(*), 0)
{%- elif al.method == 'sum_top_n' -%}{{ ordered_sum(value, position) }}{% if al.top_n %} FILTER (WHERE {{ position }} <= {{ al.top_n | lit }}){% endif %}
{%- elif al.method == 'max_decay' -%}{{ ordered_sum(value ~ ' * pow(' ~ (al.decay | lit) ~ ', ' ~ position ~ ' - 1)', position) }}{% if al.top_n %} FILTER (WHERE {{ position }} <= {{ al.top_n | lit }}){% endif %}
{%- endif %}
{%- endmacro %}
{% macro rank_contribution(rank_expr) -%}
{% if f.method == 'rrf' -%}
weight / (({{ rank_expr }}) + {{ (f.k - 1 + f.rank_base) | float | lit }})
{%- else -%}
weight / NULLIF(({{ rank_expr }}) * ({{ rank_expr }}), 0)
{%- endif %}
{%- endmacro %}
WITH
source_settings AS (
    SELECT * FROM (VALUES
{% for name in sources %}
        ({{ name | lit }}, {{ r.sources[name].weight | float | lit }}, {{ r.sources[name].normalize | lit }}, {{ r.sources[name].top_k | lit }}, {{ r.sources[name].distance | lit }}){{ ',' if not loop.last }}
{% endfor %}
    ) AS settings (source, weight, normalizer, top_k, is_distance)
),
log_rows AS (
    SELECT
        l.query_id,
        l.source,
        l.item_id,
        l.parent_id,
        CASE WHEN s.is_distance THEN -l.score ELSE l.score END AS score,
{% if has_rank %}
        l.rank,
{% else %}
        row_number() OVER (PARTITION BY l.query_id, l.source ORDER BY CASE WHEN s.is_distance THEN -l.score ELSE l.score END DESC NULLS LAST, l.item_id ASC NULLS LAST) AS rank,
{% endif %}
        coalesce(l.granularity, CASE WHEN l.item_id = l.parent_id THEN 'doc' ELSE 'block' END) AS granularity,
        l.block_type,
        l.total_chunks,
        l.snippet,
        l.query_text,
        s.normalizer,
{% if r.query_analyzer.enabled and r.query_analyzer.rules %}
        s.weight{% for rule in r.query_analyzer.rules %}{% for name, boost in rule.boost.items() %} * CASE WHEN l.source = {{ name | lit }} AND regexp_matches(coalesce(l.query_text, ''), {{ rule.match | lit }}) THEN {{ boost | float | lit }} ELSE {{ 1.0 | lit }} END{% endfor %}{% endfor %} AS weight,
{% else %}
        s.weight,
{% endif %}
        s.top_k
    FROM {{ inputs.retrieval_log | ident }} AS l
    JOIN source_settings AS s ON s.source = l.source
),
cut AS (
    SELECT * FROM log_rows WHERE top_k IS NULL OR rank <= top_k
),
{% if delayed %}
block_items AS (
    SELECT query_id, parent_id, item_id FROM log_rows WHERE granularity = 'block' GROUP BY query_id, parent_id, item_id
),
expanded AS (
    SELECT
        c.query_id, c.source, coalesce(b.item_id, c.item_id) AS item_id, c.parent_id, c.score, c.rank,
        c.snippet, c.query_text, c.normalizer, c.weight, c.item_id AS original_id
    FROM cut AS c
    LEFT JOIN block_items AS b
        ON c.granularity = 'doc' AND b.query_id = c.query_id AND b.parent_id = c.parent_id
),
{% endif %}
entries AS (
{% if block_level %}
    SELECT
        query_id, source, item_id AS target_id, parent_id, score AS raw_score, rank AS best_rank,
        {{ 'original_id' if delayed else 'item_id' }} AS best_item_id, score AS best_item_score,
        snippet AS best_snippet, normalizer, weight
    FROM {{ 'expanded' if delayed else 'cut' }}
{% else %}
    SELECT
        query_id,
        source,
        parent_id AS target_id,
        parent_id,
        {{ aligned_score('score', 'position') }} AS raw_score,
        min(rank) AS best_rank,
        arg_min(item_id, position) AS best_item_id,
        arg_min(score, position) AS best_item_score,
        arg_min(snippet, position) AS best_snippet,
        any_value(normalizer) AS normalizer,
        any_value(weight) AS weight
    FROM (
        SELECT
            *,
            row_number() OVER (PARTITION BY query_id, source, parent_id ORDER BY score DESC NULLS LAST, rank ASC NULLS LAST, item_id ASC NULLS LAST) AS position
        FROM cut
    ) AS by_parent
    GROUP BY query_id, source, parent_id
{% endif %}
),
lists AS (
    SELECT
        *,
{% if block_level %}
        best_rank AS list_rank,
{% else %}
        row_number() OVER (PARTITION BY query_id, source ORDER BY raw_score DESC NULLS LAST, best_rank ASC NULLS LAST, target_id ASC NULLS LAST) AS list_rank,
{% endif %}
        count(*) OVER (PARTITION BY query_id, source) AS list_n
    FROM entries
),
candidates AS (
    SELECT query_id, target_id, count(*) AS n_lists FROM lists GROUP BY query_id, target_id
),
stats AS (
    SELECT
        l.*,
        count(*) OVER (PARTITION BY l.query_id) AS query_entries,
        min(l.raw_score) OVER per_list AS s_min,
        max(l.raw_score) OVER per_list AS s_max,
        avg(l.raw_score) OVER per_list AS s_mean,
        sum(l.raw_score) OVER per_list AS s_sum,
        sqrt(sum(l.raw_score * l.raw_score) OVER per_list) AS s_l2,
        {{ 'stddev_pop' if np.zscore_ddof == 0 else 'stddev_samp' }}(l.raw_score) OVER per_list AS s_sd_z,
        {{ 'stddev_pop' if np.dbsf_ddof == 0 else 'stddev_samp' }}(l.raw_score) OVER per_list AS s_sd_dbsf,
        quantile_cont(l.raw_score, {{ np.quantile_p_lo | lit }}) OVER (PARTITION BY l.query_id, l.source) AS s_q_lo,
        quantile_cont(l.raw_score, {{ np.quantile_p_hi | lit }}) OVER (PARTITION BY l.query_id, l.source) AS s_q_hi
    FROM lists AS l
    WINDOW per_list AS (PARTITION BY l.query_id, l.source ORDER BY l.list_rank ASC NULLS LAST, l.target_id ASC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
),
list_stats AS (
    SELECT
        s.*,
        q.n_candidates,
        sum(exp((s.raw_score - s.s_max) / {{ np.softmax_temperature | lit }})) OVER (PARTITION BY s.query_id, s.source ORDER BY s.list_rank ASC NULLS LAST, s.target_id ASC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS s_softmax_sum
    FROM stats AS s
    JOIN (SELECT query_id, count(*) AS n_candidates FROM candidates GROUP BY query_id) AS q ON q.query_id = s.query_id
),
normalized AS (
    SELECT
        *,
        CASE normalizer
{% for name in used_normalizers %}
            WHEN {{ name | lit }} THEN {{ normalizer(name, np) }}
{% endfor %}
        END AS norm_score
    FROM list_stats
),
{% if needs_grid %}
query_lists AS (
    SELECT
        query_id, source,
        any_value(weight) AS weight, any_value(normalizer) AS normalizer, any_value(list_n) AS list_n,
        max(list_rank) AS last_rank,
        any_value(n_candidates) AS n_candidates, min(norm_score) AS list_min_score
    FROM normalized
    GROUP BY query_id, source
),
grid AS (
    SELECT
        c.query_id,
        c.target_id,
        ql.source,
        n.target_id IS NOT NULL OR ql.normalizer = 'borda' AS present,
        coalesce(n.weight, ql.weight) AS weight,
        n.raw_score,
        n.list_rank,
        n.best_item_id,
        n.best_item_score,
        n.best_snippet,
        CASE
            WHEN n.target_id IS NOT NULL THEN n.norm_score
            WHEN ql.normalizer = 'borda' THEN {{ 0.5 | lit }} - (ql.list_n - 1) / NULLIF(2 * ql.n_candidates, 0)
            WHEN {{ (missing == 'list_min') | lit }} THEN ql.list_min_score
            ELSE {{ 0.0 | lit }}
        END AS norm_score,
        CASE WHEN n.target_id IS NOT NULL THEN n.list_rank ELSE ql.last_rank END AS rank_for_fusion,
        n.target_id IS NOT NULL OR ql.normalizer = 'borda' OR {{ (missing != 'skip') | lit }} AS counted,
        n.target_id IS NOT NULL OR {{ (missing == 'list_min') | lit }} AS rank_counted
    FROM candidates AS c
    JOIN query_lists AS ql ON ql.query_id = c.query_id
    LEFT JOIN normalized AS n ON n.query_id = c.query_id AND n.source = ql.source AND n.target_id = c.target_id
),
{% endif %}
per_source AS (
    SELECT
        query_id,
        target_id,
        source,
        present,
        weight,
        raw_score,
        list_rank,
        best_item_id,
        best_item_score,
        best_snippet,
        norm_score,
{% if f.method in ['rrf', 'isr'] %}
        CASE WHEN rank_counted THEN {{ rank_contribution('rank_for_fusion') }} END AS contribution,
        rank_counted AS counted
{% elif f.method == 'weighted_sum' or f.method == 'arithmetic_mean' %}
        CASE WHEN counted THEN weight * norm_score END AS contribution,
        counted
{% else %}
        CASE WHEN counted THEN norm_score END AS contribution,
        counted
{% endif %}
    FROM
{% if needs_grid %}
        grid
{% else %}
        (SELECT *, TRUE AS present, TRUE AS counted, TRUE AS rank_counted, list_rank AS rank_for_fusion FROM normalized) AS present_only
{% endif %}
),
fused AS (
    SELECT
        query_id,
        target_id,
{% set c = 'contribution' %}
{% if f.method in ['rrf', 'weighted_sum', 'combsum'] %}
        {{ ordered_sum(c, 'source') }} AS fused_score,
{% elif f.method == 'isr' %}
        {{ ordered_sum(c, 'source') }} * count(*) FILTER (WHERE present) AS fused_score,
{% elif f.method == 'combmnz' %}
        {{ ordered_sum(c, 'source') }} * count(*) FILTER (WHERE present) AS fused_score,
{% elif f.method == 'combanz' %}
        {{ ordered_sum(c, 'source') }} / NULLIF(count(*) FILTER (WHERE present), 0) AS fused_score,
{% elif f.method == 'combmax' %}
        max({{ c }}) AS fused_score,
{% elif f.method == 'combmin' %}
        min({{ c }}) AS fused_score,
{% elif f.method == 'combmed' %}
        quantile_cont({{ c }}, {{ 0.5 | lit }}) AS fused_score,
{% elif f.method == 'arithmetic_mean' %}
        {{ ordered_sum(c, 'source') }} / NULLIF({{ ordered_sum('weight', 'source') }} FILTER (WHERE counted), 0) AS fused_score,
{% elif f.method == 'geometric_mean' %}
        exp({{ ordered_sum('weight * ln(contribution)', 'source') }} FILTER (WHERE contribution > 0)
            / NULLIF({{ ordered_sum('weight', 'source') }} FILTER (WHERE contribution > 0), 0)) AS fused_score,
{% elif f.method == 'harmonic_mean' %}
        {{ ordered_sum('weight', 'source') }} FILTER (WHERE contribution > 0)
            / NULLIF({{ ordered_sum('weight / NULLIF(contribution, 0)', 'source') }} FILTER (WHERE contribution > 0), 0) AS fused_score,
{% endif %}
        count(*) FILTER (WHERE present) AS n_sources,
        list(struct_pack(
            source := source,
            original_id := best_item_id,
            raw_score := raw_score,
            norm_score := norm_score,
            rank := list_rank,
            weight := weight,
            contribution := contribution
        ) ORDER BY source ASC NULLS LAST) FILTER (WHERE present) AS contributions,
        arg_min(
            struct_pack(original_id := best_item_id, original_score := best_item_score, snippet := best_snippet, source := source),
            struct_pack(r := list_rank, s := source)
        ) FILTER (WHERE present) AS best_provenance
    FROM per_source
    GROUP BY query_id, target_id
),
{% if delayed %}
parents_fused AS (
    SELECT
        query_id,
        parent_id AS target_id,
        {{ aligned_score('fused_score', 'position') }} AS fused_score,
        max(n_sources) AS n_sources,
        flatten(list(contributions ORDER BY position ASC NULLS LAST)) AS contributions,
        arg_min(best_provenance, position) AS best_provenance
    FROM (
        SELECT
            f.*,
            p.parent_id,
            row_number() OVER (PARTITION BY f.query_id, p.parent_id ORDER BY f.fused_score DESC NULLS LAST, f.target_id ASC NULLS LAST) AS position
        FROM fused AS f
        JOIN (SELECT query_id, target_id, any_value(parent_id) AS parent_id FROM entries GROUP BY query_id, target_id) AS p
            ON p.query_id = f.query_id AND p.target_id = f.target_id
    ) AS by_parent
    GROUP BY query_id, parent_id
),
{% endif %}
ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY query_id ORDER BY round(fused_score, 12) DESC NULLS LAST, target_id ASC NULLS LAST) AS rank
    FROM {{ 'parents_fused' if delayed else 'fused' }}
),
fused_items AS (
    SELECT
        query_id,
        target_id AS item_id,
        fused_score,
        rank,
        n_sources,
        contributions,
        best_provenance
    FROM ranked
)
SELECT * FROM {{ final | ident }}
{% if final == 'fused_items' %}
ORDER BY query_id, rank
{% endif %}
