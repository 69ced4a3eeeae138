{#-
Issue 48 §5: the top_n fused items of each query re-scored by an external re-ranker
(docs/fuse.md, "Re-ranking"). Reads fused_items (sql/fuse/fused.sql) and the input rerank_scores
(query_id, item_id, rerank_score: one row per item the re-ranker scored; item_id is the fused
item, at the recipe's target granularity).
Context: rerank (the recipe's block: top_n, mode, weight), inputs.fused_items,
inputs.rerank_scores, final (the CTE to select), ordered.
- rerank_score: the re-ranker's score of an item among the fused top_n; NULL beyond them, or
  when the re-ranker gave it none.
- score, mode weight: (1 - weight) * fused_norm + weight * rerank_norm, where fused_norm is the
  fused score min-max normalised over the query's top_n ((s - min) / (max - min); 1 when they
  are equal; 0 for a NULL fused score) and rerank_norm the same of rerank_score over the top_n
  it scored (0 for an item it did not score). mode replace: rerank_score.
  NULL beyond the top_n, whose rows keep their fused order after the re-ranked ones.
- rank: the top_n by score (rounded to 12 digits, as fused.sql ranks), NULL scores last, ties
  by fused rank then item_id; then the rest in fused order (their fused rank).
Stages: joined, spans, scored, reranked_items.
-#}
{% set n = rerank.top_n | int %}
WITH joined AS (
    SELECT
        f.* EXCLUDE (rank),
        f.rank AS fused_rank,
        CASE WHEN f.rank <= {{ n }} THEN CAST(r.rerank_score AS DOUBLE) END AS rerank_score
    FROM {{ inputs.fused_items | ident }} AS f
    LEFT JOIN {{ inputs.rerank_scores | ident }} AS r
        ON r.query_id = f.query_id AND r.item_id = f.item_id
),
spans AS (
    SELECT
        *,
        min(CASE WHEN fused_rank <= {{ n }} THEN fused_score END) OVER (PARTITION BY query_id) AS fused_lo,
        max(CASE WHEN fused_rank <= {{ n }} THEN fused_score END) OVER (PARTITION BY query_id) AS fused_hi,
        min(rerank_score) OVER (PARTITION BY query_id) AS rerank_lo,
        max(rerank_score) OVER (PARTITION BY query_id) AS rerank_hi
    FROM joined
),
scored AS (
    SELECT
        * EXCLUDE (fused_lo, fused_hi, rerank_lo, rerank_hi),
{% if rerank.mode == 'weight' %}
{% set w = rerank.weight | float %}
        CASE WHEN fused_rank <= {{ n }} THEN
            {{ (1.0 - w) | lit }} * (CASE WHEN fused_score IS NULL THEN CAST(0 AS DOUBLE) WHEN fused_hi > fused_lo THEN (fused_score - fused_lo) / NULLIF(fused_hi - fused_lo, 0) ELSE CAST(1 AS DOUBLE) END)
            + {{ w | lit }} * (CASE WHEN rerank_score IS NULL THEN CAST(0 AS DOUBLE) WHEN rerank_hi > rerank_lo THEN (rerank_score - rerank_lo) / NULLIF(rerank_hi - rerank_lo, 0) ELSE CAST(1 AS DOUBLE) END)
        END AS score
{% else %}
        rerank_score AS score
{% endif %}
    FROM spans
),
reranked_items AS (
    SELECT
        query_id,
        item_id,
        fused_score,
        CASE WHEN fused_rank <= {{ n }} THEN
            row_number() OVER (PARTITION BY query_id, fused_rank <= {{ n }} ORDER BY round(score, 12) DESC NULLS LAST, fused_rank ASC NULLS LAST, item_id ASC NULLS LAST)
        ELSE fused_rank END AS rank,
        n_sources,
        contributions,
        best_provenance,
        fused_rank,
        rerank_score,
        score
    FROM scored
)
SELECT * FROM {{ final | ident }}
{% if final == 'reranked_items' and ordered %}
ORDER BY query_id, rank
{% endif %}
