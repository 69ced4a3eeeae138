{#-
rrf(rank, k=60, weight=1.0) — one source's reciprocal-rank-fusion contribution,
weight / (k + rank), with `rank` 1-based (Cormack et al. 2009; docs/design.md). Sum it over sources;
a source that did not return the item contributes nothing (0).

Args:
  rank    (required, SQL expression, 1-based)
  k       (optional, number >= 0, default 60)
  weight  (optional, number, default 1.0)
Usage:
  sum({{ rrf('rank') }}) ... GROUP BY query_id, item_id
-#}
{% macro rrf(rank, k=60, weight=1.0) -%}
{{ weight | float | lit }} / ({{ k | float | lit }} + ({{ rank }}))
{%- endmacro %}
