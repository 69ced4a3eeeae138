"""The scorer's warm path: what a request of a known shape costs once its SQL is in place.

DuckDB spends most of a small request parsing its 40 KB statement and checking the hits in seven
small queries. A lane keeps both in place, per thread and per shape of hits (the column names
and types DuckDB reads from them): a cursor of its own, a temp table the hits are copied into
(from the caller's object, registered under a name of ours), the log's views over that table,
one probe query (would `open_log` refuse these rows? which sources do they name?) and the
contract statement of each set of sources, all as views — parsed and checked once. A call
replaces the table's rows, asks the probe, and reads the contract view.

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

HITS_INPUT = "__live_input"  # the caller's hits, registered on a cursor for one statement
HITS_TABLE = "__live_hits"
PROBE_VIEW = "__live_probe"
SHAPES_PER_THREAD = 8
# the contract of a plan's hits, one JSON line a row (see json_lines)
ContractSQL = Callable[[Session, FusePlan], str]
Shape = tuple[tuple[str, str], ...]
log = logging.getLogger("duckscore.live")


@dataclass
class _Lane:
    """One shape of hits on one thread: its cursor, the plan of the shape, one contract view per
    set of sources."""

    cursor: duckdb.DuckDBPyConnection
    session: Session
    fuse_plan: FusePlan
    views: dict[tuple[str, ...], str] = field(default_factory=dict)


@dataclass
class _Thread:
    con: duckdb.DuckDBPyConnection  # the thread's own DuckDB instance
    describe: duckdb.DuckDBPyConnection  # reads the shape of hits
    watch: Watch
    lanes: OrderedDict[Shape, _Lane] = field(default_factory=OrderedDict)

    def close(self) -> None:
        for lane in self.lanes.values():
            lane.cursor.close()
        self.describe.close()
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
        shape = _shape(thread.describe, hits)
        if shape is None or shape not in thread.lanes:
            return None
        thread.lanes.move_to_end(shape)
        lane = thread.lanes[shape]
        started = time.perf_counter()
        lines = _read_contract(lane, hits)
        if isinstance(lines, tuple):
            self._add_view(lane, lines)  # a new set of sources: its view, outside the transaction
            found = _read_contract(lane, hits)
            lines = found if isinstance(found, list) else None
        if lines is not None:
            self._count(thread, (time.perf_counter() - started) * 1000)
        return lines

    def open(self, hits: Table) -> None:
        """A lane for the shape of `hits`, which the checked path has just scored."""
        thread = self._thread()
        shape = _shape(thread.describe, hits)
        if shape is None or shape in thread.lanes:
            return
        cursor = thread.con.cursor()
        try:
            with _registered(cursor, hits):
                cursor.execute(f"CREATE TEMP TABLE {HITS_TABLE} AS SELECT * FROM {HITS_INPUT}")
            session = Session(connection=cursor)
            opened, fuse_plan = open_log(
                session, cursor.table(HITS_TABLE), self._recipe, label="hits"
            )
            cursor.execute(f"CREATE TEMP VIEW {PROBE_VIEW} AS {log_probe(opened, fuse_plan)}")
            lane = _Lane(cursor, session, fuse_plan)
            _, sources = cursor.execute(f"SELECT * FROM {PROBE_VIEW}").fetchall()[0]
            self._add_view(lane, sources)
            cursor.execute(f"DELETE FROM {HITS_TABLE}")  # a call's rows live in its transaction
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
        lane.views[tuple(sources)] = view
        return view


def _read_contract(lane: _Lane, hits: Table) -> list[dict[str, Any]] | tuple[str, ...] | None:
    """In one transaction that is rolled back (the table is empty between calls, nothing is
    committed): the contract lines of `hits`; None when the probe finds a fault; the hits'
    sources, a tuple, when the lane has no view for them yet."""
    cursor = lane.cursor
    with _registered(cursor, hits):
        cursor.execute("BEGIN TRANSACTION")
        try:
            cursor.execute(f"INSERT INTO {HITS_TABLE} SELECT * FROM {HITS_INPUT}")
            broken, sources = cursor.execute(f"SELECT * FROM {PROBE_VIEW}").fetchall()[0]
            if broken:
                return None
            view = lane.views.get(tuple(sources))
            if view is None:
                return tuple(sources)
            return read_json_lines(cursor, f"SELECT * FROM {view}")
        finally:
            cursor.execute("ROLLBACK")


def json_lines_sql(query: str, key: str) -> str:
    """The rows of `query` as the JSON lines DuckDB writes for them (`COPY … TO contract.jsonl`
    and to_json serialise alike), ordered by `key`."""
    return f"SELECT to_json(c)::VARCHAR FROM ({query}) AS c ORDER BY {key}"


def read_json_lines(con: duckdb.DuckDBPyConnection, query: str) -> list[dict[str, Any]]:
    """The dicts of the JSON lines `query` gives (see json_lines_sql)."""
    return [json.loads(row[0]) for row in con.execute(query).fetchall()]


def _shape(describe: duckdb.DuckDBPyConnection, hits: Table) -> Shape | None:
    """The names and types of the columns of `hits`: an Arrow table's own (the scorer's usual
    input: no round trip), else those DuckDB reads; None for what it cannot scan here (the
    checked path says what)."""
    if isinstance(hits, pa.Table):
        return tuple((field.name, f"arrow {field.type}") for field in hits.schema)
    try:
        with _registered(describe, hits):
            described = describe.execute(f"DESCRIBE SELECT * FROM {HITS_INPUT}").fetchall()
    except duckdb.Error:
        return None
    return tuple((str(row[0]), str(row[1])) for row in described)


@contextmanager
def _registered(cursor: duckdb.DuckDBPyConnection, hits: Table) -> Iterator[None]:
    """`hits` readable as HITS_INPUT on `cursor` within the block (a view over the object, not
    a copy); duckdb.Error for an object DuckDB cannot scan."""
    cursor.register(HITS_INPUT, hits)
    try:
        yield
    finally:
        cursor.unregister(HITS_INPUT)
