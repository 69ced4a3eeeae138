"""`duckscore pull`: the spans of a Phoenix project, read from the running server, written as the
span export `--log-format openinference` reads (docs/traces.md): one row per span, the columns of
Phoenix's span DataFrame (`context.trace_id`, `context.span_id`, `parent_id`, `name`,
`attributes.openinference.span.kind`, `attributes.input.value`, `attributes.retrieval.documents`
…), as Parquet or JSON Lines, written atomically.

Only the spans a run reads are pulled: the retrieval spans and the traces' root spans, those
that started in the window [start, end) when one is given, and every span between a retrieval
span and its root (the chain between an ensemble retriever and the retrievers it calls: the run
reads the hierarchy to leave the ensemble out), through Phoenix's REST API for spans
(`GET /v1/projects/{project}/spans`, paged; the client's `spans.get_spans`, by span id for the
spans between). It gives each span's
attributes as the instrumentation set them, flattened (`retrieval.documents.0.document.id` …), and
their numbers exact — the span DataFrame's query sends them as JSON of 10 decimals. The
documents are gathered back into the export's list, each document's metadata (which Phoenix
parsed and flattened) as the JSON string OpenInference sends, so documents whose metadata differ
in keys or types are one Parquet column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import InputError, OptionError, OutputError
from ..core.outputs import atomic_output_file, check_output_file
from .server import answered, phoenix_client

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from phoenix.client import Client

RETRIEVER = "RETRIEVER"
KIND = "attributes.openinference.span.kind"
TRACE = "context.trace_id"
QUERY = "attributes.input.value"
DOCUMENTS = "attributes.retrieval.documents"
DOCUMENT = re.compile(r"retrieval\.documents\.(?P<index>\d+)\.(?P<attribute>.+)")
METADATA = "document.metadata"
# what a run reads of a span, and when it ran (Phoenix's other attributes stay in Phoenix)
COLUMNS = (TRACE, "context.span_id", "parent_id", "name", "span_kind", "start_time", "end_time",
           "status_code", KIND, QUERY, DOCUMENTS)  # fmt: skip
REQUIRED = COLUMNS[:-2]  # every span has them (a root's parent_id is null)
FORMATS = ("parquet", "json")  # JSON: one span per line
TIMEOUT = 300  # seconds for one page of spans
BATCH = 100  # span ids a request asks for


@dataclass(frozen=True)
class Window:
    """The spans that started at or after `start` and before `end` (either open)."""

    start: datetime | None = None
    end: datetime | None = None

    def __post_init__(self) -> None:
        if self.start and self.end and self.start >= self.end:
            raise OptionError(
                f"--start {self.start.isoformat()} is not before --end {self.end.isoformat()}"
            )

    def __str__(self) -> str:
        bounds = [f"from {self.start.isoformat()}"] if self.start else []
        bounds += [f"before {self.end.isoformat()}"] if self.end else []
        return f" ({' '.join(bounds)})" if bounds else ""


@dataclass(frozen=True)
class Pulled:
    out: Path
    spans: int
    retrievals: int  # retrieval spans
    traces: int  # traces with a retrieval span


def pull_spans(url: str, project: str, out: str | Path, window: Window, max_spans: int) -> Pulled:
    """Write the spans of `project` at the Phoenix `url` to `out` (.parquet, or .jsonl …: JSON
    Lines). Refused in one line, before anything is written: an unreachable server, a project it
    does not have, a window without a retrieval span, more than `max_spans` spans."""
    _, _, output = check_output_file(out, "--out", None, "table")
    if output not in FORMATS:
        raise OutputError(f"--out {out}: spans are written as Parquet or JSON Lines")
    where = f"--from {url}: project {project!r}"
    client = phoenix_client(url, "--from")
    with answered("--from", url):
        _check_project(client, url, project)
        found = _retrievals_and_roots(client, project, window, max_spans + 1)
        found = _with_ancestors(client, project, found, max_spans + 1)
    if len(found) > max_spans:
        raise InputError(
            f"{where} has more than {max_spans:,} spans{window}: narrow --start and --end, "
            "or raise --max-spans"
        )
    spans = export_frame(found)
    retrievals = spans[spans[KIND] == RETRIEVER]
    if retrievals.empty:
        raise InputError(f"{where} has no retrieval span{window}")
    written = _arrow(spans, out) if output == "parquet" else None
    with atomic_output_file(out, "--out", None, "table") as staging:
        if written is None:
            _write_json_lines(spans, staging)
        else:
            import pyarrow.parquet as pq

            pq.write_table(written, staging)
    return Pulled(Path(out), len(spans), len(retrievals), retrievals[TRACE].nunique())


def _retrievals_and_roots(
    client: Client, project: str, window: Window, limit: int
) -> list[dict[str, Any]]:
    """The retrieval spans and the root spans of the window (a root that retrieved, once), up to
    `limit` of each."""
    spans: dict[str, dict[str, Any]] = {}
    for kind, parent in ((RETRIEVER, None), (None, "null")):
        for span in client.spans.get_spans(
            project_identifier=project,
            start_time=window.start,
            end_time=window.end,
            span_kind=kind,
            parent_id=parent,
            limit=limit,
            timeout=TIMEOUT,
        ):
            spans[span["context"]["span_id"]] = dict(span)
    return list(spans.values())


def _with_ancestors(
    client: Client, project: str, spans: list[dict[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """`spans` and every span above one of them up to its trace's root (whenever it started),
    fetched by id, a level of the hierarchy a round (stopping past `limit` spans). A parent
    Phoenix does not hold (a span still in flight, or dropped) ends its chain."""
    held = {span["context"]["span_id"]: span for span in spans}
    asked: set[str] = set()
    while len(held) <= limit:
        missing = sorted(
            {p for s in held.values() if (p := s.get("parent_id"))} - held.keys() - asked
        )
        if not missing:
            break
        asked.update(missing)
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            for span in _spans_by_id(client, project, batch, held, limit):
                held.setdefault(span["context"]["span_id"], span)
    return list(held.values())


def _spans_by_id(
    client: Client, project: str, ids: list[str], held: dict[str, dict[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """The spans of `ids`; a server older than the span-id filter (Phoenix 19.6) gives the
    spans of their traces (up to `limit`), of which those asked for are kept."""
    from phoenix.client.exceptions import PhoenixException

    wanted = set(ids)
    try:
        found = client.spans.get_spans(
            project_identifier=project, span_ids=ids, limit=len(ids), timeout=TIMEOUT
        )
        return [dict(span) for span in found]
    except PhoenixException:
        traces = sorted(
            {s["context"]["trace_id"] for s in held.values() if s.get("parent_id") in wanted}
        )
        found = client.spans.get_spans(
            project_identifier=project, trace_ids=traces, limit=limit, timeout=TIMEOUT
        )
        return [dict(span) for span in found if span["context"]["span_id"] in wanted]


def export_frame(spans: list[dict[str, Any]]) -> pd.DataFrame:
    """Phoenix's spans (`v1.Span`) as rows of its span export: COLUMNS, one row per span, by
    trace and then start time (the order the retrievers ran, which orders a multi-query
    retriever's ties). A column no span has a value in is left out, as an export leaves it."""
    import pandas as pd

    frame = pd.DataFrame([_row(span) for span in spans], columns=list(COLUMNS))
    frame["start_time"] = pd.to_datetime(frame["start_time"], utc=True, format="ISO8601")
    frame["end_time"] = pd.to_datetime(frame["end_time"], utc=True, format="ISO8601")
    frame = frame.sort_values([TRACE, "start_time", "context.span_id"], ignore_index=True)
    return frame[[c for c in COLUMNS if c in REQUIRED or frame[c].notna().any()]]


def _row(span: dict[str, Any]) -> dict[str, Any]:
    attributes = dict(span.get("attributes") or {})
    return {
        TRACE: span["context"]["trace_id"],
        "context.span_id": span["context"]["span_id"],
        "parent_id": span.get("parent_id"),
        "name": span["name"],
        "span_kind": span.get("span_kind"),
        "start_time": span.get("start_time"),
        "end_time": span.get("end_time"),
        "status_code": span.get("status_code"),
        KIND: span.get("span_kind"),  # Phoenix keeps openinference.span.kind as the span's kind
        QUERY: attributes.get(QUERY.removeprefix("attributes.")),
        DOCUMENTS: _documents(attributes),
    }


def _documents(attributes: dict[str, Any]) -> list[dict[str, Any]] | None:
    """`retrieval.documents.<i>.<attribute>` gathered into the list of documents, by index;
    None when the span has none."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := DOCUMENT.fullmatch(key):
            found.setdefault(int(match["index"]), {})[match["attribute"]] = value
    return [_with_metadata(found[i]) for i in sorted(found)] or None


def _with_metadata(flat: dict[str, Any]) -> dict[str, Any]:
    """A document with its `document.metadata.<key>…` attributes as one JSON string."""
    document: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for key, value in flat.items():
        if key.startswith(f"{METADATA}."):
            *path, last = key.removeprefix(f"{METADATA}.").split(".")
            place = metadata
            for part in path:
                place = place.setdefault(part, {})
            place[last] = value
        else:
            document[key] = value
    if metadata:
        document[METADATA] = json.dumps(metadata)
    return document


def _write_json_lines(spans: pd.DataFrame, path: Path) -> None:
    """One span a line, its numbers exact (pandas' to_json keeps 10 decimals), times in ISO 8601."""
    rows = spans.astype(object).where(spans.notna(), None).to_dict("records")
    with path.open("w", encoding="utf-8") as lines:
        for row in rows:
            lines.write(json.dumps(row, default=_iso, ensure_ascii=False) + "\n")


def _iso(value: Any) -> str:
    if isinstance(value, datetime):  # pandas' Timestamp is one
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _check_project(client: Client, url: str, project: str) -> None:
    """Refuse a project the server does not have, naming those it has."""
    import httpx

    try:
        client.projects.get(project_name=project)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code != 404:
            raise
        names = ", ".join(sorted(p["name"] for p in client.projects.list()))
        raise InputError(
            f"--from {url}: Phoenix has no project {project!r} (its projects: {names or 'none'})"
        ) from None


def _arrow(spans: pd.DataFrame, out: str | Path) -> pa.Table:
    """The spans as an Arrow table, refused in one line when their values have no one type."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(spans, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(
            f"--out {out}: the spans do not fit one Parquet schema ({str(exc).splitlines()[0]}): "
            "pull them as JSON Lines (.jsonl)"
        ) from None
