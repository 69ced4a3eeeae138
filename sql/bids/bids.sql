{#-
Seed 002: bid evaluation with tenant-safe retrieval. `final` names the stage (CTE) to select —
typed_queries, filter_log, candidates, degradation_events, evidence, rule_results,
criteria_results, run_totals, claim_results, evaluation_results … — so each stage runs on its own.
-#}
{% from 'bids/_bid_stages.sql' import bid_stages with context %}
WITH
{{ bid_stages() }}
SELECT * FROM {{ final | ident }}
{% if order_by %}
ORDER BY {% for key in order_by %}{{ key | ident }} ASC NULLS LAST{{ ', ' if not loop.last }}{% endfor %}
{% endif %}
