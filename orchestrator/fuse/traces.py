"""Retrieval logs in the shape RAG systems already write: OpenInference trace spans (Arize
Phoenix's span export; sql/fuse/openinference.sql) and OTLP JSON exports of spans following the
OpenTelemetry GenAI conventions (sql/fuse/otel_genai.sql), normalised to the retrieval_log table
in SQL.
The format names are LOG_FORMATS, in the package's __init__.

`--log-format openinference|otel-genai` gives `open_log` a TraceLog; OpenInference spans are
checked as a table of their own (ids present, one row per span id); the SQL reads only the
attributes an export has, a document that cannot be read is refused in one line naming its file,
span and attribute, and the hits of either format are then checked by the retrieval_log contract
like any other log. A retriever that ran more than once in a trace gives one list (each document
at its best position: docs/traces.md). `write_spans` adds spans.parquet (sql/fuse/spans.sql: the
ids of every retrieval span and of its trace's root) to the outputs; `trace_queries` gives the
traces as a table of queries, those whose retrievals returned nothing among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import duckdb
from duckdb.sqltypes import DuckDBPyType

from ..core.connection import first_line
from ..core.errors import InputError, QueryError
from ..core.inputs import (
    Derived,
    FileSet,
    Table,
    create_numbered_view,
    fingerprint,
    resolve_files,
)
from ..core.render import RenderedSQL, ident, lit, render
from ..core.session import Destination, Session
from ..core.tables import Column, InputFile, TableContract
from ..core.validate import FILE_COLUMN, MAX_COUNT, MAX_COUNT_SHOWN, ROW_COLUMN, raw_view
from . import LOG_FORMATS
from .contract import RETRIEVAL_LOG

DOCUMENTS = "attributes.retrieval.documents"
QUERY = "attributes.input.value"
PARENT = "parent_id"  # Phoenix's column for the parent span's id (null for a root span)
DOCUMENT_ATTRIBUTES = ("document.id", "document.score", "document.content", "document.metadata")
NUMBERS = {"tinyint", "smallint", "integer", "bigint", "hugeint", "utinyint", "usmallint",
           "uinteger", "ubigint", "uhugeint", "float", "double", "decimal"}  # fmt: skip
# the kinds of value (_kind) an attribute's type may give, and what to say when it gives another
# (document.content may be anything: it is shown as text)
_ACCEPTED: dict[str, tuple[set[str], str]] = {
    "document.id": ({"number", "text", "json", "null", "other"}, "text or a number"),
    "document.score": ({"number", "text", "json", "null"}, "a number"),
    "document.metadata": ({"text", "json", "object", "null"}, "a JSON string or an object"),
}
# documents that are JSON: every attribute read by its key, absent or not
_ALL_JSON = {a: {"name": a, "kind": "json"} for a in DOCUMENT_ATTRIBUTES}
_SCORE = {"fuse/openinference.sql": "document.score", "fuse/otel_genai.sql": "score"}
SPANS = TableContract(
    name="spans",
    columns=(
        Column("context.trace_id", "id"),
        Column("context.span_id", "id"),
        Column("name", "text", nullable=True),  # a RETRIEVER span's: the reader's faults
        Column("attributes.openinference.span.kind", "text", nullable=True),
        Column(QUERY, "text", required=False, nullable=True),
    ),
    key=("context.span_id",),
)
RAW_SPANS = raw_view(SPANS)
# the log's rules that the trace readers apply to a document (both to its score, openinference.sql
# also to its metadata), so that a fault names the span (the log check would name a row of the
# derived hits)
LOG_RULES = {
    "granularities": RETRIEVAL_LOG.column("granularity").choices,
    "chunks_min": RETRIEVAL_LOG.column("total_chunks").min,
    "chunks_max": MAX_COUNT,
    "chunks_max_shown": MAX_COUNT_SHOWN,
    "score_max": RETRIEVAL_LOG.column("score").max,
}


@dataclass(frozen=True)
class TraceLog:
    """A retrieval log given as trace spans: `given` a path, glob or folder, `format` one of
    LOG_FORMATS but retrieval_log."""

    given: str | FileSet
    format: str

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS[1:]:
            raise InputError(f"--log-format {self.format!r}: one of {', '.join(LOG_FORMATS[1:])}")


def as_log(session: Session, log: Table, label: str = "--log", allow_empty: bool = False) -> Table:
    """`log` itself, or, for a TraceLog, its hits as a table derived from the spans. Spans none
    of whose retrievals returned a document are refused in one line, unless `allow_empty` (and
    one retrieval span ran at least)."""
    if not isinstance(log, TraceLog):
        return log
    read = _otel_genai if log.format == "otel-genai" else _openinference
    return read(session, log, label, allow_empty)


def _otel_genai(session: Session, log: TraceLog, label: str, allow_empty: bool) -> Derived:
    """OTLP JSON exports (one export request per line, or one per file) of GenAI retrieval spans."""
    paths, _ = resolve_files(log.given, label)
    try:
        create_numbered_view(
            session.con,
            "otlp_lines",
            f"read_json_objects({lit(paths)}, format = 'auto', filename = {lit(FILE_COLUMN)})",
        )
        session.first_row("SELECT count(*) FROM otlp_lines")
    except (QueryError, duckdb.Error) as exc:
        raise InputError(f"{label} ({log.given}): not OTLP JSON ({first_line(exc)})") from None
    files = tuple(fingerprint(path) for path in paths)
    return _hits(
        session,
        log,
        files,
        "fuse/otel_genai.sql",
        label,
        allow_empty,
        inputs={"lines": "otlp_lines"},
        file_column=FILE_COLUMN,
        log_rules=LOG_RULES,
    )


def _openinference(session: Session, log: TraceLog, label: str, allow_empty: bool) -> Derived:
    """Phoenix's span export: one row per span, attributes flattened into columns. The SQL reads
    only the columns and document attributes the export has (every one but the ids, the name
    and the span kind is optional)."""
    spans = session.open("spans", SPANS, log.given, f"{label} spans")
    columns = {name.lower(): name for name in session.schema(RAW_SPANS)}
    return _hits(
        session,
        log,
        spans.files,
        "fuse/openinference.sql",
        label,
        allow_empty,
        inputs={"spans": RAW_SPANS},
        file_column=FILE_COLUMN,
        documents=_documents(session, columns.get(DOCUMENTS), spans.given, label),
        query_column=columns.get(QUERY),
        parent_column=columns.get(PARENT),
        log_rules=LOG_RULES,
    )


def _hits(
    session: Session,
    log: TraceLog,
    files: tuple[InputFile, ...],
    template: str,
    label: str,
    allow_empty: bool,
    **context: Any,
) -> Derived:
    """The spans' hits as the view `trace_hits`, and every span as `trace_spans` (checked, and
    recorded with the run's SQL: the template as it made the hits), shown and fingerprinted as
    the span files. A document that cannot be read is refused first, in one line naming its
    file, span and attribute; documents without a score beside scored ones are a warning."""
    where = f"{label} ({log.given})"
    fault = _one_row(
        session, where, render(template, final="faults", row_column=ROW_COLUMN, **context)
    )
    if fault is not None:
        file, place, span_id, attribute, problem, value = fault
        shown = "" if value is None else f": {_clipped(value)!r}"
        raise InputError(
            f"{label} ({file}, {place}, span_id={span_id!r}): {attribute} {problem}{shown}"
        )
    summary = _one_row(
        session, where, render(template, final="summary", row_column=ROW_COLUMN, **context)
    )
    assert summary is not None
    hits, unscored, unscored_lists, retrievals, traces, ensembles = summary
    if not hits and not (allow_empty and retrievals):
        raise InputError(
            f"{where}: no retrieval span returned a document "
            f"({_count(retrievals, 'retrieval span')} in {_count(traces, 'trace')}): "
            "nothing to fuse"
        )
    if unscored:
        one = unscored == 1
        session.progress.warn(
            f"{where}: {_count(unscored, 'document')} in "
            f"{_count(unscored_lists, 'list')} {'has' if one else 'have'} no {_SCORE[template]} "
            f"beside documents with one: {'it is' if one else 'each is'} given the score -rank "
            "(as in a rank-only log), below every document of its list scored above that, all "
            "of them when scores are >= 0 (docs/traces.md#documents-without-a-score)"
        )
    if ensembles:
        it, is_, its = ("it", "is", "its") if ensembles == 1 else ("them", "are", "their")
        session.progress.warn(
            f"{where}: {_count(ensembles, 'retrieval span')} with retrieval spans below {it} "
            f"(nested retrievers) {is_} left out: {its} documents are {its} children's, "
            "already fused, and the children are fused instead (docs/traces.md#nested-retrievers)"
        )
    # the hits are read several times (the log's checks, fusion, the parent features): a table
    # reads the spans once, half the time of a trace run; under --memory-limit they stay a
    # view, since DuckDB does not evict a temp table
    kept = session.settings.memory_limit is None
    for name, final in (("trace_spans", "spans"), ("trace_hits", "hits")):
        rendered = render(template, final=final, row_column=ROW_COLUMN, **context)
        session.create(name, rendered, view=not (kept and name == "trace_hits"))
    return Derived(session.con.table("trace_hits"), str(log.given), files, log.format)


def _one_row(session: Session, where: str, rendered: RenderedSQL) -> tuple[Any, ...] | None:
    """The first row of a checked query over the spans (not recorded with the run's SQL)."""
    session.check(rendered)
    try:
        return session.first_row(rendered.text)
    except duckdb.Error as exc:  # a value no check foresaw: still one line naming the input
        raise InputError(f"{where}: cannot read the spans: {first_line(exc)}") from None


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _clipped(value: str, length: int = 80) -> str:
    return value if len(value) <= length else value[: length - 1] + "…"


def trace_queries(session: Session, log: Table) -> Derived | None:
    """For a log of trace spans (after `as_log`), the id of every trace with a retrieval span,
    as the query_id of a table of queries: the traces whose retrievers returned nothing are
    among them, and get the decisions of a query without candidates. None for another log."""
    if not isinstance(log, TraceLog):
        return None
    relation = session.con.sql(
        "SELECT DISTINCT trace_id AS query_id FROM trace_spans WHERE is_retrieval ORDER BY query_id"
    )
    opened = session.inputs.get("spans") or session.inputs.get("log")
    files = opened.files if opened is not None else ()
    return Derived(relation, str(log.given), files, log.format)


def write_spans(session: Session, log: Table, out: Destination) -> None:
    """spans.parquet, for a log given as trace spans (nothing otherwise): one row per retrieval
    span, with its trace's root span (sql/fuse/spans.sql)."""
    if not isinstance(log, TraceLog):
        return
    rendered = render("fuse/spans.sql", inputs={"spans": "trace_spans"})
    session.check(rendered)
    out.copy("spans.parquet", rendered.text, rendered)


def _documents(
    session: Session, column: str | None, given: str, label: str
) -> dict[str, Any] | None:
    """What sql/fuse/openinference.sql needs to know of the documents column: None when there is
    none (no span returned a document), else its name, whether it is a list or JSON text of one,
    what a document is (struct, map, json or null) and the attributes a document has, each with
    its name there and the kind of its values. A type no document could have is refused here."""
    if column is None:
        return None
    dtype = session.con.sql(f"SELECT {ident(column)} FROM {RAW_SPANS} LIMIT 0").types[0]
    kind = _kind(dtype)
    if kind in ("text", "json"):
        return {"column": column, "container": "json", "element": "json", "fields": _ALL_JSON}
    element = _child(dtype) if kind == "list" else None
    element_kind = "null" if element is None else _kind(element)
    if kind != "list" or element_kind not in ("object", "json", "text", "null"):
        raise InputError(
            f"{label} ({given}): column {column!r} has type {dtype}; expected a list of "
            "documents (document.id, document.score …)"
        )
    if element_kind in ("json", "text"):
        return {"column": column, "container": "list", "element": "json", "fields": _ALL_JSON}
    if element_kind == "null":
        return {"column": column, "container": "list", "element": "null", "fields": {}}
    assert element is not None
    if element.id == "map":
        value = element.value
        fields = {a: {"name": a, "kind": _kind(value)} for a in DOCUMENT_ATTRIBUTES}
        shape = "map"
    else:
        given_names = {name.lower(): (name, cast(DuckDBPyType, t)) for name, t in element.children}
        fields = {
            a: {"name": given_names[a][0], "kind": _kind(given_names[a][1])}
            for a in DOCUMENT_ATTRIBUTES
            if a in given_names
        }
        shape = "struct"
    for attribute, field in fields.items():
        kinds, expected = _ACCEPTED.get(attribute, (None, ""))
        if kinds is not None and field["kind"] not in kinds:
            raise InputError(
                f"{label} ({given}): column {column!r}: its documents' {attribute} has type "
                f"{_type_of(element, field['name'])}; expected {expected}"
            )
    return {"column": column, "container": "list", "element": shape, "fields": fields}


def _kind(dtype: DuckDBPyType) -> str:
    """What a value of type `dtype` is to the SQL: number, text, json, object, list, null
    (a type of no values: a column pandas wrote with every value null) or other."""
    text = str(dtype)
    if text == "JSON":
        return "json"
    if dtype.id == "varchar":
        return "text"
    if dtype.id in ("struct", "map"):
        return "object"
    if dtype.id in ("list", "array"):
        return "list"
    if text in ('"NULL"', "NULL"):
        return "null"
    return "number" if dtype.id in NUMBERS else "other"


def _child(dtype: DuckDBPyType) -> DuckDBPyType | None:
    """A list's element type; None for a list of the NULL type (lists that are all empty)."""
    try:
        return dtype.child
    except (AttributeError, duckdb.Error):
        return None


def _type_of(element: DuckDBPyType, name: str) -> str:
    if element.id == "map":
        return str(element.value)
    return next(str(t) for n, t in element.children if n == name)
