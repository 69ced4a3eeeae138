{#-
What the built-in aligners (sql/fuse/components/aligner/) share: a group's values as a list
sorted descending (a fixed order, so the float sum is the same on every run and thread count),
its first top_n when given.
-#}
{% macro descending(value, top_n=none) -%}
{% set sorted = 'list_reverse_sort(list(' ~ value ~ '), ' ~ ('NULLS LAST' | lit) ~ ')' %}
{{ sorted ~ '[1:' ~ (top_n | int | lit) ~ ']' if top_n else sorted }}
{%- endmacro %}
