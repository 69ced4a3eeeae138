"""Seed 004's confidence API over HTTP (`duckscore serve --instincts-db STORE`): the instincts an
agent reads (GET /v1/instincts, GET /v1/instincts/{id}) and the events it reports (POST
/v1/instincts/events), on the store the CLI and the Python API use.

A DuckDB store admits one writer, and one process cannot hold it read-only and read-write at
once: the server runs its store calls one at a time (a lock), each in its own transaction, so two
event posts never lose an update — the second reads the first's committed scores. A PostgreSQL
store takes its own row locks (instincts/postgres.py), so its calls run side by side."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pandas as pd

from ..core.errors import InputError
from ..instincts import postgres
from ..instincts.reads import instinct_confidence
from ..instincts.store import ingest, top
from ..instincts.workspace import Store, open_workspace

T = TypeVar("T")
DEFAULT_LIMIT = 20


class InstinctService:
    """The store the server answers instinct requests from, and its policy's version."""

    def __init__(self, db: Store) -> None:
        self.db = db
        self._one_at_a_time = None if postgres.is_postgres(db) else threading.Lock()
        with self._turn(), open_workspace(db) as work:  # a missing store fails at start
            self.policy_version = work.policy.version

    @contextmanager
    def _turn(self) -> Iterator[None]:
        if self._one_at_a_time is None:
            yield
            return
        with self._one_at_a_time:
            yield

    def _call(self, work: Callable[[], T]) -> T:
        with self._turn():
            return work()

    def top(self, tier: str | None, limit: int) -> list[dict[str, Any]]:
        frame = self._call(lambda: top(self.db, tier, limit))
        return json.loads(frame.to_json(orient="records", force_ascii=False))  # type: ignore[no-any-return]

    def one(self, instinct_id: str) -> dict[str, Any] | None:
        return self._call(lambda: instinct_confidence(self.db, instinct_id))

    def ingest(self, events: list[dict[str, Any]]) -> dict[str, int]:
        frame = events_frame(events)
        counts = self._call(lambda: ingest(self.db, frame))
        return {k: counts[k] for k in ("events_applied", "events_skipped")}


def events_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The events of a request as the events input's table: a `signals` object as its JSON
    text (the column the files carry)."""
    if not rows:
        raise InputError("events: no rows (give one event or more)")
    return pd.DataFrame(
        [
            {**row, "signals": json.dumps(row["signals"])}
            if isinstance(row.get("signals"), dict)
            else row
            for row in rows
        ]
    )


def limit_of(given: str | None) -> int:
    if given is None:
        return DEFAULT_LIMIT
    if not given.isdigit() or int(given) < 1:
        raise InputError(f"limit: {given!r} is not an integer of 1 or more")
    return int(given)
