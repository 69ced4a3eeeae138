"""Seed 002 §3.2's "the tender's own fields": the optional tender_fields table, one row per
(tenant, project, field, value), which a policy's constraints.tender_fields turns into
constraints (bid_v4, docs/bids.md#what-bid_v4-adds)."""

from __future__ import annotations

from ..core.errors import PolicyError
from ..core.session import Session
from ..core.tables import Column, OpenedInput, TableContract
from ..core.validate import check_rows, typed_column

TENDER_FIELDS = TableContract(
    name="tender_fields",
    columns=(
        Column("tenant_id", "id"),
        Column("project_id", "id"),
        Column("field", "text"),
        Column("value", "text"),
        # comma-separated criteria ids the constraint applies to; NULL: every criterion
        Column("criteria_scope", "text", required=False, nullable=True),
    ),
    key=("tenant_id", "project_id", "field", "value"),
    allow_empty=True,
)


def check_tender_fields(session: Session, fields: OpenedInput) -> None:
    """A row names a project of the criteria table and, in criteria_scope, its criteria; a
    value is not only spaces (an empty constraint would match, or exclude, every chunk)."""

    def col(name: str) -> str:
        return typed_column(fields, name)

    check_rows(
        session.con,
        fields,
        f"trim(regexp_replace(replace({col('value')}, '\u3000', ' '), '\\s+', ' ', 'g')) = ''",
        "value {value} is only spaces",
        shown=col("value"),
    )
    check_rows(
        session.con,
        fields,
        (
            f"NOT EXISTS (SELECT 1 FROM criteria AS k WHERE k.tenant_id = {col('tenant_id')} "
            f"AND k.project_id = {col('project_id')})"
        ),
        "(tenant_id, project_id) is no project of the criteria table",
    )
    check_rows(
        session.con,
        fields,
        (
            f"EXISTS (SELECT 1 FROM (SELECT trim(unnest(string_split({col('criteria_scope')}, ','))) "
            "AS item) AS s WHERE NOT EXISTS (SELECT 1 FROM criteria AS k "
            f"WHERE k.tenant_id = {col('tenant_id')} AND k.project_id = {col('project_id')} "
            "AND k.criteria_id = s.item))"
        ),
        "criteria_scope {value} names a criterion its project does not have",
        shown=col("criteria_scope"),
    )


def refuse_unread_fields(fields: OpenedInput | None, version: str, read: bool) -> None:
    """A tender_fields table under a policy that turns no field into a constraint would change
    nothing without a word: refused, as anchors are under a policy that does not calibrate."""
    if fields is not None and not read:
        raise PolicyError(
            f"{fields.label} ({fields.given}): policy {version} reads no tender field "
            "(no constraints.tender_fields; bid_v4 reads them)"
        )
