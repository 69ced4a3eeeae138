"""Retrieval logs in the shape RAG systems already write: OpenInference trace spans (Arize
Phoenix's span export; sql/fuse/openinference.sql) and OTLP JSON exports of spans following the
OpenTelemetry GenAI conventions (sql/fuse/otel_genai.sql), normalised to the retrieval_log table
in SQL.
The format names are LOG_FORMATS, in the package's __init__.

`--log-format openinference|otel-genai` gives `open_log` a TraceLog; OpenInference spans are
checked as a table of their own (ids present, one row per span id), or read from OTLP JSON
(detected: export requests, `resourceSpans`); the SQL reads only the attributes an export has, a
document without an id is given one by a rule (or `--doc-id`'s metadata key), a document that
cannot be read is refused in one line naming its file, span and attribute, and the hits of
either format are then checked by the retrieval_log contract like any other log. An export
without a retrieval span is refused saying what it holds, and which format reads it. A retriever
that ran more than once in a trace gives one list (each document at its best position:
docs/traces.md). The view `trace_spans` feeds the stage that adds spans.parquet (fusion/stages.py:
sql/fuse/spans.sql, the ids of every retrieval span and of its trace's root) to the outputs;
`trace_queries` gives the traces as a table of queries, those whose retrievals returned nothing
among them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import duckdb
from duckdb.sqltypes import DuckDBPyType

from ..core.connection import first_line
from ..core.errors import InputError, OptionError, QueryError
from ..core.inputs import Derived, FileSet, Table, create_numbered_view, fingerprint, resolve_files
from ..core.render import RenderedSQL, ident, lit, render
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import Column, InputFile, TableContract
from ..core.validate import FILE_COLUMN, MAX_COUNT, MAX_COUNT_SHOWN, ROW_COLUMN, raw_view
from . import LOG_FORMATS
from .contract import RETRIEVAL_LOG

logger = module_logger(__name__)

DOCUMENTS = "attributes.retrieval.documents"
QUERY = "attributes.input.value"
OPERATION = "gen_ai.operation.name"  # a census's, when no span is a RETRIEVER
START = "start_time"  # Phoenix's column of a span's start
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
# OTLP's OpenInference documents: gathered from flattened attributes into JSON objects
_OTLP_DOCUMENTS = {"column": DOCUMENTS, "container": "list", "element": "json", "fields": _ALL_JSON}
_OTLP_OPERATION = {"column": f"attributes.{OPERATION}", "pointer": None, "kind": "text"}
# what a rule gave an id to a document without one, as the warning says it (sql/fuse/_documents.sql)
_RULES = {"id": "the metadata's id", "doc_id": "the metadata's doc_id",
          "source": "the metadata's source and chunk index", "content": "a hash of the content"}  # fmt: skip
_FORMATS = {"openinference": "a RETRIEVER span", "otel-genai": "a span whose gen_ai.operation.name "
            "is retrieval or vector_db_retrieve, or with db.query.result events"}  # fmt: skip
_OTLP = re.compile(rb'\A(\xef\xbb\xbf)?\s*\{\s*"resourceSpans"')
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
TRACE_SPANS = "trace_spans"  # every span of the export (read by fusion/stages.py: SPANS)
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
    LOG_FORMATS but retrieval_log; `doc_id` and `parent_id`, metadata keys (dotted, or a JSON
    pointer) that name each document's id and parent (docs/traces.md#documents-without-an-id);
    `allow_empty`: the user accepts an export none of whose retrievals returned a document;
    `query_key`: what a trace's query_id is (docs/traces.md#queries-labels-and-judgments)."""

    given: str | FileSet
    format: str
    doc_id: str | None = None
    parent_id: str | None = None
    allow_empty: bool = False
    query_key: str | None = None

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS[1:]:
            raise InputError(f"--log-format {self.format!r}: one of {', '.join(LOG_FORMATS[1:])}")
        for option, key in (("--doc-id", self.doc_id), ("--parent-id", self.parent_id),
                            ("--query-key", self.query_key)):  # fmt: skip
            if key is not None:
                metadata_pointer(key, option)

    def otlp_key(self) -> dict[str, Any] | None:
        """The template's `query_key` for OTLP spans: each split of the key into an attribute
        and a JSON pointer into its value (`input`: the attributes that hold a trace's input)."""
        key = self.query_key
        if key is None or key == "trace":
            return None
        if key == "input" and self.format == "openinference":
            return {"splits": [["input.value", None]], "shown": "input.value"}
        if key == "input":
            splits = [["gen_ai.retrieval.query.text", None], ["gen_ai.task.input", "/inputs"],
                      ["gen_ai.task.input", "/query"]]  # fmt: skip
            return {"splits": splits, "shown": "gen_ai.task.input"}
        parts = key.split(".")
        return {"splits": [[".".join(parts[:i]), _pointer(parts[i:])]
                           for i in range(len(parts), 0, -1)], "shown": key}  # fmt: skip

    def export_key(self, columns: dict[str, str], types: dict[str, str]) -> dict[str, Any] | None:
        """The template's `query_key` for Phoenix's export (`columns`: lower-case name to name,
        `types` its kinds): the column of the longest part of the key that is an attribute,
        and a JSON pointer for the rest."""
        key = self.query_key
        if key is None or key == "trace":
            return None
        parts = ["input", "value"] if key == "input" else key.split(".")
        found = export_attribute(columns, types, parts)
        if found is None:
            raise InputError(f"--query-key {key}: the export has no attribute {'.'.join(parts)}")
        return found | {"shown": ".".join(parts)}

    def ids(self) -> dict[str, str | None]:
        """The template's `ids` (sql/fuse/_documents.sql): the keys as JSON pointers."""
        return {
            "doc": None if self.doc_id is None else metadata_pointer(self.doc_id, "--doc-id"),
            "doc_shown": self.doc_id,
            "parent": None if self.parent_id is None else metadata_pointer(self.parent_id, ""),
        }


