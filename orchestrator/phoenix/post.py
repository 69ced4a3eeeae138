"""`duckscore export annotations --to URL`: a run's decisions posted to a running Phoenix, as the
span annotations the file export writes (export/annotations.py, the same SQL) and the same three
per trace as trace annotations (`POST /v1/trace_annotations`, `trace_id` for `span_id`).

Phoenix keeps one annotation per (span or trace, name, identifier) and replaces it when it comes
again, so posting a run twice updates its annotations and never adds to them; another policy's
identifier (`duckscore:<policy version>`) stands beside. Posted synchronously, in batches, so a
refusal (a span Phoenix does not have: spans scored from another server) is one line; a batch
refused leaves those before it posted, and posting again is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.connection import EngineSettings
from ..export.annotations import span_annotations
from .server import answered, phoenix_client

BATCH = 1000  # annotations per request
ELSEWHERE = "post the decisions to the Phoenix whose spans were scored: duckscore pull"


@dataclass(frozen=True)
class Posted:
    span_annotations: int
    trace_annotations: int
    traces: int
    without_spans: int  # queries with no span to annotate


def post_annotations(
    scored: str | Path, url: str, settings: EngineSettings | None = None
) -> Posted:
    """Post the decisions of the run folder `scored` to the Phoenix at `url`, as span and trace
    annotations."""
    client = phoenix_client(url, "--to")
    built = span_annotations(scored, settings)
    spans = [annotation for _, annotation in built.data]
    traces = trace_annotations(built.data)
    with answered("--to", url, not_found=ELSEWHERE):
        _batches(
            spans, lambda part: client.spans.log_span_annotations(span_annotations=part, sync=True)
        )
        _batches(
            traces,
            lambda part: client.traces.log_trace_annotations(trace_annotations=part, sync=True),
        )
    return Posted(len(spans), len(traces), built.traces, built.without_spans)


def trace_annotations(data: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each span annotation as the annotation of its trace (the query id is the trace id)."""
    return [
        {"trace_id": trace} | {k: v for k, v in annotation.items() if k != "span_id"}
        for trace, annotation in data
    ]


def _batches(items: list[dict[str, Any]], send: Callable[[list[Any]], object]) -> None:
    for at in range(0, len(items), BATCH):
        send(items[at : at + BATCH])
