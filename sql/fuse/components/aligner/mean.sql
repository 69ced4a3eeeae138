{#-
kind: aligner
name: mean
description: "the mean of a source's hits on the target"
-#}
{% from 'fuse/_aligners.sql' import descending %}
{% macro mean(params, value) -%}
list_sum({{ descending(value) }}) / NULLIF(count(*), 0)
{%- endmacro %}
