{#-
Seed 001's contract: one JSON object per answer — the level (after contradiction events) and the
score's level, the percentage, the four factor scores and why, in plain words (answer_v2: also
the logprobs' share of the certainty, the feedback's points and the streaming start). Reads the
materialised `scored_answers`, or, when `standalone` is true, computes it in the same statement.
-#}
{% from 'answers/_answer_stages.sql' import answer_stages with context %}
{% set p = policy %}
{% set cq = p.citation_relevance %}
{% set s = p.structure %}
{% set c = p.certainty %}
{% set lp = p.get('logprob_certainty') %}
{% set fb = p.get('feedback') %}
{% set st = p.get('streaming') %}
WITH
{% if standalone %}
{{ answer_stages() }},
{% endif %}
contract AS (
    -- one JSON object per answer: the level, its percentage, the four factors and why
    SELECT
        answer_id,
        query_id,
        level,
        score_level,
        round(percentage, 2) AS percentage,
        round(total, 4) AS total,
        struct_pack(
            citation_quality := round(citation_quality, 4),
            answer_quality := round(answer_quality, 4),
            retrieval := round(retrieval, 4),
            certainty := round(certainty, 4)
        ) AS factors,
        struct_pack(
            high := contradictions_high,
            medium := contradictions_medium,
            low := contradictions_low
        ) AS contradictions,
        list_filter([
            printf('citation quality %.3f: %d citation(s) (%g of %g points), relevance %g of %g (%s)',
                   citation_quality, citation_count, citation_count_points, {{ max_points.citation_count | lit }},
                   round(citation_relevance, 4), {{ cq.max_points | lit }},
                   CASE WHEN relevance_chunks = 0 THEN 'no reranked chunks'
                        ELSE printf('mean rerank score %.4g of the top %d chunk(s)', relevance_mean, relevance_chunks) END),
            printf('answer quality %.3f: %d characters (%g of %g points), %d paragraph(s) (%g of %g), %s (%g of %g)',
                   answer_quality, answer_length, length_points, {{ max_points.length | lit }},
                   paragraphs, paragraph_points, {{ s.paragraph_points | lit }},
                   CASE WHEN has_conclusion THEN 'a conclusion phrase' ELSE 'no conclusion phrase' END,
                   conclusion_points, {{ s.conclusion_points | lit }}),
            printf('retrieval %.3f: %d retrieved (%g of %g points), citation rate %s (%g of %g)',
                   retrieval, retrieved_count, retrieval_count_points, {{ max_points.retrieved_count | lit }},
                   CASE WHEN citation_rate IS NULL THEN 'undefined' ELSE printf('%.1f%%', 100 * citation_rate) END,
                   citation_rate_points, {{ max_points.citation_rate | lit }}),
            printf('certainty %.3f: base %g, %d uncertain word(s) -%g, %d vague -%g, %d assertive +%g',
                   certainty, {{ c.base | lit }}, uncertain_hits, round(uncertain_penalty, 4), vague_hits,
                   round(vague_penalty, 4), assertive_hits, round(assertive_bonus, 4)),
            CASE WHEN uncertain_hits + vague_hits + assertive_hits > 0 THEN
                'words: ' || array_to_string(list_concat(uncertain_terms, vague_terms, assertive_terms), ', ') END,
            {% if lp %}
            CASE WHEN token_probability IS NOT NULL THEN
                printf('logprobs: certainty %.3f = %g × lexicon certainty %.3f + %g × token probability %.4f (exp of the mean logprob %.4g of %d token(s))',
                       certainty, {{ (1 - lp.weight) | lit }}, lexicon_certainty, {{ lp.weight | lit }},
                       token_probability, mean_logprob, logprob_tokens) END,
            {% endif %}
            {% if fb %}
            CASE WHEN feedback_count > 0 AND total IS NOT NULL THEN
                printf('feedback: %d rating(s), decayed mean %.4g (half-life %g days), %+.2f points: the percentage %.2f became %.2f',
                       feedback_count, feedback_rating, {{ fb.half_life_days | lit }}, feedback_points,
                       factor_percentage, percentage) END,
            {% endif %}
            {% if st %}
            CASE WHEN streaming THEN
                printf('streaming: no score yet; the level starts at %s', {{ st.start_level | lit }}) END,
            {% endif %}
            CASE WHEN level <> score_level THEN
                printf('contradictions (high %d, medium %d) lowered the level from %s to %s',
                       contradictions_high, contradictions_medium, score_level, level) END,
            CASE WHEN contradiction_warning THEN
                printf('contradiction warning (high %d, medium %d, low %d): the level is unchanged',
                       contradictions_high, contradictions_medium, contradictions_low) END
        ], lambda reason: reason IS NOT NULL) AS why,
        answer_policy_version
    FROM scored_answers
)
SELECT * FROM contract
ORDER BY answer_id
