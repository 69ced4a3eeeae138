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
),
parent_sources AS (
    SELECT
        query_id,
        source,
        parent_id,
        min(rank) AS best_rank,
        max(score) AS best_score,
        max(weight) AS weight
    FROM hits
    GROUP BY query_id, source, parent_id
),
parent_positions AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY query_id, source ORDER BY best_rank ASC NULLS LAST, parent_id ASC NULLS LAST) AS parent_rank
    FROM parent_sources
),
source_leads AS (
    SELECT
        *,
        CASE
            WHEN parent_rank = 1 THEN coalesce({{ clamp('(best_score - runner_up_score) / NULLIF(abs(best_score), 0)') }}, {{ 0.0 | lit }})
            ELSE {{ 0.0 | lit }}
        END AS lead
    FROM (
        SELECT
            *,
            max(CASE WHEN parent_rank = 2 THEN best_score END) OVER (PARTITION BY query_id, source) AS runner_up_score
        FROM parent_positions
    ) AS with_runner_up
),
query_sources AS (
    SELECT
        query_id,
        count(*) AS n_sources
    FROM (SELECT query_id, source FROM parent_sources GROUP BY query_id, source) AS listed
    GROUP BY query_id
),
parent_evidence AS (
    SELECT
        l.query_id,
        l.parent_id,
        sum(l.weight / (l.parent_rank + {{ (rrf_k - 1 + rank_base) | float | lit }}) ORDER BY l.source ASC NULLS LAST) AS parent_rrf,
        sum({{ 1.0 | lit }} / NULLIF(l.parent_rank, 0) ORDER BY l.source ASC NULLS LAST) / NULLIF(max(q.n_sources), 0) AS source_agreement,
        sum(l.lead ORDER BY l.source ASC NULLS LAST) / NULLIF(max(q.n_sources), 0) AS score_lead
    FROM source_leads AS l
    JOIN query_sources AS q ON q.query_id = l.query_id
    GROUP BY l.query_id, l.parent_id
),
features_with_evidence AS (
    SELECT
        f.*,
        e.parent_rrf,
        e.source_agreement,
        e.score_lead
    FROM parent_features AS f
    JOIN parent_evidence AS e ON e.query_id = f.query_id AND e.parent_id = f.parent_id
)
SELECT * FROM features_with_evidence
ORDER BY query_id, parent_id
