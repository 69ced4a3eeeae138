"""The scorer's warm path: what a request of a known shape costs once its SQL is in place.

DuckDB spends most of a small request parsing its 40 KB statement, binding and optimising it,
and checking the hits in seven small queries. A lane keeps all of it in place, per thread and
per shape of hits (the column names and Arrow types of the hits, as Arrow or as DuckDB reads
them): a cursor of its own, a source object the log's views scan, one probe query (would
`open_log` refuse these rows? which sources do they name?) and the contract statement of each
set of sources, each a view and a prepared statement of it — parsed, checked and planned once.
A call hands its hits to the source, executes the probe and then the contract statement.

DuckDB keeps a prepared statement's plan only when the statement scans no table (one that
scans a table, temporary or not, is bound and optimised again on every EXECUTE, measured with
DuckDB 2.0), so the hits are not copied into one: the source is a Python object whose Arrow
stream DuckDB asks for at each scan, and it streams the current call's hits.

A lane never says why hits are refused: when the probe finds a fault, the caller scores the hits
the checked way, whose error names the row and the column.

Each thread's lanes live on a DuckDB instance of the thread's own, replaced between two of its
calls when it is due (api/recycle.py): its lanes are closed and reopened lazily, by the next
call of their shape, so no call is cut short.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from ..core.inputs import Table
from ..core.render import ident
from ..core.session import Session
from ..fusion.log import log_probe, open_log
from ..fusion.recipe import FusePlan, plan
from ..fusion.recipe_view import Recipe
from .live_settings import LiveSettings
from .recycle import Watch

HITS_INPUT = "__live_input"  # hits that are not Arrow, registered to be read into Arrow
PROBE = "__live_probe"  # the probe's view, and its prepared statement
SHAPES_PER_THREAD = 8
# the contract of a plan's hits, one JSON line a row (see json_lines)
ContractSQL = Callable[[Session, FusePlan], str]
Shape = tuple[tuple[str, str], ...]
log = logging.getLogger("duckscore.live")


@dataclass
class _Lane:
    """One shape of hits on one thread: its cursor, the plan of the shape, the source its log's
    views scan, one contract statement per set of sources (a view and its prepared statement,
    of one name)."""

    cursor: duckdb.DuckDBPyConnection
    session: Session
    fuse_plan: FusePlan
    source: _Source
    views: dict[tuple[str, ...], str] = field(default_factory=dict)


@dataclass
class _Thread:
    con: duckdb.DuckDBPyConnection  # the thread's own DuckDB instance
    reader: duckdb.DuckDBPyConnection  # reads hits that are not Arrow into Arrow
    watch: Watch
    lanes: OrderedDict[Shape, _Lane] = field(default_factory=OrderedDict)

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.cursor.close()
        self.reader.close()
        self.con.close()


class Lanes:
    """The warm lanes of one Scorer, for every thread that calls it."""

    def __init__(
        self,
        connect: Callable[[], duckdb.DuckDBPyConnection],
        recipe: Recipe,
        contract_sql: ContractSQL,
        live: LiveSettings,
    ) -> None:
        self._connect = connect
        self._recipe = recipe
        self._contract_sql = contract_sql
        self._live = live
        self._threads: dict[int, _Thread] = {}
        self._lock = threading.Lock()
        self.instances_opened = 0
        self.instances_closed = 0
        self.recycles = 0

    def contract(self, hits: Table) -> list[dict[str, Any]] | None:
        """The contract lines of `hits`, or None when no lane has their shape yet or the probe
        finds rows `open_log` would refuse."""
        thread = self._thread()
        table = _as_arrow(thread.reader, hits)
        if table is None or (shape := _shape(table)) not in thread.lanes:
            return None
        thread.lanes.move_to_end(shape)
        lane = thread.lanes[shape]
        started = time.perf_counter()
        lines = _read_contract(lane, table)
        if isinstance(lines, tuple):
            self._add_view(lane, lines)  # a new set of sources: its statement, once
            found = _read_contract(lane, table)
            lines = found if isinstance(found, list) else None
        if lines is not None:
            self._count(thread, (time.perf_counter() - started) * 1000)
        return lines

    def open(self, hits: Table) -> None:
        """A lane for the shape of `hits`, which the checked path has just scored."""
        thread = self._thread()
        table = _as_arrow(thread.reader, hits)
        if table is None:
            return
        shape = _shape(table)
        if shape in thread.lanes:
            return
        cursor = thread.con.cursor()
        try:
            source = _Source(table)
            session = Session(connection=cursor)
            with source.holding(table):  # the lane keeps no request's rows
                opened, fuse_plan = open_log(session, source, self._recipe, label="hits")
                cursor.execute(f"CREATE TEMP VIEW {PROBE} AS {log_probe(opened, fuse_plan)}")
                cursor.execute(f"PREPARE {PROBE} AS SELECT * FROM {PROBE}")
                lane = _Lane(cursor, session, fuse_plan, source)
                _, sources = cursor.execute(f"EXECUTE {PROBE}").fetchall()[0]
                self._add_view(lane, sources)
        except BaseException:
            cursor.close()
            raise
        thread.lanes[shape] = lane
        if len(thread.lanes) > SHAPES_PER_THREAD:
            _, oldest = thread.lanes.popitem(last=False)
            oldest.cursor.close()

    def close(self) -> None:
        with self._lock:
            threads, self._threads = self._threads, {}
        for thread in threads.values():
            self._close(thread)

    @property
    def open_instances(self) -> int:
        """The DuckDB instances of the lanes that are open (one a calling thread at most)."""
        return self.instances_opened - self.instances_closed

    def _thread(self) -> _Thread:
        me = threading.get_ident()
        with self._lock:
            found = self._threads.get(me)
            if found is not None:
                return found
            self._forget_ended_threads()
            con = self._connect()
            self.instances_opened += 1
            watch = Watch(self._live.recycle_calls, self._live.recycle_drift)
            made = self._threads[me] = _Thread(con, con.cursor(), watch)
            return made

    def _count(self, thread: _Thread, ms: float) -> None:
        """A warm call of `thread` took `ms`: its instance is closed when it is due, and the
        thread's next call opens another."""
        reason = thread.watch.record(ms)
        if reason is None:
            return
        me = threading.get_ident()
        with self._lock:
            mine = self._threads.get(me) is thread  # else close() has taken it, and closes it
            if mine:
                del self._threads[me]
                self.recycles += 1
        if mine:
            log.debug("a lane's DuckDB instance recycled: %s", reason)
            self._close(thread)

    def _close(self, thread: _Thread) -> None:
        thread.close()
        with self._lock:
            self.instances_closed += 1

    def _forget_ended_threads(self) -> None:
        """(under the lock)"""
        alive = {thread.ident for thread in threading.enumerate()}
        for ident_ in [i for i in self._threads if i not in alive]:
            self._threads.pop(ident_).close()
            self.instances_closed += 1

    def _add_view(self, lane: _Lane, sources: Sequence[str]) -> str:
        """The contract view of the lane's hits with these sources, created once."""
        known = lane.fuse_plan
        fuse_plan = plan(
            self._recipe, list(sources), known.has_rank, known.log_view, known.has_snippet
        )
        view = f"__live_contract_{len(lane.views)}"
        statement = self._contract_sql(lane.session, fuse_plan)
        lane.cursor.execute(f"CREATE TEMP VIEW {ident(view)} AS {statement}")
        lane.cursor.execute(f"PREPARE {ident(view)} AS SELECT * FROM {ident(view)}")
        lane.views[tuple(sources)] = view
        return view


