{#-
Seed 004's UPDATE_RULES: each event adds its trigger's deltas to (freq, eff, human), clamped to
[0, 1] after every event, in event order (occurred_at, then event_id). Reads `inputs.events`
(instinct_id, event_id, event_type, occurred_at) and `inputs.start` (instinct_id, freq_score,
eff_score, human_score; an instinct without a start row starts at the policy's initial scores).
Scores stay DECIMAL(4,3), the store's type, so the clamped sums are exact. One row per event:
the scores after it. A recursive CTE, one step per event of the instinct with the most events.
-#}
{% set p = policy %}
{% set dec = 'DECIMAL(4, 3)' %}
WITH RECURSIVE
rules (event_type, d_freq, d_eff, d_human) AS (
    VALUES
    {% for trigger, deltas in p.update_rules.items() %}
        ({{ trigger | lit }}, CAST({{ deltas[0] | lit }} AS {{ dec }}), CAST({{ deltas[1] | lit }} AS {{ dec }}), CAST({{ deltas[2] | lit }} AS {{ dec }})){{ ',' if not loop.last }}
    {% endfor %}
),
steps AS (
    SELECT
        e.instinct_id, e.event_id, e.event_type, e.occurred_at, r.d_freq, r.d_eff, r.d_human,
        row_number() OVER (
            PARTITION BY e.instinct_id ORDER BY e.occurred_at ASC NULLS LAST, e.event_id ASC NULLS LAST
        ) AS step
    FROM {{ inputs.events | ident }} AS e
    JOIN rules AS r ON r.event_type = e.event_type
),
starts AS (
    SELECT
        i.instinct_id,
        CAST(coalesce(s.freq_score, {{ p.initial.frequency | lit }}) AS {{ dec }}) AS freq_score,
        CAST(coalesce(s.eff_score, {{ p.initial.effectiveness | lit }}) AS {{ dec }}) AS eff_score,
        CAST(coalesce(s.human_score, {{ p.initial.human | lit }}) AS {{ dec }}) AS human_score
    FROM (SELECT DISTINCT instinct_id FROM steps) AS i
    LEFT JOIN {{ inputs.start | ident }} AS s ON s.instinct_id = i.instinct_id
),
replayed AS (
    SELECT instinct_id, CAST(0 AS BIGINT) AS step, freq_score, eff_score, human_score
    FROM starts
    UNION ALL
    SELECT
        s.instinct_id,
        s.step,
        CAST(greatest(0, least(1, r.freq_score + s.d_freq)) AS {{ dec }}),
        CAST(greatest(0, least(1, r.eff_score + s.d_eff)) AS {{ dec }}),
        CAST(greatest(0, least(1, r.human_score + s.d_human)) AS {{ dec }})
    FROM replayed AS r
    JOIN steps AS s ON s.instinct_id = r.instinct_id AND s.step = r.step + 1
),
after_events AS (
    SELECT s.instinct_id, s.event_id, s.event_type, s.occurred_at, s.step,
           r.freq_score, r.eff_score, r.human_score
    FROM steps AS s
    JOIN replayed AS r ON r.instinct_id = s.instinct_id AND r.step = s.step
)
SELECT * FROM {{ final | ident }}
{% if final == 'after_events' %}
ORDER BY instinct_id, step
{% endif %}
