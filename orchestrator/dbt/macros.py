"""The package's dbt macros: the macro pack's scalar macros, and the two that place a model's rows
in a partition.

A scalar macro's body is the DuckDB macro's (pack/scalar.py: the building block of macros/*.sql
rendered with the macro's parameters, a NaN argument read as NULL), each parameter replaced by
the Jinja of the dbt macro's argument: `{{ duckscore.duckscore_clamp('score', '0.2') }}` is the
SQL `ds_clamp(score, 0.2)` runs. Arguments are SQL expressions, as strings (or numbers); an
optional one defaults to the DuckDB macro's default (the policy's value).
"""

from __future__ import annotations

import re

from ..core.errors import TemplateError
from ..core.render import ident, lit
from ..pack.scalar import ScalarMacro
from .models import JINJA_MARKERS, Versions

PREFIX = "duckscore_"

# A model's batch: the relation's rows, or on an incremental run those of the partitions from
# the newest one built on (that one again: it may have grown since). Its rows: the template's,
# with the partition of their query added; a query in more than one partition stops the build,
# as `duckscore run --partition-by` refuses it, and so does a row without a partition.
PARTITION_MACROS = """\
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
"""


def parameter_pattern(name: str) -> re.Pattern[str]:
    """The parameter `name` as the body writes it: a whole identifier, not a function's name,
    a qualified name's part or inside a quoted name or string."""
    return re.compile(rf"(?<![\w.\"']){re.escape(ident(name))}(?![\w\"'(])")


def dbt_body(macro: ScalarMacro) -> str:
    """The DuckDB macro's body with each parameter as the dbt macro's argument."""
    body = macro.body()
    if any(marker in body for marker in JINJA_MARKERS):
        raise TemplateError(f"macro {macro.name}: its SQL holds a Jinja marker")
    for name in [*macro.required, *(name for name, _ in macro.optional)]:
        body = parameter_pattern(name).sub(f"{{{{ {name} }}}}", body)
    return body


def dbt_macro(macro: ScalarMacro) -> str:
    """`{% macro duckscore_<name>(required…, optional='<default SQL>'…) %}body{% endmacro %}`."""
    defaults = [f"{name}={lit(value)!r}" for name, value in macro.optional]
    parameters = ", ".join([*macro.required, *defaults])
    return (
        f"{{#- {PREFIX}{macro.name}: {macro.doc} -#}}\n"
        f"{{% macro {PREFIX}{macro.name}({parameters}) -%}}\n"
        f"{dbt_body(macro)}\n"
        "{%- endmacro %}\n"
    )


def scalar_macros_file(versions: Versions, macros: list[ScalarMacro], instincts: str) -> str:
    """macros/duckscore_scalar.sql: every scalar macro of the pack as a dbt macro."""
    names = ", ".join(PREFIX + m.name for m in macros)
    header = (
        "{#- duckscore's building blocks as dbt macros (" + names + "), generated from "
        "macros/*.sql with the defaults of score policy "
        + versions.score.version
        + ", recipe "
        + versions.recipe.version
        + " and instinct policy "
        + instincts
        + ". Arguments are SQL "
        "expressions (strings) or numbers; a NaN argument counts as NULL. Do not edit: generate "
        "the package again. -#}\n"
    )
    return header + "\n".join(dbt_macro(m) for m in macros)
