{#-
Seed 002 §11: one contract object per (evaluation_id, supplier_id), with its criteria results
(§8.1) and claim citations (§10), from the materialised stage tables.
-#}
SELECT
    e.evaluation_id,
    e.supplier_id,
    e.tenant_id,
    e.project_id,
    e.total_score,
    e.confidence,
    e.risk_level,
    coalesce((
        SELECT list({
            'criteria_id': c.criteria_id, 'name': c.name, 'method': c.method, 'score': c.score,
            'max_score': c.max_score, 'weight': c.weight, 'hard_pass': c.hard_pass, 'reason': c.reason,
            'citations': c.citations, 'confidence': c.confidence, 'evidence_quality': c.evidence_quality,
            'retrieval_agreement': c.retrieval_agreement, 'model_stability': c.model_stability,
            'redline_conflict': c.redline_conflict
        } ORDER BY c.criteria_id ASC NULLS LAST)
        FROM criteria_results AS c
        WHERE c.evaluation_id = e.evaluation_id AND c.supplier_id = e.supplier_id
    ), []) AS criteria_results,
    coalesce((
        SELECT list({
            'claim_id': k.claim_id, 'chunk_id': k.chunk_id, 'page': k.page, 'resolvable': k.resolvable
        } ORDER BY k.claim_id ASC NULLS LAST, k.chunk_id ASC NULLS LAST)
        FROM claim_citation_checks AS k
        WHERE k.evaluation_id = e.evaluation_id AND k.supplier_id = e.supplier_id
    ), []) AS citations,
    e.needs_human_review,
    e.hitl_reasons,
    e.recommendation,
    e.recommendation_status,
    e.rank,
    e.vetoed,
    e.score_deviation_pct,
    e.citation_coverage,
    e.unsupported_claims,
    e.rerank_degraded_ratio,
    e.rerank_alert,
    e.trace_id,
    e.policy_version
FROM evaluation_results AS e
ORDER BY e.evaluation_id ASC NULLS LAST, e.supplier_id ASC NULLS LAST
