{#-
Seed 002 §8.4, calibration by anchor samples (policy calibration.method anchor_offset, bid_v2).
An anchor is a sample the LLM scored in the same runs, with an agreed reference score. Each run's
calibration parameter, per (evaluation, criterion), is its offset: the mean over that run's anchors
of reference_score - score. For every (evaluation, supplier) whose first pass flagged
calibration_needed, each soft score of an llm criterion is shifted by its run's offset and clamped
to [0, max_score] (no anchor for that run: kept). `final` names the stage:
  calibration_runs   the record, read after the first pass (evaluation_results: its flags)
  calibrated_scores  the soft scores, calibrated where that record says, for the second pass
  calibration        the record with the deviation after the second pass (from calibration_before,
                     the first pass's calibration_runs, and the second pass's evaluation_results)
-#}
WITH
offsets AS (
    SELECT
        evaluation_id, criteria_id, run_id,
        count(*) AS anchors,
        list(anchor_id ORDER BY anchor_id ASC NULLS LAST) AS anchor_ids,
        list_avg(list(reference_score - score ORDER BY anchor_id ASC NULLS LAST)) AS score_offset
    FROM anchors
    GROUP BY evaluation_id, criteria_id, run_id
),
calibration_runs AS (
    SELECT
        s.evaluation_id, s.supplier_id, s.criteria_id, s.run_id,
        s.score AS raw_score,
        coalesce(o.anchors, 0) AS anchors,
        coalesce(o.anchor_ids, CAST([] AS VARCHAR[])) AS anchor_ids,
        o.score_offset,
        CASE WHEN o.score_offset IS NULL THEN s.score
             ELSE greatest({{ 0.0 | lit }}, least(k.max_score, s.score + o.score_offset)) END AS calibrated_score,
        e.score_deviation_pct AS deviation_before_pct
    FROM soft_scores AS s
    JOIN evaluation_results AS e ON e.evaluation_id = s.evaluation_id AND e.supplier_id = s.supplier_id
    JOIN criteria AS k
      ON k.tenant_id = e.tenant_id AND k.project_id = e.project_id AND k.criteria_id = s.criteria_id
    LEFT JOIN offsets AS o
      ON o.evaluation_id = s.evaluation_id AND o.criteria_id = s.criteria_id AND o.run_id = s.run_id
    WHERE e.calibration_needed AND k.method = 'llm'
),
calibrated_scores AS (
    SELECT s.* REPLACE (coalesce(c.calibrated_score, s.score) AS score)
    FROM soft_scores AS s
    LEFT JOIN calibration_runs AS c
      ON c.evaluation_id = s.evaluation_id AND c.supplier_id = s.supplier_id
     AND c.criteria_id = s.criteria_id AND c.run_id = s.run_id
){% if final == 'calibration' %},
calibration AS (
    SELECT b.*, e.score_deviation_pct AS deviation_after_pct
    FROM calibration_before AS b
    JOIN evaluation_results AS e ON e.evaluation_id = b.evaluation_id AND e.supplier_id = b.supplier_id
){% endif %}
SELECT * FROM {{ final | ident }}
{% if order_by %}
ORDER BY {% for key in order_by %}{{ key | ident }} ASC NULLS LAST{{ ', ' if not loop.last }}{% endfor %}
{% endif %}
