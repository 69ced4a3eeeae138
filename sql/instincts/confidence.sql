{#-
The confidence an agent reads (`duckscore instincts top`): the seed's penalised composite of the
store's three scores, its tier and injection method. Reads `inputs.instincts` (the store's table).
-#}
{% from 'instincts/_composite.sql' import composite_stages with context %}
WITH
stored AS (
    SELECT
        id AS instinct_id, trigger_text, action_text, domain, status, user_id,
        CAST(freq_score AS DOUBLE) AS frequency_score,
        CAST(eff_score AS DOUBLE) AS effectiveness_score,
        CAST(human_score AS DOUBLE) AS human_score
    FROM {{ inputs.instincts | ident }}
),
{{ composite_stages('stored') }}
SELECT
    t.instinct_id, s.trigger_text, s.action_text, s.domain, s.status, s.user_id,
    t.frequency_score, t.effectiveness_score, t.human_score, t.composite, t.tier, t.injection_method
FROM tiered AS t
JOIN stored AS s ON s.instinct_id = t.instinct_id
