{#- duckscore_batch(relation): the rows of `relation` this build reads: all of them, or on an
    incremental run (var duckscore_partition_by set) those of the newest partition built and
    after. -#}
{% macro duckscore_batch(relation) -%}
{%- set partition = var('duckscore_partition_by', none) -%}
SELECT * FROM {{ relation }}
{%- if partition and is_incremental() %}
    WHERE {{ adapter.quote(partition) }} >= coalesce(
        (SELECT max({{ adapter.quote(partition) }}) FROM {{ this }}), {{ adapter.quote(partition) }})
{%- endif %}
{%- endmacro %}

{#- duckscore_rows(rows, batch): the CTE `rows`, with the partition column of `batch` by
    query_id when var duckscore_partition_by is set. -#}
{% macro duckscore_rows(rows, batch) -%}
{%- set partition = var('duckscore_partition_by', none) -%}
{%- if partition -%}
{%- set quoted = adapter.quote(partition) -%}
SELECT r.*, k.{{ quoted }}
FROM {{ rows }} AS r
JOIN (
    SELECT
        CAST(query_id AS VARCHAR) AS query_id,
        CASE
            WHEN count(DISTINCT {{ quoted }}) = 1 AND count({{ quoted }}) = count(*)
                THEN min({{ quoted }})
            ELSE error(concat('duckscore: query_id ''', CAST(query_id AS VARCHAR),
                ''' is not in exactly one partition of ', '{{ partition | replace("'", "''") }}'))
        END AS {{ quoted }}
    FROM {{ batch }}
    GROUP BY CAST(query_id AS VARCHAR)
) AS k USING (query_id)
{%- else -%}
SELECT * FROM {{ rows }}
{%- endif -%}
{%- endmacro %}
