{#-
Seed 004's three dimensions from counts, the composite and the tier (`duckscore instincts
recompute`). Reads `inputs.counts` (instinct_id, observation_count, contradiction_count,
positive_count, application_count, approvals, rejections, reflect_approved). Every stage is a
named CTE; `final` selects one. Exact doubles: the store rounds to its DECIMAL(4,3).
-#}
{% from 'instincts/_composite.sql' import composite_stages with context %}
{% set p = policy %}
{% set f = p.frequency %}
{% set e = p.effectiveness %}
{% set h = p.human %}
{% set z2 = e.z * e.z %}
WITH
counts AS (
    SELECT * FROM {{ inputs.counts | ident }}
),
frequency AS (
    SELECT
        *,
        greatest({{ 0.0 | lit }},
            CASE
            {% for bin in f.bins %}
                WHEN observation_count <= {{ bin.at_most | lit }} THEN {{ bin.base | lit }}
            {% endfor %}
                ELSE {{ f.above | lit }}
            END - contradiction_count * {{ f.contradiction_penalty | lit }}) AS frequency_score
    FROM counts
),
effectiveness AS (
    -- the Wilson lower bound as the seed writes it (its z, not an exact quantile), in its order
    {% set n = 'NULLIF(application_count, 0)' %}
    {% set denominator = '(' ~ (1.0 | lit) ~ ' + ' ~ (z2 | lit) ~ ' / ' ~ n ~ ')' %}
    {% set center = '(share + ' ~ ((z2 / 2.0) | lit) ~ ' / ' ~ n ~ ') / ' ~ denominator %}
    {% set margin = (e.z | lit) ~ ' * sqrt((share * (' ~ (1.0 | lit) ~ ' - share) + ' ~ ((z2 / 4.0) | lit) ~ ' / ' ~ n ~ ') / ' ~ n ~ ') / ' ~ denominator %}
    SELECT
        *,
        CASE WHEN application_count = 0 THEN {{ e.no_applications | lit }}
             ELSE {{ clamp(center ~ ' - ' ~ margin) }} END AS effectiveness_score
    FROM (SELECT *, positive_count / {{ n }} AS share FROM frequency)
),
human AS (
    -- the seed's loop itself: approvals first (s <- s + r(1 - s)), then rejections (s <- s - r s)
    {% set r = h.learning_rate | lit %}
    SELECT
        *,
        CASE
            WHEN reflect_approved THEN {{ h.reflect_approved | lit }}
            WHEN approvals + rejections = 0 THEN {{ h.prior | lit }}
            ELSE list_reduce(range(rejections), lambda score, step: score - {{ r }} * score,
                     list_reduce(range(approvals), lambda score, step: score + {{ r }} * ({{ 1.0 | lit }} - score),
                                 {{ h.prior | lit }}))
        END AS human_score
    FROM effectiveness
),
{{ composite_stages('human') }}
SELECT * FROM {{ final | ident }}
{% if final == 'tiered' %}
ORDER BY instinct_id
{% endif %}
