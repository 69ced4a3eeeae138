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

Reads `inputs.hits` (query_id, source, item_id, parent_id, score, rank, granularity, block_type,
total_chunks, weight). Distinct counts come from GROUP BY steps, never count(DISTINCT …).
-#}
WITH
hits AS (
    SELECT
        query_id,
        source,
        item_id,
        parent_id,
        score,
        rank,
        weight,
        coalesce(block_type, 'unknown') AS block_type,
        coalesce(granularity, CASE WHEN item_id = parent_id THEN 'doc' ELSE 'block' END) AS granularity,
        total_chunks,
        min(score) OVER (PARTITION BY query_id, source) AS source_min,
        max(score) OVER (PARTITION BY query_id, source) AS source_max
    FROM {{ inputs.hits | ident }}
),
normalised_hits AS (
    SELECT
        *,
        weight / (rank + {{ (rrf_k - 1 + rank_base) | float | lit }}) AS rrf_contribution,
{% if max_score == 'raw' %}
        score AS hit_score
{% else %}
        CASE
            WHEN source_max - source_min = 0 THEN {{ 1.0 | lit }}
            ELSE (score - source_min) / NULLIF(source_max - source_min, 0)
        END AS hit_score
{% endif %}
    FROM hits
),
items AS (
    SELECT
        query_id,
        parent_id,
        item_id,
        block_type,
        bool_or(granularity = 'block') AS is_block,
        sum(rrf_contribution ORDER BY source ASC NULLS LAST) AS item_rrf,
        max(hit_score) AS item_score,
        max(total_chunks) AS total_chunks
    FROM normalised_hits
    GROUP BY query_id, parent_id, item_id, block_type
),
parent_block_types AS (
    SELECT
        query_id,
        parent_id,
        block_type,
        sum(item_rrf ORDER BY item_id ASC NULLS LAST) AS rrf_sum,
        max(item_score) AS max_score,
        count(*) FILTER (WHERE is_block) AS hit_chunks,
        max(total_chunks) AS total_chunks
    FROM items
    GROUP BY query_id, parent_id, block_type
),
parent_features AS (
    SELECT
        query_id,
        parent_id,
        sum(rrf_sum ORDER BY block_type ASC NULLS LAST) AS rrf_sum,
        max(max_score) AS max_score,
        count(*) AS coverage,
        coalesce(max(total_chunks), 0) AS total_chunks,
        CASE
            WHEN max(total_chunks) > 0 THEN least({{ 1.0 | lit }}, sum(hit_chunks) / NULLIF(max(total_chunks), 0))
            ELSE {{ 0.0 | lit }}
        END AS coverage_ratio
    FROM parent_block_types
    GROUP BY query_id, parent_id
)
SELECT * FROM parent_features
ORDER BY query_id, parent_id
