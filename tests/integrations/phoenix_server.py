"""A real Arize Phoenix server for the tests: `phoenix serve` from its own environment
(`.venv-phoenix`, made by `make integrations`: arize-phoenix pins an older sqlglot than
duckscore's), on 127.0.0.1 at free ports, its working folder and SQLite database in a temporary
folder, nothing fetched from the internet; started by a fixture and always stopped. Spans go in
as an application sends them: OpenInference attributes, through OpenTelemetry's OTLP exporter.

Missing, the tests that need it skip — but fail in CI (`CI` set), where `make integrations`
installs it.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import subprocess
import time
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
from openinference.semconv.resource import ResourceAttributes
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from phoenix.client import Client

from ..helpers import PHOENIX, need_tool

START_TIMEOUT = 180.0  # seconds: the first start migrates a new database (about 12 s)
STOP_TIMEOUT = 20.0
PROJECT_NAME = ResourceAttributes.PROJECT_NAME  # the resource attribute naming the project
# OpenTelemetry keeps 128 attributes a span unless told (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT): a list
# of 50 documents sets 200
LIMITS = SpanLimits(max_span_attributes=10_000)


@dataclass(frozen=True)
class PhoenixServer:
    url: str  # http://127.0.0.1:PORT: the REST API under /v1, OTLP over HTTP at /v1/traces
    log: Path  # the server's output
    started_in: float  # seconds from launch to ready

    @property
    def traces_endpoint(self) -> str:
        return f"{self.url}/v1/traces"


def phoenix_executable() -> Path:
    """The `phoenix` of .venv-phoenix; missing, the test skips, or fails in CI."""
    return need_tool(PHOENIX)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_environment(folder: Path, port: int, grpc_port: int) -> dict[str, str]:
    """The caller's environment without its PHOENIX_ settings, and the server's own: local,
    private, offline (no telemetry, no external resources, no assistant reaching for docs)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("PHOENIX_")}
    return inherited | {
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": str(folder / "working"),
        "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{folder / 'phoenix.db'}",
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    }


@contextmanager
def running_phoenix(folder: Path) -> Iterator[PhoenixServer]:
    """A Phoenix server on its own database in `folder`, ready; terminated (then killed) when
    the block ends, however it ends."""
    executable = phoenix_executable()
    port = free_port()
    env = server_environment(folder, port, free_port())
    url = f"http://127.0.0.1:{port}"
    log = folder / "phoenix.log"
    with ExitStack() as stack:
        output = stack.enter_context(log.open("wb"))
        began = time.monotonic()
        process = subprocess.Popen(
            [str(executable), "serve"], env=env, stdout=output, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=folder,
        )  # fmt: skip
        stack.callback(stop, process)
        wait_ready(url, process, log)
        yield PhoenixServer(url, log, time.monotonic() - began)


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"phoenix serve exited ({process.returncode}):\n{tail(log)}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"phoenix serve not ready in {START_TIMEOUT:.0f} s:\n{tail(log)}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT)


def tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


# -- spans in, as an instrumented application sends them -----------------------------------------


class GivenIds(IdGenerator):
    """The span ids of the spans about to start, in order (and the trace id of each root), so
    that the spans Phoenix stores carry the ids of the export they were built from."""

    def __init__(self) -> None:
        self.trace_ids: deque[int] = deque()
        self.span_ids: deque[int] = deque()

    def generate_trace_id(self) -> int:
        return self.trace_ids.popleft()

    def generate_span_id(self) -> int:
        return self.span_ids.popleft()


def send_spans(server: PhoenixServer, project: str, spans: pd.DataFrame) -> None:
    """Send `spans` — rows of Phoenix's span export, ids in hex, a `start_time` each — to the
    server's OTLP/HTTP endpoint through OpenTelemetry's exporter, each row one span of the
    OpenInference attributes its `attributes.*` columns hold (the documents flattened as
    instrumentations set them: `retrieval.documents.<i>.document.id` …), in `project`; returns
    when Phoenix shows them all."""
    ids = GivenIds()
    provider = TracerProvider(
        resource=Resource({PROJECT_NAME: project}), id_generator=ids, span_limits=LIMITS
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(server.traces_endpoint)))
    tracer = provider.get_tracer("duckscore-tests")
    for row in spans.to_dict("records"):
        parent = row.get("parent_id")
        context = None
        if isinstance(parent, str):
            parent_context = SpanContext(int(row["context.trace_id"], 16), int(parent, 16),
                                         is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))  # fmt: skip
            context = set_span_in_context(NonRecordingSpan(parent_context))
        else:
            ids.trace_ids.append(int(row["context.trace_id"], 16))
        ids.span_ids.append(int(row["context.span_id"], 16))
        start = int(pd.Timestamp(row["start_time"]).value)
        span = tracer.start_span(row["name"], context, attributes=attributes(row), start_time=start)
        span.end(end_time=start + 1_000_000)
    provider.shutdown()
    wait_stored(server, project, len(spans))


def attributes(row: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for column, value in row.items():
        if not column.startswith("attributes.") or value is None:
            continue
        key = column.removeprefix("attributes.")
        if isinstance(value, list):
            for i, document in enumerate(value):
                found |= {f"{key}.{i}.{k}": v for k, v in document.items() if v is not None}
        elif not (isinstance(value, float) and math.isnan(value)):
            found[key] = value
    return found


def wait_stored(server: PhoenixServer, project: str, count: int, timeout: float = 60.0) -> None:
    """Phoenix stores spans from a queue: wait until the project holds `count`."""
    client = Client(base_url=server.url)
    deadline = time.monotonic() + timeout
    stored = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPStatusError):  # the project is not created yet
            stored = len(
                client.spans.get_spans_dataframe(project_identifier=project, limit=count + 1)
            )
            if stored >= count:
                return
        time.sleep(0.2)
    raise AssertionError(f"Phoenix holds {stored} of the {count} spans sent to {project!r}")