def export_attribute(
    columns: dict[str, str], types: dict[str, str], parts: list[str]
) -> dict[str, Any] | None:
    """Where Phoenix's export holds the attribute `parts` (dotted): the column of its longest
    leading parts (Phoenix nests attributes of one prefix into a struct), its kind, and a JSON
    pointer for the rest (sql/fuse/openinference.sql's `key_value`); None when it has none."""
    for i in range(len(parts), 0, -1):
        if (column := columns.get("attributes." + ".".join(parts[:i]).lower())) is not None:
            return {"column": column, "pointer": _pointer(parts[i:]), "kind": types[column]}
    return None


def _pointer(parts: list[str]) -> str | None:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts) or None


def metadata_pointer(key: str, option: str) -> str:
    """A metadata key as a JSON pointer: `a.b` is /a/b (each part escaped: ~ as ~0, / as ~1),
    and a key starting with / is one already; refused when empty or with an empty part. The
    pointer reaches SQL only as a bound literal (`lit`)."""
    if key.startswith("/"):
        return key
    parts = key.split(".")
    if not all(parts):
        raise OptionError(
            f"{option} {key!r}: a metadata key, its parts joined by dots (source.id), "
            "or a JSON pointer (/source/id)"
        )
    return _pointer(parts) or key


def as_log(session: Session, log: Table, label: str = "--log", allow_empty: bool = False) -> Table:
    """`log` itself, or, for a TraceLog, its hits as a table derived from the spans. Spans none
    of whose retrievals returned a document are refused in one line, unless the caller can
    decide them (`allow_empty`: `run`), the user asked for it (the TraceLog's) and one retrieval
    span ran at least."""
    if not isinstance(log, TraceLog):
        return log
    read = _otel_genai if log.format == "otel-genai" else _openinference
    return read(session, log, label, allow_empty)


def _otel_genai(session: Session, log: TraceLog, label: str, allow_empty: bool) -> Derived:
    """OTLP JSON exports (one export request per line, or one per file) of GenAI retrieval spans."""
    paths, _ = resolve_files(log.given, label)
    files = _otlp_lines(session, log, paths, label)
    return _hits(session, log, files, "fuse/otel_genai.sql", label, allow_empty,
                 inputs={"lines": "otlp_lines"}, query_key=log.otlp_key())  # fmt: skip


