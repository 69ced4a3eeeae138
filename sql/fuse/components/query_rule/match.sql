{#-
kind: query_rule
name: match
description: "an RE2 pattern the query text matches: a rule's `match` (no `rule:`)"
recipe_keys: [query_analyzer.rules]
-#}
{#- params: {match: the rule's pattern} -#}
{% macro match(params, query_text) -%}
regexp_matches({{ query_text }}, {{ params.match | lit }})
{%- endmacro %}
