{#-
rank_desc(score, partition_by, tie_breaker) — 1-based position by `score` descending within
each partition; equal scores are ordered by `tie_breaker` ascending, so the ranking never
depends on input row order or thread count. NULL scores rank last.

Args:
  score         (required, SQL expression)
  partition_by  (required, list of column names)
  tie_breaker   (required, column name, e.g. 'parent_id')
Usage:
  {{ rank_desc('overall_score', ['query_id'], 'parent_id') }}
-#}
{% macro rank_desc(score, partition_by, tie_breaker) -%}
row_number() OVER (PARTITION BY {{ partition_by | map('ident') | join(', ') }} ORDER BY {{ score }} DESC NULLS LAST, {{ tie_breaker | ident }} ASC NULLS LAST)
{%- endmacro %}