def _read_contract(lane: _Lane, hits: pa.Table) -> list[dict[str, Any]] | tuple[str, ...] | None:
    """The contract lines of `hits`, read through the lane's prepared statements (whose plans
    DuckDB keeps: they scan the lane's source, not a table); None when the probe finds a fault;
    the hits' sources, a tuple, when the lane has no statement for them yet."""
    cursor = lane.cursor
    with lane.source.holding(hits):
        broken, sources = cursor.execute(f"EXECUTE {PROBE}").fetchall()[0]
        if broken:
            return None
        view = lane.views.get(tuple(sources))
        if view is None:
            return tuple(sources)
        return read_json_lines(cursor, f"EXECUTE {ident(view)}")


def json_lines_sql(query: str, key: str) -> str:
    """The rows of `query` as the JSON lines DuckDB writes for them (`COPY … TO contract.jsonl`
    and to_json serialise alike), ordered by `key`."""
    return f"SELECT to_json(c)::VARCHAR FROM ({query}) AS c ORDER BY {key}"


def read_json_lines(con: duckdb.DuckDBPyConnection, query: str) -> list[dict[str, Any]]:
    """The dicts of the JSON lines `query` gives (see json_lines_sql)."""
    return [json.loads(row[0]) for row in con.execute(query).fetchall()]


def _shape(table: pa.Table) -> Shape:
    return tuple((field.name, str(field.type)) for field in table.schema)


def _as_arrow(reader: duckdb.DuckDBPyConnection, hits: Table) -> pa.Table | None:
    """`hits` as an Arrow table: an Arrow table as it is (the scorer's usual input), else as
    DuckDB reads it; None for what it cannot scan here (the checked path says what)."""
    if isinstance(hits, pa.Table):
        return hits
    try:
        with _registered(reader, hits):
            table: pa.Table = reader.sql(f"SELECT * FROM {HITS_INPUT}").to_arrow_table()
    except duckdb.Error:
        return None
    return table


class _Source:
    """The hits of the lane's current call, for DuckDB to scan: an Arrow stream made anew at
    each scan, so a prepared statement over it reads every call's rows through one plan."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table.slice(0, 0)  # between calls: no rows, the shape's schema

    @contextmanager
    def holding(self, table: pa.Table) -> Iterator[None]:
        """The source streams `table` within the block, and no rows after it."""
        self.table = table
        try:
            yield
        finally:
            self.table = table.slice(0, 0)

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        table: Any = self.table  # (pyarrow's stubs leave the PyCapsule protocol untyped)
        return table.__arrow_c_stream__(requested_schema)


@contextmanager
def _registered(cursor: duckdb.DuckDBPyConnection, hits: Table) -> Iterator[None]:
    """`hits` readable as HITS_INPUT on `cursor` within the block (a view over the object, not
    a copy); duckdb.Error for an object DuckDB cannot scan."""
    cursor.register(HITS_INPUT, hits)
    try:
        yield
    finally:
        cursor.unregister(HITS_INPUT)