def _otlp_lines(
    session: Session, log: TraceLog, paths: list[str], label: str
) -> tuple[InputFile, ...]:
    """The export requests of `paths` as the view otlp_lines (one JSON object a row, numbered
    in its file); their fingerprints."""
    try:
        create_numbered_view(
            session.con,
            "otlp_lines",
            f"read_json_objects({lit(paths)}, format = 'auto', filename = {lit(FILE_COLUMN)})",
        )
        session.first_row("SELECT count(*) FROM otlp_lines")
    except (QueryError, duckdb.Error) as exc:
        hint = ""
        if any(path.endswith(".parquet") for path in paths):
            hint = ": a Parquet file, as --log-format openinference reads Phoenix's span export"
        raise InputError(
            f"{label} ({log.given}): not OTLP JSON ({first_line(exc)}){hint}"
        ) from None
    return tuple(fingerprint(path) for path in paths)


def _is_otlp(paths: list[str]) -> bool:
    """Whether the first file holds OTLP JSON (an export request, `resourceSpans` first)."""
    if not paths or Path(paths[0]).suffix.lower() == ".parquet":
        return False
    with open(paths[0], "rb") as head:
        return _OTLP.match(head.read(4096)) is not None


def _openinference(session: Session, log: TraceLog, label: str, allow_empty: bool) -> Derived:
    """Phoenix's span export: one row per span, attributes flattened into columns. The SQL reads
    only the columns and document attributes the export has (every one but the ids, the name
    and the span kind is optional). OTLP JSON of OpenInference spans is read as the export its
    spans make (sql/fuse/_otlp.sql)."""
    paths, _ = resolve_files(log.given, label)
    if _is_otlp(paths):
        files = _otlp_lines(session, log, paths, label)
        return _hits(session, log, files, "fuse/openinference.sql", label, allow_empty,
                     inputs={"lines": "otlp_lines"}, otlp=True, documents=_OTLP_DOCUMENTS,
                     query_column=QUERY, parent_column=PARENT, operation=_OTLP_OPERATION,
                     query_key=log.otlp_key())  # fmt: skip
    spans = session.open("spans", SPANS, log.given, f"{label} spans")
    columns = {name.lower(): name for name in session.schema(RAW_SPANS)}
    typed = session.con.sql(f"SELECT * FROM {RAW_SPANS} LIMIT 0")
    kinds = {
        n: "object" if _kind(t) == "object" else "text" for n, t in zip(typed.columns, typed.types)
    }
    documents = _documents(session, columns.get(DOCUMENTS), spans.given, label)
    operation = export_attribute(columns, kinds, OPERATION.split("."))
    return _hits(session, log, spans.files, "fuse/openinference.sql", label, allow_empty,
                 inputs={"spans": RAW_SPANS}, otlp=False, documents=documents,
                 query_column=columns.get(QUERY), parent_column=columns.get(PARENT),
                 operation=operation, start_column=columns.get(START),
                 query_key=log.export_key(columns, kinds))  # fmt: skip


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
    context |= {"file_column": FILE_COLUMN, "log_rules": LOG_RULES, "ids": log.ids()}
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
    hits, unscored, unscored_lists, retrievals, traces, ensembles, nested, derived = summary
    hint = "; --allow-empty decides each trace as a query without candidates" if allow_empty else ""
    if not hits and nested:
        raise InputError(
            f"{where}: every document is in a retrieval span with retrieval spans below it "
            f"({_count(nested, 'document')}), left out as a nested retriever's, and the spans "
            "below returned none (docs/traces.md#nested-retrievers)"
        )
    if not hits and not (allow_empty and log.allow_empty and retrievals):
        found = hint if retrievals else _census(session, log, template, context)
        raise InputError(
            f"{where}: no retrieval span returned a document "
            f"({_count(retrievals, 'retrieval span')} in {_count(traces, 'trace')}): "
            f"nothing to fuse{found}"
        )
    if derived:
        ordered = sorted(derived, key=lambda counted: list(_RULES).index(counted[0]))
        counts = ", ".join(f"{_RULES[rule]} ({int(n):,})" for rule, n in ordered)
        total = sum(int(n) for _, n in derived)
        logger.warning(
            f"{where}: {_count(total, 'document')} without an id {'is' if total == 1 else 'are'} "
            f"given one by the first rule that applies: {counts}; --doc-id KEY names a "
            "metadata key instead (docs/traces.md#documents-without-an-id)"
        )
    if unscored:
        one = unscored == 1
        logger.warning(
            f"{where}: {_count(unscored, 'document')} in "
            f"{_count(unscored_lists, 'list')} {'has' if one else 'have'} no {_SCORE[template]} "
            f"beside documents with one: {'it is' if one else 'each is'} given the score -rank "
            "(as in a rank-only log), below every document of its list scored above that, all "
            "of them when scores are >= 0 (docs/traces.md#documents-without-a-score)"
        )
    if ensembles:
        it, is_, its = ("it", "is", "its") if ensembles == 1 else ("them", "are", "their")
        logger.warning(
            f"{where}: {_count(ensembles, 'retrieval span')} with retrieval spans below {it} "
            f"(nested retrievers) {is_} left out: {its} documents are {its} children's, "
            "already fused, and the children are fused instead (docs/traces.md#nested-retrievers)"
        )
    # the hits are read several times (the log's checks, fusion, the parent features): a table
    # reads the spans once, half the time of a trace run; under --memory-limit they stay a
    # view, since DuckDB does not evict a temp table
    kept = session.settings.memory_limit is None
    for name, final in ((TRACE_SPANS, "spans"), ("trace_hits", "hits")):
        rendered = render(template, final=final, row_column=ROW_COLUMN, **context)
        session.create(name, rendered, view=not (kept and name == "trace_hits"))
    return Derived(session.con.table("trace_hits"), str(log.given), files, log.format)


