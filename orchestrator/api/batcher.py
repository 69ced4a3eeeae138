"""Micro-batching (issue 52 §2): requests that arrive together are scored by one statement.

A warm call costs DuckDB about 16 ms to bind and plan the contract statement and 9 ms to run it
on 250 rows (docs/live.md), so one statement over the hits of many requests costs little more
than over one (26 ms a statement for one SciFact query, 46 ms for 16, on a shared machine). A
Batcher's scoring threads each take the requests waiting (at most `max_batch`; fewer than the
last batch held, it waits up to `batch_window_ms` for more: clients waiting for their answers
send again together, and a batch split in two pays the statement's fixed cost twice; after a
batch of one, a request is scored at once), score them together and answer each its own
lines.

Together only when it changes nothing: the job is per query (runner/per_query.py), the requests
are Arrow tables of one schema and one set of sources (the recipe is resolved against the
sources of the hits: a request refused alone for a source it lacks must not pass in company)
and no query_id is in two of them. Text ids that are (every client calls its query `q1`) are
renamed for the statement — each request's prefixed by its number, which keeps their order
within the request — and named back in its lines; a request whose integer ids another has is
scored in a statement of its own.
When a statement of several requests fails, each is scored alone: a bad request gets its own
one-line error, the others their lines.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import DuckscoreError
from .live_settings import LiveSettings

if TYPE_CHECKING:
    from ..core.inputs import Table
    from .scorer import Hits, Live, Scorer


@dataclass(frozen=True)
class _Request:
    scorer: Scorer
    hits: Table
    future: Future[Live] = field(default_factory=Future)


class Batcher:
    """Scoring threads (`workers`, default one a CPU) that score the requests submitted to them
    in batches: `submit(hits, scorer)` answers a Future of the scorer's `Live`, `score(hits)`
    waits for it. `scorer` is the default scorer of `submit` and `score`."""

    def __init__(
        self,
        scorer: Scorer | None = None,
        *,
        batch_window_ms: float = 2.0,
        max_batch: int = 64,
        workers: int | None = None,
    ) -> None:
        LiveSettings(batch_window_ms=batch_window_ms, max_batch=max_batch)  # the same bounds
        self._scorer = scorer
        self._window = batch_window_ms / 1000
        self._max = max_batch
        self._queue: deque[_Request] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self.statements = 0  # statements run, of one request or more
        # the last batch's size: as many back, the batch goes without waiting out the window
        # (clients waiting for their answers send again together); one alone goes at once
        self._last = 1
        self._serving: dict[int, threading.Thread] = {}  # by index (under _ready)
        self._started: list[threading.Thread] = []
        self.resize(workers or os.cpu_count() or 1)

    @property
    def workers(self) -> int:
        return self._wanted

    def resize(self, workers: int) -> None:
        """Score on `workers` threads from now on: more are started; those past the number
        end once they have answered what they took (what waits is taken by the others)."""
        if workers < 1:
            raise ValueError(f"Batcher.resize: workers must be 1 or more, got {workers}")
        with self._ready:
            if self._closed:
                raise RuntimeError("the Batcher is closed")
            self._wanted = workers
            self._started = [thread for thread in self._started if thread.is_alive()]
            for index in range(workers):
                if index not in self._serving:
                    thread = threading.Thread(
                        target=self._work, args=(index,), name=f"duckscore-batch-{index}",
                        daemon=True,
                    )  # fmt: skip
                    self._serving[index] = thread
                    self._started.append(thread)
                    thread.start()
            self._ready.notify_all()

    def submit(self, hits: Hits, scorer: Scorer | None = None) -> Future[Live]:
        from .scorer import as_table

        chosen = scorer or self._scorer
        if chosen is None:
            raise TypeError("Batcher.submit: no scorer (give one, or the Batcher's)")
        request = _Request(chosen, as_table(hits))
        with self._ready:
            if self._closed:
                raise RuntimeError("the Batcher is closed")
            self._queue.append(request)
            self._ready.notify()
        return request.future

    def score(self, hits: Hits, scorer: Scorer | None = None) -> Live:
        return self.submit(hits, scorer).result()

    def close(self) -> None:
        """The requests waiting are scored, then the threads end."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for thread in self._started:
            thread.join()

    def __enter__(self) -> Batcher:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _work(self, index: int) -> None:
        while (batch := self._take(index)) is not None:
            by_scorer: dict[int, list[_Request]] = {}
            for request in batch:
                by_scorer.setdefault(id(request.scorer), []).append(request)
            for requests in by_scorer.values():
                self._answer(requests)

    def _take(self, index: int) -> list[_Request] | None:
        """The next requests to score (None: closed and nothing left, or thread `index` is past
        the number of workers)."""
        with self._ready:
            while True:
                if index >= self._wanted or (self._closed and not self._queue):
                    del self._serving[index]  # (a resize up starts another under this index)
                    return None
                if self._queue:
                    break
                self._ready.wait()
            batch = [self._queue.popleft()]
            deadline = time.monotonic() + self._window
            while len(batch) < self._max:
                if self._queue:
                    batch.append(self._queue.popleft())
                    continue
                left = deadline - time.monotonic()
                if len(batch) >= self._last or left <= 0 or self._closed:
                    break
                self._ready.wait(left)
            self._last = len(batch)
        return [r for r in batch if r.future.set_running_or_notify_cancel()]

    def _answer(self, requests: list[_Request]) -> None:
        try:
            results, statements = score_together(requests[0].scorer, [r.hits for r in requests])
        except BaseException as exc:  # not the request's fault: every caller hears of it
            for request in requests:
                request.future.set_exception(exc)
            return
        self.statements += statements  # (read by tests and the benchmark: not exact across threads)
        for request, result in zip(requests, results, strict=True):
            if isinstance(result, DuckscoreError):
                request.future.set_exception(result)
            else:
                request.future.set_result(result)


