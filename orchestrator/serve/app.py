"""The Starlette app of `duckscore serve`: POST /v1/score, GET /v1/policy, POST /v1/reload,
GET /healthz, GET /openapi.json; with an instinct store, GET /v1/instincts, GET
/v1/instincts/{id} and POST /v1/instincts/events (instincts.py).

Every answer carries the policy version that computed it (`policy_version` in the body and the
X-Duckscore-Policy-Version header). A reload builds the new Scorer first, then swaps it in at
once: a request takes the Scorer current when it starts and finishes on it; a Scorer a reload
retired is closed when its last request ends. Scoring is blocking DuckDB work: it runs on the
scoring threads of a Batcher (api/batcher.py), which score the requests that arrive together in
one statement, so the event loop keeps answering. Errors are one line of JSON, `{"error": …}`, also in
the request's access-log line; a traceback goes to the server's log, never to the client.

A request's tables are read by their table contracts (tables.py): the JSON rows become typed
Arrow tables, a row whose value the column cannot take named in one line, and GET /openapi.json
is generated from the same definitions (openapi.py), for the policy loaded.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..api.batcher import Batcher
from ..api.live_settings import LiveSettings
from ..api.scorer import Scorer
from ..core.errors import DuckscoreError
from .instincts import InstinctService, limit_of
from .openapi import openapi_schema
from .tables import answer_tables, hits_table, json_type

VERSION_HEADER = "X-Duckscore-Policy-Version"
ANSWER_TABLES = ("answers", "citations", "chunks")
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
NO_STORE = "no instinct store: start the server with --instincts-db STORE"
log = logging.getLogger("duckscore.serve")
_T = TypeVar("_T")


class Service:
    """The current Scorer, swapped whole by a reload; each Scorer counts its requests in
    flight, and one a reload retired is closed by the last of them."""

    def __init__(
        self,
        make_scorer: Callable[[], Scorer],
        on_swap: Callable[[Scorer], None] = lambda scorer: None,
    ) -> None:
        self._make = make_scorer
        self._on_swap = on_swap  # called with the new Scorer after each reload
        self._lock = threading.Lock()  # guards _current and _in_flight
        self._reloading = threading.Lock()  # one reload at a time
        self._current = make_scorer()
        self._in_flight: dict[int, int] = {}
        self._closed = False

    @property
    def current(self) -> Scorer:
        return self._current

    @contextmanager
    def using(self) -> Iterator[Scorer]:
        scorer = self.acquire()
        try:
            yield scorer
        finally:
            self.release(scorer)

    def acquire(self) -> Scorer:
        """The current Scorer, counted in flight until `release`."""
        with self._lock:
            scorer = self._current
            self._in_flight[id(scorer)] = self._in_flight.get(id(scorer), 0) + 1
        return scorer

    def release(self, scorer: Scorer) -> None:
        with self._lock:
            left = self._in_flight.pop(id(scorer)) - 1
            if left:
                self._in_flight[id(scorer)] = left
            retire = not left and (scorer is not self._current or self._closed)
        if retire:
            scorer.close()

    def reload(self) -> Scorer:
        """Load the policy and recipe again (the same names and paths, read from disk), then
        swap; a policy that no longer loads raises, and the old one stays."""
        with self._reloading:
            new = self._make()
            with self._lock:
                old, self._current = self._current, new
                retire = id(old) not in self._in_flight
            if retire:
                old.close()
            self._on_swap(new)
            return new

    def close(self) -> None:
        with self._lock:
            self._closed = True
            retire = id(self._current) not in self._in_flight
        if retire:
            self._current.close()


class ReadPool:
    """The threads that read requests' JSON into tables, as many as the scoring threads; a
    resize (a reload to a job batched otherwise) starts a pool of the new size, and the old one
    finishes what it was given."""

    def __init__(self, workers: int) -> None:
        self._lock = threading.Lock()
        self.workers = workers
        self._pool = self._started(workers)

    @staticmethod
    def _started(workers: int) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="duckscore-read")

    def resize(self, workers: int) -> None:
        with self._lock:
            if workers == self.workers:
                return
            old, self._pool, self.workers = self._pool, self._started(workers), workers
        old.shutdown(wait=False)

    async def run(self, work: Callable[[], _T]) -> _T:
        with self._lock:  # never handed to a pool a resize has shut down
            done = asyncio.get_running_loop().run_in_executor(self._pool, work)
        return await done

    def close(self) -> None:
        with self._lock:
            pool = self._pool
        pool.shutdown(wait=True)


def policy_record(scorer: Scorer) -> dict[str, Any]:
    return {
        "policy_version": scorer.policy.version,
        "parameters_sha256": scorer.policy.parameters_sha256,
        "recipe_id": scorer.recipe.version,
        "recipe_parameters_sha256": scorer.recipe.policy.parameters_sha256,
        "per_query": scorer.per_query,
        "cross_query": list(scorer.cross_query),
    }


def one_line(text: str) -> str:
    return " ".join(text.split())


def _answer(body: dict[str, Any], status: int = 200, version: str | None = None) -> Response:
    headers = {VERSION_HEADER: version} if version is not None else None
    return JSONResponse(body, status_code=status, headers=headers)


class _TooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused past `limit` bytes: by its Content-Length, and by counting what comes
    (a chunked body has none)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _lists_of(
    body: bytes, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> dict[str, list[dict[str, Any]]] | str:
    """The body's lists of row objects by name, or the one line saying why not (a 400)."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"the body is not JSON: {one_line(str(exc))}"
    wanted = ", ".join(f'"{name}"' for name in required)
    if not isinstance(payload, dict) or any(name not in payload for name in required):
        return f"the body must be a JSON object with {wanted}: lists of row objects"
    found: dict[str, list[dict[str, Any]]] = {}
    for name in (*required, *(n for n in optional if payload.get(n) is not None)):
        rows = payload[name]
        if not isinstance(rows, list):
            return f'"{name}" must be a list of objects, not {json_type(rows)}'
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                return f'"{name}" must be a list of objects: row {i + 1} is {json_type(row)}'
        found[name] = rows
    return found


