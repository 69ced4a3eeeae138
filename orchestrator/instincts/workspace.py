"""Where an instinct command runs: the store (a DuckDB file, or a PostgreSQL database) opened,
its recorded policy, and the workspace its SQL runs on — the file itself, or an in-memory DuckDB
that PostgreSQL lends rows to (instincts/postgres.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb

from ..core.errors import DuckscoreError, InputError
from ..core.policy import policy_from_parameters
from ..core.render import lit, render
from ..core.session import Session
from . import postgres
from .policy import INSTINCT_POLICY, InstinctPolicy

T = TypeVar("T")
Store = Path | str  # a DuckDB database file, or a postgresql:// URL


@contextmanager
def open_store(
    db: Path, create: bool = False, wait_seconds: float = 10.0, read_only: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the store file (`read_only`: for commands that only read, so a store the
    user may not write can be read). Another process holding it: wait up to `wait_seconds`,
    then one clear error; the store is never opened twice for writing."""
    if not create and not db.is_file():
        raise InputError(
            f"--db {db}: no such store (create it with `duckscore instincts init --db {db}`)"
        )
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            con = duckdb.connect(str(db), read_only=read_only)
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise InputError(f"--db {db}: cannot open: {str(exc).splitlines()[0]}") from None
            if time.monotonic() >= deadline:
                holder = (
                    str(exc).split("(PID", 1)[1].split(")")[0].strip()
                    if "(PID" in str(exc)
                    else "?"
                )
                raise DuckscoreError(
                    f"--db {db}: the store is in use by another process (PID {holder}); "
                    f"waited {wait_seconds:g} s"
                ) from None
            time.sleep(0.2)
    try:
        con.execute("SET TimeZone = 'UTC'")
        yield con
    finally:
        con.close()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def shown(db: Store) -> str:
    """A store as messages name it: a PostgreSQL URL without its password."""
    return postgres.describe(str(db)) if postgres.is_postgres(db) else str(db)


@dataclass
class Workspace:
    """Where a command computes: the DuckDB store itself, or (`loan` set) an in-memory DuckDB
    that PostgreSQL lends the rows a command needs."""

    con: duckdb.DuckDBPyConnection
    policy: InstinctPolicy
    loan: postgres.Loan | None = None  # on PostgreSQL: what it lends, in which transaction

    def write(self, apply: Callable[[], T], lend: Callable[[postgres.Loan], None]) -> T:
        """`apply` in one transaction: on the file; or on PostgreSQL after `lend` took the
        locks and copied the rows, with its changes written back (retried after a conflict)."""
        loan = self.loan
        if loan is None:
            with transaction(self.con):
                return apply()

        def attempt() -> T:
            loan.clear()
            lend(loan)
            with transaction(self.con):
                result = apply()
            loan.write_back()
            return result

        return postgres.retrying(loan.pg, attempt)


@contextmanager
def open_workspace(db: Store, read_all: bool = False) -> Iterator[Workspace]:
    """The store's workspace; `read_all`: for reading (top, report) — a DuckDB file opened
    read-only, every row of a PostgreSQL store lent as of one snapshot."""
    if not postgres.is_postgres(db):
        with open_store(Path(db), read_only=read_all) as con:
            yield Workspace(con, store_policy(con, db))
        return
    dsn = str(db)
    with postgres.connect(dsn) as pg:
        record = postgres.stored_policy(pg, dsn)
        policy = policy_from_record(record, postgres.describe(dsn))
        con = postgres.workspace(render("instincts/schema.sql", policy=policy.parameters))
        try:
            loan = postgres.Loan(pg, con)
            if read_all:
                postgres.lend_snapshot(loan)
            yield Workspace(con, policy, loan)
        finally:
            con.close()


def store_policy(con: duckdb.DuckDBPyConnection, db: Store) -> InstinctPolicy:
    return policy_from_record(stored_record(con, f"--db {db}"), str(db))


def stored_record(con: duckdb.DuckDBPyConnection, label: str) -> str:
    """The policy record the DuckDB store was created with, as `init` wrote it."""
    raw = store_value(con, "policy") if has_table(con, "duckscore_store") else None
    if raw is None:
        raise InputError(
            f"{label}: not a duckscore instincts store (run `duckscore instincts init`)"
        )
    return raw


def policy_from_record(raw: str, where: str) -> InstinctPolicy:
    record = json.loads(raw)
    return InstinctPolicy.of(
        policy_from_parameters(
            INSTINCT_POLICY,
            record["instinct_policy_version"],
            record["parameters"],
            source=f"store {where}",
        )
    )


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = Session(connection=con).first_row(
        f"SELECT count(*) FROM duckdb_tables() WHERE table_name = {lit(name)}"
    )
    return bool(row and row[0])


def store_value(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    row = Session(connection=con).first_row(
        f"SELECT value FROM duckscore_store WHERE key = {lit(key)}"
    )
    return row[0] if row else None