def score_together(
    scorer: Scorer, tables: Sequence[Table]
) -> tuple[list[Live | DuckscoreError], int]:
    """Each table's Live (or the error that refuses it), as scoring it alone gives: the tables
    that may share a statement share one (see the module's docstring); and how many groups
    were scored."""
    results: list[Live | DuckscoreError | None] = [None] * len(tables)
    groups = _groups(tables) if scorer.per_query else [[i] for i in range(len(tables))]
    for group in groups:
        if len(group) == 1:
            results[group[0]] = _alone(scorer, tables[group[0]])
            continue
        parts, owners = _tagged([cast(pa.Table, tables[i]) for i in group])  # Arrow tables
        try:
            lines = scorer.score(pa.concat_tables(parts)).contract
        except DuckscoreError:
            for i in group:  # one of them is bad: each alone, each its own answer
                results[i] = _alone(scorer, tables[i])
            continue
        for i, own in zip(group, _split(lines, owners, len(parts)), strict=True):
            results[i] = own
    return [result for result in results if result is not None], len(groups)


def _alone(scorer: Scorer, table: Table) -> Live | DuckscoreError:
    try:
        return scorer.score(table)
    except DuckscoreError as exc:
        return exc


@dataclass
class _Group:
    schema: pa.Schema
    sources: list[Any]
    query_ids: set[Any]
    members: list[int]


def _groups(tables: Sequence[Table]) -> list[list[int]]:
    """The tables' positions in groups that may share a statement, in order."""
    groups: list[_Group] = []
    alone: list[list[int]] = []
    for i, table in enumerate(tables):
        key = _key(table)
        if key is None:
            alone.append([i])
            continue
        sources, query_ids = key
        table = cast(pa.Table, table)
        renamable = _text(table.column("query_id"))
        for group in groups:
            if (
                group.schema.equals(table.schema)
                and group.sources == sources
                and (renamable or group.query_ids.isdisjoint(query_ids))
            ):
                group.query_ids |= query_ids
                group.members.append(i)
                break
        else:
            groups.append(_Group(table.schema, sources, query_ids, [i]))
    return [group.members for group in groups] + alone


def _key(table: Table) -> tuple[list[Any], set[Any]] | None:
    """The sources and the query ids of an Arrow table of hits, or None: scored alone (what
    is not an Arrow table with rows, query ids and sources, none of them null)."""
    if not isinstance(table, pa.Table) or table.num_rows == 0:
        return None
    if not {"query_id", "source"} <= set(table.column_names):
        return None
    ids, sources = table.column("query_id"), table.column("source")
    if ids.null_count or sources.null_count:
        return None
    return sorted(pc.unique(sources).to_pylist()), set(pc.unique(ids).to_pylist())


def _text(ids: pa.ChunkedArray[Any]) -> bool:
    return pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)


# a statement's query ids (as its lines name them) -> the part each is of, and the part's own id
# when the statement's is a renamed one
Owners = dict[str, tuple[int, str | None]]


def _tagged(parts: list[pa.Table]) -> tuple[list[pa.Table], Owners]:
    """The parts, their query ids made unique across them when they are not (text ids, each
    part's prefixed by its number: `_groups` puts integer ids that are in two parts apart), and
    whose each query id of the statement is."""
    ids = [pc.unique(part.column("query_id")).to_pylist() for part in parts]
    if len(set().union(*ids)) == sum(map(len, ids)):
        return parts, {str(q): (n, None) for n, own in enumerate(ids) for q in own}
    tagged, owners = [], Owners()
    for n, (part, own) in enumerate(zip(parts, ids, strict=True)):
        prefix = f"{n:05d}:"
        at = part.schema.get_field_index("query_id")
        field_ = part.schema.field(at)
        values: list[Any] = [prefix + str(q) for q in part.column(at).to_pylist()]
        renamed = pa.array(values, field_.type)
        tagged.append(part.set_column(at, field_, renamed))
        owners |= {prefix + str(q): (n, str(q)) for q in own}
    return tagged, owners


def _split(lines: list[dict[str, Any]], owners: Owners, parts: int) -> list[Live]:
    """The lines of each part, in the order of the statement (by query_id, as each alone),
    each renamed query id named back."""
    from .scorer import Live

    own: list[list[dict[str, Any]]] = [[] for _ in range(parts)]
    for line in lines:
        n, query_id = owners[str(line["query_id"])]
        if query_id is not None:
            line["query_id"] = query_id
        own[n].append(line)
    return [Live(contract) for contract in own]
