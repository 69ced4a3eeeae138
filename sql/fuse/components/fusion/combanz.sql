{#-
kind: fusion
name: combanz
description: "(sum of s) / n_d"
default_missing: skip
-#}
{% macro combanz(params, source_sum) -%}
{{ source_sum('contribution') }} / NULLIF(count(*) FILTER (WHERE present), 0)
{%- endmacro %}