def _census(session: Session, log: TraceLog, template: str, context: dict[str, Any]) -> str:
    """What an export without a retrieval span holds, and which format reads it: the spans, the
    values of openinference.span.kind and gen_ai.operation.name, the spans with db.query.result
    events."""
    rendered = render(template, final="census", row_column=ROW_COLUMN, **context)
    row = _one_row(session, str(log.given), rendered)
    assert row is not None
    spans, kinds, operations, results = row
    found = [f"{_count(spans, 'span')}"]
    for attribute, values in (
        ("openinference.span.kind", kinds),
        ("gen_ai.operation.name", operations),
    ):
        if values:
            found.append(f"{attribute}: " + ", ".join(f"{v} {int(n):,}" for v, n in values))
    if results:
        found.append(f"{_count(results, 'span')} with db.query.result events")
    kinds_found = {v for v, _ in kinds or ()}
    operations_found = {v for v, _ in operations or ()}
    other = "otel-genai" if log.format == "openinference" else "openinference"
    readable = (
        "RETRIEVER" in kinds_found
        if other == "openinference"
        else bool(results or operations_found & {"retrieval", "vector_db_retrieve"})
    )
    reads = (
        f"--log-format {other} reads it"
        if readable
        else f"neither format finds a retrieval in it ({other}: {_FORMATS[other]})"
    )
    if readable and context.get("otlp") is False:  # Phoenix's export of GenAI spans
        reads += " as OTLP JSON (an OpenTelemetry file exporter's), not Phoenix's export"
    return f"; the export holds {'; '.join(found)}, none of them {_FORMATS[log.format]}: {reads}"


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
        f"SELECT DISTINCT query_id FROM {TRACE_SPANS} WHERE is_retrieval ORDER BY query_id"
    )
    opened = session.inputs.get("spans") or session.inputs.get("log")
    files = opened.files if opened is not None else ()
    return Derived(relation, str(log.given), files, log.format)


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
