{#-
Seed 001's stages, answer_rows … scored_answers, as named CTEs (a macro shared by answers.sql and
contract.sql). Reads `inputs.answers`, `inputs.citations`, `inputs.chunks` and, when `with_events`,
`inputs.events`. The lexicon and conclusion patterns are regular expressions built and escaped by
the runner from the policy's word lists (orchestrator/answering/policy.py); here they are values, through `lit`.
answer_v2's optional blocks add columns whether or not their inputs are given: `logprob_certainty`
reads `inputs.logprobs` when `with_logprobs`, `feedback` reads `inputs.feedback` when
`with_feedback`, `streaming` reads the answers' `streaming` column.
-#}
{% macro answer_stages() %}
{% set p = policy %}
{% set cq = p.citation_relevance %}
{% set s = p.structure %}
{% set c = p.certainty %}
{% set w = p.weights %}
{% set lp = p.get('logprob_certainty') %}
{% set fb = p.get('feedback') %}
{% set st = p.get('streaming') %}
{% set level_order = {'low': 0, 'medium': 1} %}
answer_rows AS (
    SELECT answer_id, query_id, answer_text, retrieved_count{{ ', streaming' if st }}
    FROM {{ inputs.answers | ident }}
),
citation_counts AS (
    SELECT answer_id, count(*) AS citation_count
    FROM {{ inputs.citations | ident }}
    GROUP BY answer_id
),
ranked_chunks AS (
    SELECT
        answer_id,
        rerank_score,
        row_number() OVER (
            PARTITION BY answer_id ORDER BY rerank_score DESC NULLS LAST, chunk_id ASC NULLS LAST
        ) AS chunk_rank
    FROM {{ inputs.chunks | ident }}
),
relevance AS (
    -- the top-k scores summed in rank order (one value per filtered sum), so the mean does
    -- not depend on how threads split the rows
    SELECT
        answer_id,
        count(*) AS relevance_chunks,
        ({% for position in range(1, cq.top_k + 1) %}{{ ' + ' if not loop.first }}coalesce(sum(rerank_score) FILTER (WHERE chunk_rank = {{ position | lit }}), {{ 0.0 | lit }}){% endfor %})
            / NULLIF(count(*), 0) AS relevance_mean
    FROM ranked_chunks
    WHERE chunk_rank <= {{ cq.top_k | lit }}
    GROUP BY answer_id
),
text_features AS (
    SELECT
        answer_id,
        length(answer_text) AS answer_length,
        len(list_filter(
            regexp_split_to_array(answer_text, {{ paragraph_separator | lit }}),
            lambda segment: regexp_matches(segment, {{ visible_character | lit }})
        )) AS paragraphs,
        {% if conclusion_pattern is none %}
        FALSE AS has_conclusion,
        {% else %}
        regexp_matches(lower(answer_text), {{ conclusion_pattern | lit }}) AS has_conclusion,
        {% endif %}
        {% if lexicon_pattern is none %}
        CAST([] AS VARCHAR[]) AS lexicon_matches
        {% else %}
        regexp_extract_all(lower(answer_text), {{ lexicon_pattern | lit }}) AS lexicon_matches
        {% endif %}
    FROM answer_rows
),
lexicon_hits AS (
    SELECT
        answer_id,
        {% for name in ('uncertain', 'vague', 'assertive') %}
        {% set terms = 'list_filter(lexicon_matches, lambda term: list_contains(CAST(' ~ (lexicons[name] | lit) ~ ' AS VARCHAR[]), term))' %}
        {{ terms }} AS {{ name }}_terms,
        len({{ terms }}) AS {{ name }}_hits{{ ',' if not loop.last }}
        {% endfor %}
    FROM text_features
),
{% if with_events %}
contradiction_counts AS (
    SELECT
        answer_id,
        {% for severity in ('high', 'medium', 'low') %}
        count(*) FILTER (WHERE severity = {{ severity | lit }}) AS contradictions_{{ severity }}{{ ',' if not loop.last }}
        {% endfor %}
    FROM {{ inputs.events | ident }}
    GROUP BY answer_id
),
{% endif %}
{% if with_logprobs %}
token_logprobs AS (
    -- the logprobs summed in token order (one list per answer), so the mean does not depend on
    -- how threads split the rows
    SELECT
        answer_id,
        count(*) AS logprob_tokens,
        list_sum(list(logprob ORDER BY token_index ASC NULLS LAST)) / NULLIF(count(*), 0) AS mean_logprob
    FROM {{ inputs.logprobs | ident }}
    GROUP BY answer_id
),
{% endif %}
{% if with_feedback %}
{% set rating_order = 'ORDER BY given_at ASC NULLS LAST, rating ASC NULLS LAST' %}
feedback_decay AS (
    -- 0.5^(age / half-life) with the age counted from the answer's newest rating: the weighted
    -- mean is the same for every as_of (all ages move alike), and no old rating underflows
    -- the weights' sum to 0
    SELECT
        answer_id,
        rating,
        given_at,
        pow({{ 0.5 | lit }}, date_diff('microsecond', given_at, max(given_at) OVER (PARTITION BY answer_id))
            / {{ 86400e6 | lit }} / {{ fb.half_life_days | lit }}) AS decay
    FROM {{ inputs.feedback | ident }}
),
feedback_means AS (
    -- summed in one order per answer (equal keys have equal terms), so threads change nothing
    SELECT
        answer_id,
        count(*) AS feedback_count,
        list_sum(list(rating * decay {{ rating_order }}))
            / NULLIF(list_sum(list(decay {{ rating_order }})), {{ 0.0 | lit }}) AS feedback_rating
    FROM feedback_decay
    GROUP BY answer_id
),
{% endif %}
sub_factors AS (
    SELECT
        a.answer_id,
        a.query_id,
        coalesce(cc.citation_count, 0) AS citation_count,
        {{ band_points('coalesce(cc.citation_count, 0)', p.citation_count) }} AS citation_count_points,
        coalesce(r.relevance_chunks, 0) AS relevance_chunks,
        r.relevance_mean,
        coalesce({{ cq.max_points | lit }} * {{ clamp('(r.relevance_mean - ' ~ (cq.score_range[0] | lit) ~ ') / ' ~ ((cq.score_range[1] - cq.score_range[0]) | lit)) }}, {{ 0.0 | lit }}) AS citation_relevance,
        t.answer_length,
        {{ band_points('t.answer_length', p.length) }} AS length_points,
        t.paragraphs,
        CASE WHEN t.paragraphs >= {{ s.min_paragraphs | lit }} THEN {{ s.paragraph_points | lit }} ELSE {{ 0.0 | lit }} END AS paragraph_points,
        t.has_conclusion,
        CASE WHEN t.has_conclusion THEN {{ s.conclusion_points | lit }} ELSE {{ 0.0 | lit }} END AS conclusion_points,
        a.retrieved_count,
        {{ band_points('a.retrieved_count', p.retrieved_count) }} AS retrieval_count_points,
        coalesce(cc.citation_count, 0) / NULLIF(a.retrieved_count, 0) AS citation_rate,
        {% for name in ('uncertain', 'vague', 'assertive') %}
        l.{{ name }}_hits,
        l.{{ name }}_terms,
        {% endfor %}
        {% for severity in ('high', 'medium', 'low') %}
        {{ 'coalesce(e.contradictions_' ~ severity ~ ', 0)' if with_events else 'CAST(0 AS BIGINT)' }} AS contradictions_{{ severity }}{{ ',' if not loop.last or lp or fb or st }}
        {% endfor %}
        {% if lp %}
        {{ 'coalesce(tl.logprob_tokens, 0)' if with_logprobs else 'CAST(0 AS BIGINT)' }} AS logprob_tokens,
        {{ 'tl.mean_logprob' if with_logprobs else 'CAST(NULL AS DOUBLE)' }} AS mean_logprob{{ ',' if fb or st }}
        {% endif %}
        {% if fb %}
        {{ 'coalesce(fm.feedback_count, 0)' if with_feedback else 'CAST(0 AS BIGINT)' }} AS feedback_count,
        {{ 'fm.feedback_rating' if with_feedback else 'CAST(NULL AS DOUBLE)' }} AS feedback_rating{{ ',' if st }}
        {% endif %}
        {% if st %}
        coalesce(a.streaming, FALSE) AS streaming
        {% endif %}
    FROM answer_rows AS a
    LEFT JOIN citation_counts AS cc ON cc.answer_id = a.answer_id
    LEFT JOIN relevance AS r ON r.answer_id = a.answer_id
    JOIN text_features AS t ON t.answer_id = a.answer_id
    JOIN lexicon_hits AS l ON l.answer_id = a.answer_id
    {% if with_events %}
    LEFT JOIN contradiction_counts AS e ON e.answer_id = a.answer_id
    {% endif %}
    {% if with_logprobs %}
    LEFT JOIN token_logprobs AS tl ON tl.answer_id = a.answer_id
    {% endif %}
    {% if with_feedback %}
    LEFT JOIN feedback_means AS fm ON fm.answer_id = a.answer_id
    {% endif %}
),
certainty_parts AS (
    SELECT
        *,
        -- a rate is undefined without retrieved chunks: it gets the lowest band
        {{ band_points('coalesce(citation_rate, ' ~ (0.0 | lit) ~ ')', p.citation_rate) }} AS citation_rate_points,
        least(uncertain_hits * {{ c.uncertain.per_hit | lit }}, {{ c.uncertain.cap | lit }}) AS uncertain_penalty,
        least(vague_hits * {{ c.vague.per_hit | lit }}, {{ c.vague.cap | lit }}) AS vague_penalty,
        least(assertive_hits * {{ c.assertive.per_hit | lit }}, {{ c.assertive.cap | lit }}) AS assertive_bonus
    FROM sub_factors
),
factors AS (
    SELECT
        *,
        citation_count_points + citation_relevance AS citation_quality,
        length_points + paragraph_points + conclusion_points AS answer_quality,
        retrieval_count_points + citation_rate_points AS retrieval,
        {% set lexicon_certainty = clamp(c.base | lit ~ ' - uncertain_penalty - vague_penalty + assertive_bonus') %}
        {% if lp %}
        {{ lexicon_certainty }} AS lexicon_certainty,
        exp(mean_logprob) AS token_probability,
        -- an answer without logprobs keeps its lexicon certainty; the clamp only absorbs rounding
        {{ clamp('coalesce(' ~ ((1 - lp.weight) | lit) ~ ' * ' ~ lexicon_certainty ~ ' + ' ~ (lp.weight | lit) ~ ' * exp(mean_logprob), ' ~ lexicon_certainty ~ ')') }} AS certainty
        {% else %}
        {{ lexicon_certainty }} AS certainty
        {% endif %}
    FROM certainty_parts
),
totals AS (
    SELECT
        *,
        {% if st %}
        -- a streaming answer has no score (yet)
        {% endif %}
        {{ 'CASE WHEN streaming THEN NULL ELSE ' if st }}{{ w.citation_quality | lit }} * citation_quality + {{ w.answer_quality | lit }} * answer_quality
            + {{ w.retrieval | lit }} * retrieval + {{ w.certainty | lit }} * certainty{{ ' END' if st }} AS total
    FROM factors
),
percentages AS (
    {% set factor_percentage = (100.0 | lit) ~ ' * total / ' ~ (max_total | lit) %}
    {% if fb %}
    {% set feedback_points = (fb.weight | lit) ~ ' * coalesce(feedback_rating, ' ~ (0.0 | lit) ~ ')' %}
    -- users' ratings move the percentage by feedback.weight points at a mean rating of ±1
    SELECT
        *,
        {{ factor_percentage }} AS factor_percentage,
        {{ feedback_points }} AS feedback_points,
        {{ clamp(factor_percentage ~ ' + ' ~ feedback_points, 0.0, 100.0) }} AS percentage
    {% else %}
    SELECT *, {{ factor_percentage }} AS percentage
    {% endif %}
    FROM totals
),
score_levels AS (
    -- cuts compare the percentage rounded to 6 decimals: 74.99999999999999 from float sums is 75
    SELECT
        *,
        CASE
            {% if st %}
            WHEN streaming THEN {{ st.start_level | lit }}
            {% endif %}
            WHEN round(percentage, 6) >= {{ p.levels.high_at_least | lit }} THEN 'high'
            WHEN round(percentage, 6) >= {{ p.levels.medium_at_least | lit }} THEN 'medium'
            ELSE 'low'
        END AS score_level
    FROM percentages
),
adjusted_levels AS (
    -- each severity lowers the level to its policy level (never raises it); `warn` changes nothing
    SELECT
        *,
        ({% for severity, lowered in p.contradictions.items() if lowered == 'warn' %}{{ ' OR ' if not loop.first }}contradictions_{{ severity }} > 0{% else %}FALSE{% endfor %}) AS contradiction_warning,
        least(
            CASE score_level WHEN 'high' THEN 2 WHEN 'medium' THEN 1 ELSE 0 END
            {% for severity, lowered in p.contradictions.items() if lowered != 'warn' %}
            , CASE WHEN contradictions_{{ severity }} > 0 THEN {{ level_order[lowered] | lit }} ELSE 2 END
            {% endfor %}
        ) AS level_ordinal
    FROM score_levels
),
scored_answers AS (
    SELECT
        answer_id, query_id,
        citation_count, citation_count_points, relevance_chunks, relevance_mean, citation_relevance,
        citation_quality,
        answer_length, length_points, paragraphs, paragraph_points, has_conclusion,
        conclusion_points, answer_quality,
        retrieved_count, retrieval_count_points, citation_rate, citation_rate_points, retrieval,
        uncertain_hits, uncertain_terms, uncertain_penalty,
        vague_hits, vague_terms, vague_penalty,
        assertive_hits, assertive_terms, assertive_bonus,
        {% if lp %}
        lexicon_certainty, logprob_tokens, mean_logprob, token_probability,
        {% endif %}
        certainty, {{ 'streaming, ' if st }}total, {{ 'factor_percentage, feedback_count, feedback_rating, feedback_points, ' if fb }}percentage, score_level,
        contradictions_high, contradictions_medium, contradictions_low, contradiction_warning,
        ['low', 'medium', 'high'][level_ordinal + 1] AS level,
        {{ policy_version | lit }} AS answer_policy_version
    FROM adjusted_levels
)
{% endmacro %}
