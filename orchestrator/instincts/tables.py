"""The tables the instinct functions read: counts and events (with their scores to start from)
for the pure functions, and new instincts and events for `duckscore instincts ingest`."""

from ..core.tables import Column, TableContract
from .policy import TRIGGERS

# the seed's VARCHAR(50) of instincts.domain and .source (sql/instincts/schema.sql): PostgreSQL
# enforces it, DuckDB would not, so both stores refuse a longer one in the input, by its row
VARCHAR_LENGTH = 50

COUNTS = TableContract(
    name="instinct_counts",
    columns=(
        Column("instinct_id", "id"),
        Column("observation_count", "count", min=0),
        Column("contradiction_count", "count", min=0),
        Column("positive_count", "count", min=0),
        Column("application_count", "count", min=0),
        Column("approvals", "count", min=0),
        Column("rejections", "count", min=0),
        Column("reflect_approved", "number", min=0, max=1),
    ),
    key=("instinct_id",),
    allow_empty=True,
)

EVENTS = TableContract(
    name="instinct_events",
    columns=(
        Column("event_id", "id"),
        Column("instinct_id", "id"),
        Column("event_type", "text", choices=TRIGGERS),
        Column("occurred_at", "time"),
        Column("session_id", "id", required=False, nullable=True),
        Column(
            "outcome",
            "text",
            required=False,
            nullable=True,
            choices=("positive", "negative", "neutral"),
        ),
        Column("description", "text", required=False, nullable=True),
        Column("signals", "text", required=False, nullable=True),
    ),
    key=("event_id",),
    allow_empty=True,
)

START = TableContract(
    name="instinct_start",
    columns=(
        Column("instinct_id", "id"),
        Column("freq_score", "number", min=0, max=1),
        Column("eff_score", "number", min=0, max=1),
        Column("human_score", "number", min=0, max=1),
    ),
    key=("instinct_id",),
    allow_empty=True,
)

NEW_INSTINCTS = TableContract(
    name="new_instincts",
    columns=(
        Column("id", "id"),
        Column("trigger_text", "text"),
        Column("action_text", "text"),
        Column("domain", "text", max_length=VARCHAR_LENGTH),
        Column("user_id", "id"),
        Column("project_id", "id", required=False, nullable=True),
        Column("source", "text", required=False, nullable=True, max_length=VARCHAR_LENGTH),
    ),
    key=("id",),
)
