{#-
Seed 004's calculateCompositeConfidence and the application tiers, as named CTEs over a relation
`source` with frequency_score, effectiveness_score and human_score (a macro shared by scores.sql,
from counts, and confidence.sql, from the store's scores).
-#}
{% macro composite_stages(source) %}
{% set p = policy %}
{% set w = p.weights %}
composite AS (
    SELECT
        *,
        frequency_score * {{ w.frequency | lit }} + effectiveness_score * {{ w.effectiveness | lit }}
            + human_score * {{ w.human | lit }} AS weighted,
        least(frequency_score, effectiveness_score, human_score) AS weakest
    FROM {{ source | ident }}
),
scored AS (
    -- seed: a dimension below the threshold multiplies the composite (and skips the clamp)
    SELECT
        instinct_id, frequency_score, effectiveness_score, human_score,
        CASE WHEN weakest < {{ p.composite.low_dimension_below | lit }}
             THEN weighted * {{ p.composite.low_dimension_factor | lit }}
             ELSE {{ clamp('weighted') }} END AS composite
    FROM composite
),
tiered AS (
    SELECT
        *,
        CASE
        {% for t in p.tiers[:-1] %}
            WHEN composite >= {{ t.at_least | lit }} THEN {{ t.tier | lit }}
        {% endfor %}
            ELSE {{ p.tiers[-1].tier | lit }}
        END AS tier,
        CASE
        {% for t in p.tiers[:-1] %}
            WHEN composite >= {{ t.at_least | lit }} THEN {{ t.injection_method | lit }}
        {% endfor %}
            ELSE {{ p.tiers[-1].injection_method | lit }}
        END AS injection_method
    FROM scored
)
{% endmacro %}
