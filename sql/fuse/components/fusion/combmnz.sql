{#-
kind: fusion
name: combmnz
description: "(sum of s) n_d"
default_missing: skip
-#}
{% macro combmnz(params, source_sum) -%}
{{ source_sum('contribution') }} * count(*) FILTER (WHERE present)
{%- endmacro %}
