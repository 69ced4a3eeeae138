{#-
The store's `composite` column (seed 004: freq_score * 0.35 + eff_score * 0.40 + human_score *
0.25 as DECIMAL(4,3)), in exact decimal arithmetic on both backends: the weights as
DECIMAL(18, 9), the sum rounded half away from zero to DECIMAL(4, 3), as DuckDB and PostgreSQL
both round. Floating-point sums round a tie such as 0.6035 differently on the two (0.603 in
DuckDB, 0.604 in PostgreSQL). `double` names the double type for `lit`'s casts.
-#}
{% macro _weight(x, double) -%}
CAST({{ x | lit | replace(' AS DOUBLE)', ' AS ' ~ double ~ ')') }} AS DECIMAL(18, 9))
{%- endmacro %}
{% macro stored_composite(w, double='DOUBLE') -%}
CAST(freq_score * {{ _weight(w.frequency, double) }}
     + eff_score * {{ _weight(w.effectiveness, double) }}
     + human_score * {{ _weight(w.human, double) }} AS DECIMAL(4, 3))
{%- endmacro %}
