{#-
Seed-000 parent features from the (converted, top_k-cut) hits of a multi-source retrieval log:

  rrf_sum        Σ over the parent's hits of weight / (k + rank − 1 + rank_base)   (RRF support)
  max_score      max over the parent's hits of the hit's score, min-max-normalised within its
                 (query, source) so BM25 and cosine scales are comparable (a list with one
                 distinct score gives 1) — or the raw score (`max_score: raw`)
  coverage       number of distinct block types hit
  total_chunks   the parent's chunk count, from the log
  coverage_ratio distinct block-granularity items hit / total_chunks, capped at 1
                 (doc-granularity hits, such as a summary source, are not chunks)

and the evidence `overall_v2` adds (issue 4), from the parent's rank in each source — a parent
ranks by its best hit (lowest rank, then parent_id), the document order of canonical RRF:

  parent_rrf       Σ over sources of weight / (k + parent_rank − 1 + rank_base): document-level
                   RRF (the SciFact reference run's score, exactly)
  source_agreement Σ over sources of 1 / parent_rank, divided by the number of sources that
                   returned anything for the query: 1 when every source ranks the parent first
  score_lead       Σ over the sources where the parent ranks first of its relative lead
                   clamp((s1 − s2) / |s1|, 0, 1) over the runner-up parent's best score s2
                   (0 when the source returned one parent, or s1 = 0), divided by the same
                   number of sources. Meaningful for real scores; a rank-only log gives 1.

Reads `inputs.hits` (query_id, source, item_id, parent_id, score, rank, granularity, block_type,
total_chunks, weight: sql/fuse/fused.sql's `cut`, whose granularity is never NULL); `sources` are
the log's sources in name order. `inputs.source_parents`, when set, is the (query, source, parent)
aggregate sql/fuse/fused.sql kept (`with_features`), read instead of grouping the hits again.
`block_types`, when set, are the hits' block types (at most 64, NULL as 'unknown'): distinct items
are then grouped once per parent, coverage counted as the bits of a block-type mask; without it
(portable SQL), in a third grouping level. Distinct counts come from GROUP BY steps, never
count(DISTINCT …); sums over sources are pivoted per source in name order,
sums over hits are exact (sql/fuse/_rrf_part.sql: DECIMAL(38, 24) or the recipe's fixed64, then
DOUBLE: the same bits in any order); the recipe bounds a hit's weight by 1e9 so they cannot overflow.
-#}
{% from 'fuse/_rrf_part.sql' import rrf_part %}
{% set rrf_offset = (rrf_k - 1 + rank_base) | float | lit %}
{% macro source_sum(value) -%}
{%- for name in sources %}coalesce(any_value({{ value }}) FILTER (WHERE source = {{ name | lit }}), {{ 0.0 | lit }}){{ ' + ' if not loop.last }}{% endfor %}
{%- endmacro %}
WITH
-- read by source and by item (by item only with inputs.source_parents): scanning the log again
-- beats storing it
hits AS NOT MATERIALIZED (
    SELECT
        query_id,
        source,
        item_id,
        parent_id,
        score,
        rank,
        weight,
        coalesce(block_type, 'unknown') AS block_type,
        granularity,
        total_chunks
    FROM {{ inputs.hits | ident }}
),
source_parents AS (
{% if inputs.source_parents %}
    SELECT query_id, source, parent_id, best_rank, best_item_score AS best_score, worst_score, weight, rrf_part
    FROM {{ inputs.source_parents | ident }}
{% else %}
    SELECT
        query_id,
        source,
        parent_id,
        min(rank) AS best_rank,
        max(score) AS best_score,
        min(score) AS worst_score,
        max(weight) AS weight,
        {{ rrf_part(rrf_offset, rrf_scale_bits) }} AS rrf_part
    FROM hits
    GROUP BY query_id, source, parent_id
{% endif %}
),
parent_positions AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY query_id, source ORDER BY best_rank ASC NULLS LAST, parent_id ASC NULLS LAST) AS parent_rank,
        lead(best_score) OVER (PARTITION BY query_id, source ORDER BY best_rank ASC NULLS LAST, parent_id ASC NULLS LAST) AS next_score,
        min(worst_score) OVER (PARTITION BY query_id, source) AS source_min,
        max(best_score) OVER (PARTITION BY query_id, source) AS source_max
    FROM source_parents
),
source_evidence AS (
    SELECT
        *,
{% if max_score == 'raw' %}
        best_score AS hit_score,
{% else %}
        CASE
            WHEN source_max - source_min = 0 THEN {{ 1.0 | lit }}
            ELSE (best_score - source_min) / NULLIF(source_max - source_min, 0)
        END AS hit_score,
{% endif %}
        CASE
            WHEN parent_rank = 1 THEN coalesce({{ clamp('(best_score - next_score) / NULLIF(abs(best_score), 0)') }}, {{ 0.0 | lit }})
            ELSE {{ 0.0 | lit }}
        END AS lead
    FROM parent_positions
),
query_sources AS (
    SELECT
        query_id,
        count(*) AS n_sources
    FROM (SELECT query_id, source FROM source_parents GROUP BY query_id, source) AS listed
    GROUP BY query_id
),
parent_evidence AS (
    SELECT
        e.query_id,
        e.parent_id,
        {{ source_sum('e.rrf_part') }} AS rrf_sum,
        max(e.hit_score) AS max_score,
        {{ source_sum('e.weight / (e.parent_rank + ' ~ rrf_offset ~ ')') }} AS parent_rrf,
        ({{ source_sum(1.0 | lit ~ ' / NULLIF(e.parent_rank, 0)') }}) / NULLIF(max(q.n_sources), 0) AS source_agreement,
        ({{ source_sum('e.lead') }}) / NULLIF(max(q.n_sources), 0) AS score_lead
    FROM source_evidence AS e
    JOIN query_sources AS q ON q.query_id = e.query_id
    GROUP BY e.query_id, e.parent_id
),
items AS (
    SELECT
        query_id,
        parent_id,
        item_id,
        block_type,
        bool_or(granularity = 'block') AS is_block,
        max(total_chunks) AS total_chunks
    FROM hits
    GROUP BY query_id, parent_id, item_id, block_type
),
{% if block_types %}
parent_coverage AS (
    SELECT
        query_id,
        parent_id,
        CAST(bit_count(bit_or(CAST(1 AS UBIGINT) << CASE block_type
{% for name in block_types %}
            WHEN {{ name | lit }} THEN CAST({{ loop.index0 | lit }} AS UBIGINT)
{% endfor %}
        END)) AS BIGINT) AS coverage,
        coalesce(max(total_chunks), 0) AS total_chunks,
        CASE
            WHEN max(total_chunks) > 0 THEN least({{ 1.0 | lit }}, count(*) FILTER (WHERE is_block) / NULLIF(max(total_chunks), 0))
            ELSE {{ 0.0 | lit }}
        END AS coverage_ratio
    FROM items
    GROUP BY query_id, parent_id
),
{% else %}
parent_block_types AS (
    SELECT
        query_id,
        parent_id,
        block_type,
        count(*) FILTER (WHERE is_block) AS hit_chunks,
        max(total_chunks) AS total_chunks
    FROM items
    GROUP BY query_id, parent_id, block_type
),
parent_coverage AS (
    SELECT
        query_id,
        parent_id,
        count(*) AS coverage,
        coalesce(max(total_chunks), 0) AS total_chunks,
        CASE
            WHEN max(total_chunks) > 0 THEN least({{ 1.0 | lit }}, sum(hit_chunks) / NULLIF(max(total_chunks), 0))
            ELSE {{ 0.0 | lit }}
        END AS coverage_ratio
    FROM parent_block_types
    GROUP BY query_id, parent_id
),
{% endif %}
features_with_evidence AS (
    SELECT
        e.query_id,
        e.parent_id,
        e.rrf_sum,
        e.max_score,
        c.coverage,
        c.total_chunks,
        c.coverage_ratio,
        e.parent_rrf,
        e.source_agreement,
        e.score_lead
    FROM parent_evidence AS e
    JOIN parent_coverage AS c ON c.query_id = e.query_id AND c.parent_id = e.parent_id
)
SELECT * FROM features_with_evidence
{% if ordered | default(true) %}
ORDER BY query_id, parent_id
{% endif %}
