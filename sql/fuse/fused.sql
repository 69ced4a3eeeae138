{#-
Seed 003: multi-source fusion of a retrieval log (docs/fusion-semantics.md is the contract).
Context: recipe (validated), sources (names used, sorted), has_rank, has_snippet, missing (effective policy:
zero | skip | list_min), needs_grid, inputs.retrieval_log, final (the CTE to select;
fused_items comes sorted by query_id, rank), components (the recipe's normalisers, aligners
and fusion method by kind and name, built-in or plugin, each its macro with its params bound:
orchestrator/fusion/components.py; the built-ins' files are sql/fuse/components/), query_rules
(each query-analyzer rule's component, the built-in `match` for a pattern), explain (false: fused_items has NULL contributions
and best_provenance, of the same types; the best hit's item and snippet are not computed, and
DuckDB prunes the other aggregates only they read).
With a document target aligned before fusion, `entries` is one row per (query, source, parent):
`with_features` adds what sql/fuse/parent_features.sql needs of it (worst_score, rrf_part), so
one aggregate, kept as a table, feeds both; `inputs.entries` names that table, read instead.
Stages: source_settings, log_rows, cut, [block_items, expanded], entries, lists, stats,
list_stats, normalized, [candidates], [grid], per_source, source_pivot, [ltr_features, model_inputs,
ltr_scored], fused, [parents_fused], ranked, [contributed_payloads], fused_items.
fusion.method ltr (a learned model, the recipe's ltr block: orchestrator/fusion/ltr.py) adds n_hits
(the hits aligned into an entry) to entries, per_source and source_pivot; ltr_features computes
the model's features of each (query, item), model_inputs what the model reads of them, and
ltr_scored the model's score as fused_score (sql/fuse/_ltr.sql).
-#}
{% from 'fuse/_rrf_part.sql' import rrf_part %}
{% from 'fuse/_ltr.sql' import ltr_feature, ltr_input, ltr_score %}
{% set r = recipe %}
{% set np = r.normalizer_params %}
{% set f = r.fusion %}
{% set al = r.aligner %}
{% set delayed = al.order == 'after_fusion' and r.target_granularity == 'doc' %}
{% set block_level = r.target_granularity == 'block' or delayed %}
{% set ltr = r.get('ltr') is not none %}
{#- each feature of a learned model: its kind and its source's position in `sources` -#}
{% set ltr_columns = [] %}
{% for name in (r.ltr.features if ltr else []) %}
{% set parts = name.split('@') %}
{% set _ = ltr_columns.append({'kind': parts[0], 'index': sources.index(parts[1]) + 1 if parts | length > 1 else none}) %}
{% endfor %}
{#- Aligned score of a group's values: the aligner's macro (sql/fuse/components/aligner/, or
    a plugin's). -#}
{% macro aligned_score(value) -%}
{{ components.aligner[al.method](value) }}
{%- endmacro %}
{#- Σ of `value` over the sources in name order, from one pivoted value per source (a group has
    at most one row per source): an ordered sum without the cost of an ordered aggregate. -#}
{% macro source_sum(value, condition=none) -%}
{% set also = ' AND ' ~ condition if condition else '' %}
CASE WHEN count({{ value }}){% if condition %} FILTER (WHERE {{ condition }}){% endif %} > 0 THEN
{%- for name in sources %} coalesce(any_value({{ value }}) FILTER (WHERE source = {{ name | lit }}{{ also }}), {{ 0.0 | lit }}){{ ' +' if not loop.last }}{% endfor %} END
{%- endmacro %}
{#- each source's normaliser, bound to the source's own keys -#}
{% set normalizers = {} %}
{% for name in sources %}{% set _ = normalizers.update({name: components.normalizer[r.sources[name].normalize].of_source(r.sources[name])}) %}{% endfor %}
{#- A normaliser that declares fills_candidates (borda) makes every candidate present in its
    lists, at the ŝ its macro gives a missing one (`filled`: each such ŝ's SQL -> the sources
    whose normaliser gives it), for the score methods only: a method over ranks (its header's `ranks`: rrf, isr) reads
    ranks, which a missing item has none of, so its n_d and contributions count real hits. -#}
{% set fusion = components.fusion[f.method] %}
{% set rank_based = fusion.component.ranks %}
{% set count_empty = f.get('count_empty_sources') and missing == 'zero' and needs_grid %}
{% set cut = f.get('top_n') is not none or f.get('min_score') is not none %}
{% set filled_sources = [] %}
{% set filled = {} %}
{% for name in sources if normalizers[name].component.fills_candidates and not rank_based %}
{% set _ = filled_sources.append(name) %}
{% set _ = filled.setdefault(normalizers[name].missing_score(), []).append(name) %}
{% endfor %}
{#- the sources whose normaliser reads the list's quantiles (needs s_q_lo, s_q_hi: quantile) -#}
{% set quantile_sources = [] %}
{% for name in sources if normalizers[name].component.needs_quantiles %}{% set _ = quantile_sources.append(name) %}{% endfor %}
{% macro is_one_of(source, names) -%}
{% if names %}{{ source }} IN ({% for name in names %}{{ name | lit }}{{ ', ' if not loop.last }}{% endfor %}){% else %}FALSE{% endif %}
{%- endmacro %}
WITH
source_settings AS (
    SELECT * FROM (VALUES
{% for name in sources %}
        ({{ name | lit }}, {{ r.sources[name].weight | float | lit }}, CAST({{ r.sources[name].top_k | lit }} AS BIGINT), {{ r.sources[name].distance | lit }}){{ ',' if not loop.last }}
{% endfor %}
    ) AS settings (source, weight, top_k, is_distance)
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
{% if r.query_analyzer.enabled and r.query_analyzer.rules %}
        {# a rule holds for a row by its component's condition over the query text (query_rules, by the rule's position) #}
        s.weight{% for rule in r.query_analyzer.rules %}{% set matches = query_rules[loop.index0]("coalesce(l.query_text, '')") %}{% for name, boost in rule.boost.items() %} * CASE WHEN l.source = {{ name | lit }} AND {{ matches }} THEN {{ boost | float | lit }} ELSE {{ 1.0 | lit }} END{% endfor %}{% endfor %} AS weight,
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
        c.snippet, c.query_text, c.weight, c.item_id AS original_id
    FROM cut AS c
    LEFT JOIN block_items AS b
        ON c.granularity IN ('doc', 'file') AND b.query_id = c.query_id AND b.parent_id = c.parent_id
),
{% endif %}
entries AS (
{% if block_level %}
    SELECT
        query_id, source, item_id AS target_id, parent_id, score AS raw_score, rank AS best_rank,
        {{ 'original_id' if delayed else 'item_id' }} AS best_item_id, score AS best_item_score,
        snippet AS best_snippet, weight
{% if ltr %}
        , CAST(1 AS BIGINT) AS n_hits
{% endif %}
    FROM {{ 'expanded' if delayed else 'cut' }}
{% elif inputs.entries %}
    SELECT
        query_id, source, target_id, parent_id, raw_score, best_rank,
        best_item_id, best_item_score, best_snippet, weight
{% if ltr %}
        , n_hits
{% endif %}
    FROM {{ inputs.entries | ident }}
{% else %}
    SELECT
        query_id, source, target_id, parent_id, raw_score, best_rank,
        best_item_id, best_item_score, best_snippet, weight{{ ', worst_score, rrf_part' if with_features }}
{% if ltr %}
        , n_hits
{% endif %}
    FROM (
        SELECT
            query_id,
            source,
            parent_id AS target_id,
            parent_id,
            {{ aligned_score('score') }} AS raw_score,
            min(rank) AS best_rank,
            -- the best hit: highest score, then lowest rank (ranks are unique within a list:
            -- the log's are checked, derived ones are row numbers); so its score is the max.
            -- One field per arg_min: a struct value would need field access, which
            -- PostgreSQL's jsonb loses the types of. Only explanations read the best hit's
            -- item and snippet: without them (or a snippet column) they are not computed, also
            -- where this aggregate is kept as a table and DuckDB could not prune them.
{% set best_hit = 'struct_pack(neg_score := -score, rank := rank)' %}
{% if explain %}
            arg_min(item_id, {{ best_hit }}) AS best_item_id,
{% else %}
            CAST(NULL AS VARCHAR) AS best_item_id,
{% endif %}
            max(score) AS best_item_score,
{% if ltr %}
            count(*) AS n_hits,
{% endif %}
{% if has_snippet and explain %}
            arg_min(snippet, {{ best_hit }}) AS best_snippet,
{% else %}
            CAST(NULL AS VARCHAR) AS best_snippet,
{% endif %}
            max(weight) AS weight{{ ',' if with_features }}
{% if with_features %}
            min(score) AS worst_score,
            -- exact (the same bits in any order): sql/fuse/parent_features.sql's rrf_sum adds these
            {{ rrf_part((f.k - 1 + f.rank_base) | float | lit, rrf_scale_bits) }} AS rrf_part
{% endif %}
        FROM cut
        GROUP BY query_id, source, parent_id
    ) AS by_parent
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
{# the grid (always there with a filled source: orchestrator/fusion/recipe.py) reads the candidates #}
{% set needs_candidates = needs_grid or components.normalizer.values() | selectattr('component.needs_candidates') | list %}
{% if needs_candidates %}
candidates AS (
    SELECT query_id, target_id, count(*) AS n_lists FROM lists GROUP BY query_id, target_id
),
{% endif %}
stats AS (
    SELECT
        l.*,
        min(l.raw_score) OVER per_list AS s_min,
        max(l.raw_score) OVER per_list AS s_max,
        avg(l.raw_score) OVER per_list AS s_mean,
        sum(l.raw_score) OVER per_list AS s_sum,
        sqrt(sum(l.raw_score * l.raw_score) OVER per_list) AS s_l2,
        {{ 'stddev_pop' if np.zscore_ddof == 0 else 'stddev_samp' }}(l.raw_score) OVER per_list AS s_sd_z,
        {{ 'stddev_pop' if np.dbsf_ddof == 0 else 'stddev_samp' }}(l.raw_score) OVER per_list AS s_sd_dbsf{{ ',' if quantile_sources }}
{% if quantile_sources %}
        {# windowed over the whole list, not grouped and joined back: DuckDB spills a window #}
        quantile_cont(l.raw_score, {{ np.quantile_p_lo | lit }}) OVER (PARTITION BY l.query_id, l.source) AS s_q_lo,
        quantile_cont(l.raw_score, {{ np.quantile_p_hi | lit }}) OVER (PARTITION BY l.query_id, l.source) AS s_q_hi
{% endif %}
    FROM lists AS l
    WINDOW per_list AS (PARTITION BY l.query_id, l.source ORDER BY l.list_rank ASC NULLS LAST, l.target_id ASC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
),
list_stats AS (
    SELECT
        s.*,
{% if needs_candidates %}
        q.n_candidates,
{% endif %}
        sum(exp((s.raw_score - s.s_max) / {{ np.softmax_temperature | lit }})) OVER (PARTITION BY s.query_id, s.source ORDER BY s.list_rank ASC NULLS LAST, s.target_id ASC NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS s_softmax_sum
    FROM stats AS s
{% if needs_candidates %}
    JOIN (SELECT query_id, count(*) AS n_candidates FROM candidates GROUP BY query_id) AS q ON q.query_id = s.query_id
{% endif %}
),
normalized AS (
    SELECT
        *,
        CASE source
{% for name in sources %}
            WHEN {{ name | lit }} THEN {{ normalizers[name]() }}
{% endfor %}
        END AS norm_score
    FROM list_stats
),
{% if needs_grid %}
query_lists AS (
    SELECT
        query_id, source,
        any_value(weight) AS weight, any_value(list_n) AS list_n,
        max(list_rank) AS last_rank,
        any_value(n_candidates) AS n_candidates, min(norm_score) AS list_min_score
    FROM normalized
    GROUP BY query_id, source
{% if count_empty %}
    UNION ALL
    -- a source without a hit for the query: a list every item is missing from (OpenSearch
    -- counts an empty sub-query's weight in arithmetic_mean)
    SELECT
        q.query_id, s.source,
        s.weight, CAST(0 AS BIGINT) AS list_n,
        CAST(NULL AS BIGINT) AS last_rank,
        q.n_candidates, CAST(NULL AS DOUBLE) AS list_min_score
    FROM (SELECT query_id, count(*) AS n_candidates FROM candidates GROUP BY query_id) AS q
    CROSS JOIN source_settings AS s
    LEFT JOIN (SELECT query_id, source FROM normalized GROUP BY query_id, source) AS held
        ON held.query_id = q.query_id AND held.source = s.source
    WHERE held.source IS NULL
{% endif %}
),
grid AS (
    SELECT
        c.query_id,
        c.target_id,
        ql.source,
        n.target_id IS NOT NULL OR {{ is_one_of('ql.source', filled_sources) }} AS present,
        coalesce(n.weight, ql.weight) AS weight,
        n.raw_score,
        n.list_rank,
        n.best_item_id,
        n.best_item_score,
        n.best_snippet,
        CASE
            WHEN n.target_id IS NOT NULL THEN n.norm_score
{% for score, names in filled.items() %}
            WHEN {{ is_one_of('ql.source', names) }} THEN {{ score }}
{% endfor %}
            WHEN {{ (missing == 'list_min') | lit }} THEN ql.list_min_score
            ELSE {{ 0.0 | lit }}
        END AS norm_score,
        CASE WHEN n.target_id IS NOT NULL THEN n.list_rank ELSE ql.last_rank END AS rank_for_fusion,
        n.target_id IS NOT NULL OR {{ is_one_of('ql.source', filled_sources) }} OR {{ (missing != 'skip') | lit }} AS counted,
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
{% if ltr %}
        n_hits,
{% endif %}
        CASE WHEN {{ 'rank_counted' if rank_based else 'counted' }} THEN {{ fusion.contribution() }} END AS contribution,
        {{ 'rank_counted AS counted' if rank_based else 'counted' }}
    FROM
{% if needs_grid %}
        grid
{% else %}
        (SELECT *, TRUE AS present, TRUE AS counted, TRUE AS rank_counted, list_rank AS rank_for_fusion FROM normalized) AS present_only
{% endif %}
),
source_pivot AS (
    SELECT
        query_id,
        target_id,
{% set pivoted = ['best_item_id', 'best_item_score', 'best_snippet', 'raw_score', 'norm_score', 'list_rank', 'weight', 'contribution'] %}
{% if ltr %}
{% set _ = pivoted.append('n_hits') %}
{% endif %}
{% if not ltr %}
        {{ fusion(source_sum) }} AS fused_score,
{% endif %}
        count(*) FILTER (WHERE present) AS n_sources,
{% for name in sources %}
        bool_or(present) FILTER (WHERE source = {{ name | lit }}) AS present_{{ loop.index }},
{% set i = loop.index %}
{% for field in pivoted %}
        any_value({{ field }}) FILTER (WHERE source = {{ name | lit }}) AS {{ field }}_{{ i }}{{ ',' if not (loop.last and i == sources | length) }}
{% endfor %}
{% endfor %}
    FROM per_source
    GROUP BY query_id, target_id
),
{% if ltr %}
ltr_features AS (
    SELECT
        *,
{% for feature in ltr_columns %}
        {{ ltr_feature(feature, f) }} AS ltr_{{ loop.index }}{{ ',' if not loop.last }}
{% endfor %}
    FROM source_pivot
),
model_inputs AS (
    SELECT
        *,
{% for feature in ltr_columns %}
        {{ ltr_input(r.ltr.model, loop.index) }} AS model_{{ loop.index }}{{ ',' if not loop.last }}
{% endfor %}
    FROM ltr_features
),
ltr_scored AS (
    SELECT *, {{ ltr_score(r.ltr.model) }} AS fused_score
    FROM model_inputs
),
{% endif %}
fused AS (
    SELECT
        query_id,
        target_id,
        fused_score,
        n_sources,
        list_filter([
{% for name in sources %}
{% set i = loop.index %}
            CASE WHEN present_{{ i }} THEN struct_pack(
                source := {{ name | lit }},
                original_id := best_item_id_{{ i }},
                raw_score := raw_score_{{ i }},
                norm_score := norm_score_{{ i }},
                rank := list_rank_{{ i }},
                weight := weight_{{ i }},
                contribution := contribution_{{ i }}
            ) END{{ ',' if not loop.last }}
{% endfor %}
        ], lambda entry: entry IS NOT NULL) AS contributions,
        -- the present source where the item ranks best (ties: the first source by name)
        CASE
{% for name in sources %}
{% set i = loop.index %}
            WHEN present_{{ i }} AND list_rank_{{ i }} = best_list_rank THEN struct_pack(
                original_id := best_item_id_{{ i }}, original_score := best_item_score_{{ i }},
                snippet := best_snippet_{{ i }}, source := {{ name | lit }})
{% endfor %}
        END AS best_provenance
    FROM (
        SELECT
            *,
            least({% for name in sources %}CASE WHEN present_{{ loop.index }} THEN list_rank_{{ loop.index }} END{{ ', ' if not loop.last }}{% endfor %}) AS best_list_rank
        FROM {{ 'ltr_scored' if ltr else 'source_pivot' }}
    ) AS pivoted
),
{% if delayed %}
parents_fused AS (
    SELECT
        query_id,
        parent_id AS target_id,
        {{ aligned_score('fused_score') }} AS fused_score,
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
{% if cut %}
    SELECT * FROM (
{% endif %}
    SELECT
        *,
        row_number() OVER (PARTITION BY query_id ORDER BY round(fused_score, 12) DESC NULLS LAST, target_id ASC NULLS LAST) AS rank
    FROM {{ 'parents_fused' if delayed else 'fused' }}
{% if cut %}
    ) AS numbered
    -- the fused list's cut (fusion.top_n, fusion.min_score: the engines' size and min_score),
    -- on the score as it ranks, so what is cut is always the tail of the ranking
{% set kept = [] %}
{% if f.get('top_n') is not none %}{% set _ = kept.append('rank <= ' ~ (f.top_n | int | lit)) %}{% endif %}
{% if f.get('min_score') is not none %}{% set _ = kept.append('round(fused_score, 12) >= ' ~ (f.min_score | float | lit)) %}{% endif %}
    WHERE {{ kept | join(' AND ') }}
{% endif %}
),
{% if explain and payload %}
{#- a hit's payload: its payload columns of the log's row `p` -#}
{% macro payload_of_hit() -%}
struct_pack({% for name in payload %}{{ name | ident }} := p.{{ name | ident }}{{ ', ' if not loop.last }}{% endfor %})
{%- endmacro %}
contributed_payloads AS (
    -- each contribution with its hit's payload: the hit's row of the log, by the log's key
    -- (none for an entry of a list the item is missing from: borda's)
    SELECT
        c.query_id,
        c.target_id,
        list(struct_insert(c.entry, payload := CASE WHEN p.item_id IS NOT NULL THEN {{ payload_of_hit() }} END) ORDER BY c.position ASC NULLS LAST) AS contributions
    FROM (
        SELECT query_id, target_id, unnest(contributions) AS entry, generate_subscripts(contributions, 1) AS position
        FROM ranked
    ) AS c
    LEFT JOIN {{ inputs.retrieval_log | ident }} AS p
        ON p.query_id = c.query_id AND p.source = struct_extract(c.entry, 'source') AND p.item_id = struct_extract(c.entry, 'original_id')
    GROUP BY c.query_id, c.target_id
),
{% endif %}
fused_items AS (
    SELECT
        query_id,
        target_id AS item_id,
        fused_score,
        rank,
        n_sources,
{% if explain and payload %}
        cp.contributions,
        -- the best hit's payload: its row of the log, by the log's key
        struct_insert(r.best_provenance, payload := (
            SELECT {{ payload_of_hit() }}
            FROM {{ inputs.retrieval_log | ident }} AS p
            WHERE p.query_id = r.query_id AND p.source = struct_extract(r.best_provenance, 'source')
                AND p.item_id = struct_extract(r.best_provenance, 'original_id')
        )) AS best_provenance
{% elif explain %}
        contributions,
        best_provenance
{% else %}
        CASE WHEN FALSE THEN contributions END AS contributions,
        CASE WHEN FALSE THEN best_provenance END AS best_provenance
{% endif %}
{% if explain and payload %}
    FROM ranked AS r
    JOIN contributed_payloads AS cp USING (query_id, target_id)
{% else %}
    FROM ranked
{% endif %}
)
SELECT * FROM {{ final | ident }}
{% if final == 'fused_items' and ordered %}
ORDER BY query_id, rank
{% endif %}
