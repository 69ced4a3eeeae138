"""Retrieval logs in the shape RAG systems already write: OpenInference trace spans (Arize
Phoenix's span export; sql/fuse/openinference.sql) and OTLP JSON exports of spans following the
OpenTelemetry GenAI conventions (sql/fuse/otel_genai.sql), normalised to the retrieval_log table
in SQL.
The format names are LOG_FORMATS, in the package's __init__.

`--log-format openinference|otel-genai` gives `open_log` a TraceLog; OpenInference spans are
checked as a table of their own (ids present, one row per span id); the hits of either format are
then checked by the retrieval_log contract like any other log. `write_spans` adds spans.parquet
(sql/fuse/spans.sql: the ids of every retrieval span and of its trace's root) to the outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from ..core.connection import first_line
from ..core.errors import InputError, QueryError
from ..core.inputs import Derived, FileSet, Table, fingerprint, resolve_files
from ..core.render import ident, lit, render
from ..core.session import Destination, Session
from ..core.tables import Column, InputFile, TableContract
from ..core.validate import ROW_COLUMN
from . import LOG_FORMATS

DOCUMENTS = "attributes.retrieval.documents"
PARENT = "parent_id"  # Phoenix's column for the parent span's id (null for a root span)
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

    given: str | FileSet
    format: str

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS[1:]:
            raise InputError(f"--log-format {self.format!r}: one of {', '.join(LOG_FORMATS[1:])}")


def as_log(session: Session, log: Table, label: str = "--log") -> Table:
    """`log` itself, or, for a TraceLog, its hits as a table derived from the spans."""
    if not isinstance(log, TraceLog):
        return log
    if log.format == "otel-genai":
        return _otel_genai(session, log, label)
    return _openinference(session, log, label)


def _otel_genai(session: Session, log: TraceLog, label: str) -> Derived:
    """OTLP JSON exports (one export request per line, or one per file) of GenAI retrieval spans."""
    paths, _ = resolve_files(log.given, label)
    try:
        session.execute(
            f"CREATE OR REPLACE TEMP VIEW otlp_lines AS SELECT json, row_number() OVER () AS "
            f"{ROW_COLUMN} FROM read_json_objects({lit(paths)}, format = 'auto')"
        )
        session.first_row("SELECT count(*) FROM otlp_lines")
    except (QueryError, duckdb.Error) as exc:
        raise InputError(f"{label} ({log.given}): not OTLP JSON ({first_line(exc)})") from None
    files = tuple(fingerprint(path) for path in paths)
    return _hits(session, log, files, "fuse/otel_genai.sql", inputs={"lines": "otlp_lines"})


def _openinference(session: Session, log: TraceLog, label: str) -> Derived:
    """Phoenix's span export: one row per span, attributes flattened into columns."""
    spans = session.open("spans", SPANS, log.given, f"{label} spans")
    fields = _document_fields(session, spans.given, label)
    columns = {name.lower() for name in session.schema("__raw_spans")}
    return _hits(
        session,
        log,
        spans.files,
        "fuse/openinference.sql",
        inputs={"spans": "__raw_spans"},
        metadata_is_text=fields.get("document.metadata", "VARCHAR") == "VARCHAR",
        has_score="document.score" in fields,
        has_content="document.content" in fields,
        has_parent=PARENT in columns,
    )


def _hits(
    session: Session,
    log: TraceLog,
    files: tuple[InputFile, ...],
    template: str,
    **context: Any,
) -> Derived:
    """The spans' hits as the view `trace_hits`, and every span as `trace_spans` (checked, and
    recorded with the run's SQL: the template as it made the hits), shown and fingerprinted as
    the span files."""
    for name, final in (("trace_spans", "spans"), ("trace_hits", "hits")):
        rendered = render(template, final=final, row_column=ROW_COLUMN, **context)
        session.create(name, rendered, view=True)
    return Derived(session.con.table("trace_hits"), str(log.given), files, log.format)


def write_spans(session: Session, log: Table, out: Destination) -> None:
    """spans.parquet, for a log given as trace spans (nothing otherwise): one row per retrieval
    span, with its trace's root span (sql/fuse/spans.sql)."""
    if not isinstance(log, TraceLog):
        return
    rendered = render("fuse/spans.sql", inputs={"spans": "trace_spans"})
    session.check(rendered)
    out.copy("spans.parquet", rendered.text, rendered)


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
