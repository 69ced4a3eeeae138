"""`duckscore export annotations --format phoenix`: the decisions of a run on a trace export
(`run --log-format openinference|otel-genai`) as the body of Phoenix's `POST /v1/span_annotations`,
`{"data": [SpanAnnotationData, …]}`, so they appear beside the traces in Phoenix.

The annotations are built in SQL (sql/export/phoenix_annotations.sql) from the folder's
queries.parquet, spans.parquet and contract.jsonl — or, for an output partitioned by `run
--partition-by`, from the parts under queries/, spans/ and contract/ — and written as one JSON
document, atomically (`phoenix_annotations`), or handed over as values (`span_annotations`: what
`export annotations --to` posts to a running Phoenix, phoenix/post.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.connection import EngineSettings
from ..core.errors import InputError, TemplateError
from ..core.outputs import atomic_output_file, check_output_file
from ..core.render import ident, lit, render
from ..core.session import Session

TRACE_FORMATS = "--log-format openinference or otel-genai"
# the annotations as one document: Phoenix's request body
BODY = (
    "SELECT coalesce(list(annotation ORDER BY query_id, position), CAST([] AS JSON[])) AS data "
    "FROM phoenix_annotations"
)
# the contract's top_parents (seed 000 §10) as the annotations read them: sub-scores and flags
TOP_PARENTS = (
    "STRUCT(parent_id VARCHAR, overall_score DOUBLE, strength DOUBLE, coverage DOUBLE, "
    "stability DOUBLE, risk_flags VARCHAR[])[]"
)
ROWS = "SELECT query_id, annotation FROM phoenix_annotations ORDER BY query_id, position"


@dataclass(frozen=True)
class Counts:
    annotations: int
    traces: int
    without_spans: int  # queries of queries.parquet with no span to annotate


@dataclass(frozen=True)
class Exported(Counts):
    out: Path


@dataclass(frozen=True)
class SpanAnnotations(Counts):
    # (the trace's query_id, the SpanAnnotationData), in the file's order
    data: tuple[tuple[str, dict[str, Any]], ...]


def phoenix_annotations(
    scored: str | Path, out: str | Path, settings: EngineSettings | None = None
) -> Exported:
    """Write the decisions of the run folder `scored` to `out` as Phoenix span annotations.
    `out` is checked first: not inside `scored`, not named as another format than JSON."""
    inputs = {"--scored": scored}
    check_output_file(out, "--out", inputs, "json")
    with (
        _annotated(scored, settings) as (session, counts),
        atomic_output_file(out, "--out", inputs, "json") as staging,
    ):
        session.execute(f"COPY ({BODY}) TO {lit(str(staging))} (FORMAT json)")
    return Exported(counts.annotations, counts.traces, counts.without_spans, Path(out))


def span_annotations(scored: str | Path, settings: EngineSettings | None = None) -> SpanAnnotations:
    """The annotations `phoenix_annotations` writes, each with the query_id (the trace id) of the
    trace it is on."""
    with _annotated(scored, settings) as (session, counts):
        rows = session.frame(ROWS)
    data = tuple(
        (str(query_id), json.loads(annotation))
        for query_id, annotation in zip(rows["query_id"], rows["annotation"], strict=True)
    )
    return SpanAnnotations(counts.annotations, counts.traces, counts.without_spans, data)


@contextmanager
def _annotated(
    scored: str | Path, settings: EngineSettings | None
) -> Iterator[tuple[Session, Counts]]:
    """A Session holding the table phoenix_annotations of the run folder `scored`, and its
    counts; the folder refused in one line when it is not a run on trace spans."""
    folder = Path(scored)
    if not folder.is_dir():
        raise InputError(f"--scored {scored}: no such folder")
    queries = _parts(folder, "queries", ".parquet")
    if not queries:
        raise InputError(f"--scored {scored}: has no queries.parquet: not an output of a run")
    spans = _parts(folder, "spans", ".parquet")
    if not spans:
        raise InputError(
            f"--scored {scored}: has no spans.parquet: it was not scored from a trace export "
            f"({TRACE_FORMATS})"
        )
    contract = _parts(folder, "contract", ".jsonl")
    if not contract:
        raise InputError(f"--scored {scored}: has no contract.jsonl: not an output of a run")
    with Session(settings) as session:
        _view(session, "scored_queries", f"read_parquet({lit(queries)}, union_by_name = true)")
        _view(session, "scored_spans", f"read_parquet({lit(spans)}, union_by_name = true)")
        _view(
            session,
            "scored_policies",
            f"read_json({lit(contract)}, format = 'newline_delimited', "
            f"columns = {{query_id: 'VARCHAR', score_policy_version: 'VARCHAR', "
            f"top_parents: {lit(TOP_PARENTS)}}})",
        )
        rendered = render(
            "export/phoenix_annotations.sql",
            inputs={
                "queries": "scored_queries",
                "spans": "scored_spans",
                "policies": "scored_policies",
            },
        )
        try:
            session.create("phoenix_annotations", rendered)
        except TemplateError as exc:  # a column the template reads is missing
            raise InputError(
                f"--scored {scored}: not the tables of a run on trace spans ({exc})"
            ) from None
        found = session.first_row(
            "SELECT count(*), count(DISTINCT query_id), "
            "(SELECT count(DISTINCT query_id) FROM scored_queries) FROM phoenix_annotations"
        )
        annotations, traces, queried = found or (0, 0, 0)
        yield session, Counts(annotations, traces, queried - traces)


def _parts(folder: Path, name: str, suffix: str) -> list[str]:
    """`folder/<name><suffix>` (a file, or a folder of parts as Spark writes it), else the parts
    under `folder/<name>/` (hive partitions: `<name>/dt=…/part<suffix>`)."""
    single = folder / f"{name}{suffix}"
    if single.is_file():
        return [str(single)]
    under = single if single.is_dir() else folder / name
    if not under.is_dir():
        return []
    return sorted(
        str(path)
        for path in under.rglob(f"*{suffix}")
        if path.is_file() and not path.name.startswith((".", "_"))
    )


def _view(session: Session, name: str, source: str) -> None:
    session.execute(f"CREATE OR REPLACE TEMP VIEW {ident(name)} AS SELECT * FROM {source}")