def scoring_threads_for(live: LiveSettings, per_query: bool) -> int:
    """One scoring thread a CPU; with batching (a per-query job), one for two CPUs: one
    thread taking all that wait scores as many as two taking half each, at less CPU a query
    (docs/live.md), and the other CPU reads and writes the JSON."""
    cpus = os.cpu_count() or 1
    return max(1, cpus // 2) if live.max_batch > 1 and per_query else cpus


def create_app(
    make_scorer: Callable[[], Scorer],
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    access_log: bool = True,
    scoring_threads: int | None = None,
    instincts: InstinctService | None = None,
    live: LiveSettings | None = None,
) -> Starlette:
    """The app; `make_scorer` is called once now and again by each reload. Requests are scored
    on `scoring_threads` threads (default: scoring_threads_for), each taking the requests
    waiting, up to `live.max_batch`, in one statement; every thread keeps a warm lane of its
    own. The requests' JSON is read on a pool of as many."""
    live = live or LiveSettings()

    def on_swap(scorer: Scorer) -> None:
        """A reload to a job that batches differently (per query or not) scores on the number
        of threads that job gets, unless --scoring-threads fixed it."""
        if scoring_threads is None:
            threads = scoring_threads_for(live, scorer.per_query)
            batcher.resize(threads)
            pool.resize(threads)

    service = Service(make_scorer, on_swap)
    threads = scoring_threads or scoring_threads_for(live, service.current.per_query)
    pool = ReadPool(threads)
    batcher = Batcher(
        batch_window_ms=live.batch_window_ms, max_batch=live.max_batch, workers=threads
    )

    on_pool = pool.run

    async def score(request: Request) -> Response:
        try:
            body = await _read_body(request, max_body_bytes)
        except _TooLarge:
            return _answer(
                {"error": f"the body is over {max_body_bytes} bytes (--max-body-bytes)"},
                413,
                service.current.policy.version,
            )
        lists = _lists_of(body, ("hits",))
        if isinstance(lists, str):
            return _answer({"error": lists}, 400, service.current.policy.version)
        hits = lists["hits"]
        scorer = service.acquire()
        version = scorer.policy.version
        submitted = False
        try:
            if not hits:
                raise DuckscoreError("hits: no rows (give the hits of one query or more)")
            table = await on_pool(lambda: hits_table(scorer.recipe).to_arrow(hits))
            scored = batcher.submit(table, scorer)
            # released when scored, not when this request ends: a client that goes away does
            # not let a reload close the Scorer under a statement in flight
            scored.add_done_callback(lambda _: service.release(scorer))
            submitted = True
            contract = (await asyncio.wrap_future(scored)).contract
        except DuckscoreError as exc:
            return _answer({"error": one_line(str(exc))}, 422, version)
        finally:
            if not submitted:
                service.release(scorer)
        request.state.queries = len(contract)
        answer = {"contract": contract, "policy_version": version}
        return _answer(answer | {"recipe_id": scorer.recipe.version}, 200, version)

    async def answers(request: Request) -> Response:
        version = service.current.answer_policy.version
        try:
            body = await _read_body(request, max_body_bytes)
        except _TooLarge:
            too_large = f"the body is over {max_body_bytes} bytes (--max-body-bytes)"
            return _answer({"error": too_large}, 413, version)
        lists = _lists_of(body, ANSWER_TABLES, ("events",))
        if isinstance(lists, str):
            return _answer({"error": lists}, 400, version)

        def compute() -> tuple[int, dict[str, Any], str]:
            with service.using() as scorer:
                version = scorer.answer_policy.version
                try:
                    read = answer_tables(scorer.answer_policy)
                    tables = {name: read[name].to_arrow(rows) for name, rows in lists.items()}
                    contract = scorer.answers(
                        tables["answers"], tables["citations"], tables["chunks"],
                        tables.get("events"),
                    ).contract  # fmt: skip
                except DuckscoreError as exc:
                    return 422, {"error": one_line(str(exc))}, version
                request.state.queries = len(contract)
                return 200, {"contract": contract, "policy_version": version}, version

        status, answer, version = await on_pool(compute)
        return _answer(answer, status, version)

    async def policy(request: Request) -> Response:
        scorer = service.current
        return _answer(policy_record(scorer), version=scorer.policy.version)

    async def reload(request: Request) -> Response:
        try:
            scorer = await run_in_threadpool(service.reload)
        except DuckscoreError as exc:
            return _answer({"error": one_line(str(exc))}, 422, service.current.policy.version)
        log.info("reloaded: policy %s", scorer.policy.version)
        return _answer(policy_record(scorer), version=scorer.policy.version)

    async def healthz(request: Request) -> Response:
        version = service.current.policy.version
        return _answer({"status": "ok", "policy_version": version}, version=version)

    documents: dict[tuple[str, str], dict[str, Any]] = {}  # by what the document reads

    async def openapi(request: Request) -> Response:
        scorer = service.current
        key = (scorer.recipe.policy.parameters_sha256, scorer.answer_policy.parameters_sha256)
        if key not in documents:
            from .. import __version__

            documents.clear()
            documents[key] = openapi_schema(
                __version__, hits_table(scorer.recipe), answer_tables(scorer.answer_policy)
            )
        return _answer(documents[key], version=scorer.policy.version)

    def instinct_answer(work: Callable[[], tuple[int, dict[str, Any]]]) -> Callable[[], Response]:
        """A store call's answer: 422 for what the store refuses, in one line."""

        def answer() -> Response:
            if instincts is None:
                return _answer({"error": NO_STORE}, 404)
            version = instincts.policy_version
            try:
                status, body = work()
            except DuckscoreError as exc:
                return _answer({"error": one_line(str(exc))}, 422, version)
            return _answer(body | {"instinct_policy_version": version}, status, version)

        return answer

    def store() -> InstinctService:
        assert instincts is not None  # instinct_answer answered 404 first
        return instincts

    async def instinct_list(request: Request) -> Response:
        tier, limit = request.query_params.get("tier"), request.query_params.get("limit")
        return await on_pool(
            instinct_answer(lambda: (200, {"instincts": store().top(tier, limit_of(limit))}))
        )

    async def instinct_one(request: Request) -> Response:
        wanted = str(request.path_params["instinct_id"])

        def read() -> tuple[int, dict[str, Any]]:
            found = store().one(wanted)
            if found is None:
                return 404, {"error": f"instinct {wanted!r}: no such instinct in the store"}
            return 200, {"instinct": found}

        return await on_pool(instinct_answer(read))

    async def instinct_events(request: Request) -> Response:
        version = instincts.policy_version if instincts is not None else None
        try:
            body = await _read_body(request, max_body_bytes)
        except _TooLarge:
            too_large = f"the body is over {max_body_bytes} bytes (--max-body-bytes)"
            return _answer({"error": too_large}, 413, version)
        lists = _lists_of(body, ("events",))
        if isinstance(lists, str):
            return _answer({"error": lists}, 400, version)
        return await on_pool(instinct_answer(lambda: (200, store().ingest(lists["events"]))))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    async def internal_error(request: Request, exc: Exception) -> Response:
        # the traceback goes to the server's log: Starlette raises the exception on to uvicorn
        log.error("internal error on %s %s: %r", request.method, request.url.path, exc)
        return JSONResponse({"error": "internal error"}, status_code=500)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        yield
        batcher.close()
        pool.close()
        service.close()

    app = Starlette(
        routes=[
            Route("/v1/score", score, methods=["POST"]),
            Route("/v1/answers", answers, methods=["POST"]),
            Route("/v1/policy", policy, methods=["GET"]),
            Route("/v1/reload", reload, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
            Route("/v1/instincts", instinct_list, methods=["GET"]),
            Route("/v1/instincts/events", instinct_events, methods=["POST"]),
            Route("/v1/instincts/{instinct_id}", instinct_one, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: internal_error},
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.batcher = batcher
    app.state.read_pool = pool
    if access_log:
        app.add_middleware(AccessLog)
    return app


class AccessLog:
    """One JSON line a request on stderr: time, method, path, status, latency_ms, queries (the
    queries scored, or null), the policy version that answered (or null) and, for an error
    answer (4xx, 5xx), its one line (else null)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        scope.setdefault("state", {})
        seen: dict[str, Any] = {"status": 500, "version": None, "error": b""}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                for name, value in message.get("headers", ()):
                    if name.decode("latin-1").lower() == VERSION_HEADER.lower():
                        seen["version"] = value.decode("latin-1")
            elif message["type"] == "http.response.body" and seen["status"] >= 400:
                # an error answer's body is `{"error": …}`, one line: kept for the log line
                seen["error"] += message.get("body", b"")[: _ERROR_BYTES - len(seen["error"])]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            line = {
                "time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
                "method": scope["method"],
                "path": scope["path"],
                "status": seen["status"],
                "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                "queries": scope["state"].get("queries"),
                "policy_version": seen["version"],
                "error": _error_of(seen["error"]) if seen["status"] >= 400 else None,
            }
            sys.stderr.write(json.dumps(line) + "\n")
            sys.stderr.flush()


_ERROR_BYTES = 4096  # of an error's body kept for the access log


def _error_of(body: bytes) -> str:
    """The one line of an error answer's body, `{"error": …}`, for the access log."""
    try:
        error = json.loads(body)["error"]
    except (ValueError, TypeError, KeyError):
        return body.decode("utf-8", "replace")[:200]
    return str(error)
