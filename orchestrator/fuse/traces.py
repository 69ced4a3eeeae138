"""Retrieval logs in the shape RAG systems already write: OpenInference trace spans (Arize
Phoenix's span export), normalised to the retrieval_log table in SQL (sql/fuse/openinference.sql).
The format names are LOG_FORMATS, in the package's __init__.

`--log-format openinference` gives `open_log` a TraceLog; the spans are checked as a table of
their own (ids present, one row per span id), then unnested into hits that the retrieval_log
contract checks like any other log.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import InputError
from ..core.inputs import Derived, Table
from ..core.render import ident, render
from ..core.session import Session
from ..core.tables import Column, TableContract
from ..core.validate import ROW_COLUMN
from . import LOG_FORMATS

DOCUMENTS = "attributes.retrieval.documents"
SPANS = TableContract(
    name="spans",
    columns=(
        Column("context.trace_id", "id"),
        Column("context.span_id", "id"),
        Column("name", "text"),
        Column("attributes.openinference.span.kind", "text", nullable=True),
        Column("attributes.input.value", "text", required=False, nullable=True),
    ),
    key=("context.span_id",),
)


@dataclass(frozen=True)
class TraceLog:
    """A retrieval log given as trace spans: `given` a path, glob or folder, `format` one of
    LOG_FORMATS but retrieval_log."""

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS[1:]:
            raise InputError(f"--log-format {self.format!r}: one of {', '.join(LOG_FORMATS)}")

    given: str
    format: str


def as_log(session: Session, log: Table, label: str = "--log") -> Table:
    """`log` itself, or, for a TraceLog, its hits as a table derived from the checked spans."""
    if not isinstance(log, TraceLog):
        return log
    spans = session.open("spans", SPANS, log.given, f"{label} spans")
    fields = _document_fields(session, spans.given, label)
    derived = render(
        "fuse/openinference.sql",
        inputs={"spans": "__raw_spans"},
        row_column=ROW_COLUMN,
        metadata_is_text=fields.get("document.metadata", "VARCHAR") == "VARCHAR",
        has_score="document.score" in fields,
        has_content="document.content" in fields,
    )
    session.check(derived)
    return Derived(session.con.sql(derived.text), spans.given, spans.files, log.format)


def _document_fields(session: Session, given: str, label: str) -> dict[str, str]:
    """The fields of a retrieved document (`document.id`, `document.score` …) and their types."""
    names = [name for name in session.schema("__raw_spans") if name.lower() == DOCUMENTS]
    if not names:
        raise InputError(f"{label} ({given}): no column {DOCUMENTS!r}: not OpenInference spans")
    documents = session.con.sql(f"SELECT {ident(names[0])} FROM __raw_spans LIMIT 0").types[0]
    if documents.id != "list" or documents.child.id != "struct":
        raise InputError(
            f"{label} ({given}): column {DOCUMENTS!r} has type {documents}; expected a list of "
            "documents (document.id, document.score …)"
        )
    fields = {name: str(dtype) for name, dtype in documents.child.children}
    if "document.id" not in fields:
        raise InputError(f"{label} ({given}): the documents of {DOCUMENTS!r} have no document.id")
    return fields
