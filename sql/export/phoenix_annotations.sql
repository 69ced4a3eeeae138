{#-
The decisions of a run on a trace export as Arize Phoenix span annotations: each row one element
of the `data` list of the body of Phoenix's `POST /v1/span_annotations` (SpanAnnotationData:
span_id, name, annotator_kind, result {label, score, explanation}, metadata, identifier).
Four per trace, on its target span, annotator_kind CODE:

  duckscore.confidence    label  confidence_level (low, medium, high)
                          score  best_overall_score (left out for a query without candidates)
                          explanation  the best parent and its OverallScore
  duckscore.need_hitl     label  true or false, score 1 or 0
                          explanation  the top-2 ratio (left out when there is none)
  duckscore.web_fallback  label  true or false, score 1 or 0
                          explanation  why, when true (no candidate parent; low confidence and
                          no human review)
  duckscore.risk_flags    label  the query's risk flags (seed 000 §7.3), comma-separated, or none
                          score  how many; explanation  the best parent's sub-scores

The query's risk flags: the best parent's, and ambiguous_candidate, which §7.3 sets on the
runner-up, when the runner-up has it (both from the contract's top_parents).

metadata: query_id, best_parent_id, best_overall_score, top2_ratio, score_policy_version, and the
best parent's sub-scores (strength, coverage, stability: seed 000 §12.2) and the risk_flags;
identifier: `duckscore:<score policy version>`, so that importing a policy's decisions again
replaces them (Phoenix upserts on name, span and identifier) and another policy's stand beside.
A result's NULL fields are left out (Phoenix's client types have no nulls there).

The target span of a trace: its root span (root_span_id) when the export held it, else its first
retrieval span (by source, then span id). A query without spans (listed by `--queries` only)
gets no annotation.

Reads `inputs.queries` (queries.parquet), `inputs.spans` (spans.parquet) and `inputs.policies`
(query_id, score_policy_version, top_parents: the contract). One row per annotation: query_id, position (the
order above) and the annotation as JSON, ordered by query_id and position.
-#}
{% set annotations = [
    ('duckscore.confidence', 'confidence_level', 'best_overall_score', 'confidence_why'),
    ('duckscore.need_hitl', 'CAST(need_hitl AS VARCHAR)', 'CAST(need_hitl AS DOUBLE)', 'hitl_why'),
    ('duckscore.web_fallback', 'CAST(web_fallback AS VARCHAR)', 'CAST(web_fallback AS DOUBLE)', 'fallback_why'),
    ('duckscore.risk_flags', 'flags_label', 'CAST(len(risk_flags) AS DOUBLE)', 'subscores_why'),
] %}
WITH
targets AS (
    SELECT
        query_id,
        coalesce(
            min(root_span_id),
            first(span_id ORDER BY source ASC NULLS LAST, span_id ASC NULLS LAST)
        ) AS span_id
    FROM {{ inputs.spans | ident }}
    GROUP BY query_id
),
best_parents AS (
    SELECT
        query_id,
        score_policy_version,
        top_parents[1] AS best,
        list_concat(
            coalesce(top_parents[1].risk_flags, CAST([] AS VARCHAR[])),
            CASE
                WHEN list_contains(top_parents[2].risk_flags, {{ 'ambiguous_candidate' | lit }})
                    THEN [{{ 'ambiguous_candidate' | lit }}]
                ELSE CAST([] AS VARCHAR[])
            END
        ) AS risk_flags
    FROM {{ inputs.policies | ident }}
),
decisions AS (
    SELECT
        q.query_id,
        t.span_id,
        q.best_overall_score,
        q.confidence_level,
        q.need_hitl,
        q.web_fallback,
        coalesce(p.risk_flags, CAST([] AS VARCHAR[])) AS risk_flags,
        CASE
            WHEN len(coalesce(p.risk_flags, CAST([] AS VARCHAR[]))) = 0 THEN {{ 'none' | lit }}
            ELSE array_to_string(p.risk_flags, {{ ',' | lit }})
        END AS flags_label,
        CASE
            WHEN p.best IS NULL THEN {{ 'no candidate parent' | lit }}
            ELSE printf(
                {{ 'best parent %s: strength %.4f, coverage %.4f, stability %.4f' | lit }},
                p.best.parent_id, p.best.strength, p.best.coverage, p.best.stability
            )
        END AS subscores_why,
        CASE
            WHEN q.best_parent_id IS NULL THEN {{ 'no candidate parent' | lit }}
            ELSE {{ 'best parent ' | lit }} || q.best_parent_id || {{ ', OverallScore ' | lit }}
                || printf({{ '%.4f' | lit }}, q.best_overall_score)
        END AS confidence_why,
        {{ 'top-2 ratio (score 2 / score 1) ' | lit }} || printf({{ '%.4f' | lit }}, q.top2_ratio) AS hitl_why,
        CASE
            WHEN q.best_parent_id IS NULL THEN {{ 'no candidate parent' | lit }}
            WHEN q.web_fallback THEN {{ 'low confidence and no human review' | lit }}
        END AS fallback_why,
        json_object(
            {{ 'query_id' | lit }}, q.query_id,
            {{ 'best_parent_id' | lit }}, q.best_parent_id,
            {{ 'best_overall_score' | lit }}, q.best_overall_score,
            {{ 'top2_ratio' | lit }}, q.top2_ratio,
            {{ 'score_policy_version' | lit }}, p.score_policy_version,
            {{ 'strength' | lit }}, p.best.strength,
            {{ 'coverage' | lit }}, p.best.coverage,
            {{ 'stability' | lit }}, p.best.stability,
            {{ 'risk_flags' | lit }}, coalesce(p.risk_flags, CAST([] AS VARCHAR[]))
        ) AS metadata,
        {{ 'duckscore:' | lit }} || coalesce(p.score_policy_version, {{ '' | lit }}) AS identifier
    FROM {{ inputs.queries | ident }} AS q
    JOIN targets AS t ON t.query_id = q.query_id
    LEFT JOIN best_parents AS p ON p.query_id = q.query_id
),
results AS (
{% for name, label, score, why in annotations %}
{% if not loop.first %}
    UNION ALL
{% endif %}
    SELECT
        query_id, span_id, metadata, identifier,
        {{ loop.index | lit }} AS position,
        {{ name | lit }} AS name,
        {{ label }} AS label,
        {{ score }} AS score,
        {{ why }} AS explanation
    FROM decisions
{% endfor %}
),
annotations AS (
    SELECT
        query_id,
        position,
        json_object(
            {{ 'span_id' | lit }}, span_id,
            {{ 'name' | lit }}, name,
            {{ 'annotator_kind' | lit }}, {{ 'CODE' | lit }},
            {{ 'result' | lit }}, json_strip_nulls(json_object(
                {{ 'label' | lit }}, label,
                {{ 'score' | lit }}, score,
                {{ 'explanation' | lit }}, explanation
            )),
            {{ 'metadata' | lit }}, metadata,
            {{ 'identifier' | lit }}, identifier
        ) AS annotation
    FROM results
)
SELECT *
FROM annotations
ORDER BY query_id, position
