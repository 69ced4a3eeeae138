"""The instinct store on PostgreSQL (issue 25): many agent processes writing at once.

One set of formulas: every command computes in DuckDB exactly as on a DuckDB store. A PostgreSQL
store lends the rows a command reads to an in-memory DuckDB copy of the store's tables (the
*workspace*), the command runs there unchanged, and what it changed is written back — all inside
one PostgreSQL transaction that first takes the locks the command needs:

- ingest: the instincts it touches, `SELECT … ORDER BY id FOR UPDATE` (in id order: two ingests
  cannot deadlock on them), so no update is lost; an event id another process committed meanwhile
  makes the insert into `ingested_events` fail on its key, and the transaction is retried, so no
  event is applied twice;
- recompute: `LOCK TABLE instincts IN SHARE ROW EXCLUSIVE MODE` (readers go on, writers wait);
- decay: the advisory lock DECAY_LOCK, then the same table lock: a second scheduler waits, then
  finds the week in `decay_runs` and changes nothing;
- init and migrate: the advisory lock INIT_LOCK; init applies the migrations the store lacks
  (1: sql/instincts/schema.sql rendered for PostgreSQL), recorded in duckscore_migrations.

A transaction that fails on a serialization failure, a deadlock or a key another writer took is
rolled back and retried (up to RETRIES times, with a growing random pause); a killed process's
transaction is rolled back by the server, so the store stays as it was.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import duckdb

from ..common.extras import needs_extra
from ..core.errors import DuckscoreError
from ..core.render import RenderedSQL, ident, render

T = TypeVar("T")

SCHEMES = ("postgresql://", "postgres://")
RETRIES = 50
DECAY_LOCK = 4_004_001  # pg_advisory_xact_lock keys: seed 004's decay job, and init/migrate
INIT_LOCK = 4_004_002
# every store table and its key, parents first (write-back order)
TABLE_KEYS = {
    "duckscore_store": "key",
    "instincts": "id",
    "instinct_applications": "id",
    "instinct_evidence": "id",
    "confidence_history": "id",
    "ingested_events": "event_id",
    "decay_runs": "week_start",
}
GENERATED = {"instincts": ("composite",)}  # computed by each database, never copied
MIGRATIONS = {1: "seed 004's schema, duckscore's bookkeeping tables"}


def is_postgres(db: object) -> bool:
    return str(db).startswith(SCHEMES)


def describe(dsn: str) -> str:
    """The server and database of a DSN, without its password."""
    psycopg = _psycopg()
    try:
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgresql://(malformed)"
    host = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise DuckscoreError(needs_extra("a PostgreSQL store", "postgres")) from None
    return psycopg


@contextmanager
def connect(dsn: str) -> Iterator[Any]:
    """A connection in UTC; a failure to connect is one line naming the server."""
    psycopg = _psycopg()
    try:
        connection = psycopg.connect(dsn, autocommit=False)
    except psycopg.Error as exc:
        raise DuckscoreError(f"--db {describe(dsn)}: cannot connect: {_reason(exc)}") from None
    try:
        connection.execute("SET TIME ZONE 'UTC'")
        connection.commit()
        yield connection
    except psycopg.Error as exc:  # a permission, a missing table: one line naming the server
        raise DuckscoreError(f"--db {describe(dsn)}: {_reason(exc)}") from None
    finally:
        connection.close()


def _reason(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def workspace(ddl: RenderedSQL) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the store's tables (the DuckDB store's DDL), in UTC."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for statement in ddl.statements:
        con.execute(statement)
    return con


_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {}  # the same for every policy's DDL


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> tuple[tuple[str, str], ...]:
    """A store table's columns and DuckDB types, the generated ones aside."""
    if table not in _COLUMNS:
        skip = GENERATED.get(table, ())
        _COLUMNS[table] = tuple(
            (name, kind)
            for name, kind, *_ in con.execute(f"DESCRIBE {ident(table)}").fetchall()
            if name not in skip
        )
    return _COLUMNS[table]


@dataclass
class Loan:
    """The rows PostgreSQL lent a workspace in one transaction, and what it knows to write back."""

    pg: Any
    con: duckdb.DuckDBPyConnection
    lent: set[str] = field(default_factory=set)

    def lend(
        self, table: str, where: str = "TRUE", params: Sequence[Any] = (), lock: str = ""
    ) -> None:
        """Copy PostgreSQL's rows of `table` (those `where` selects; `lock`: e.g. FOR UPDATE)
        into the workspace, and keep a copy as `lent_<table>` to compare against."""
        columns = _columns(self.con, table)
        listed = ", ".join(f"{ident(name)}::text" for name, _ in columns)
        key = ident(TABLE_KEYS[table])
        rows = self.pg.execute(
            f"SELECT {listed} FROM {ident(table)} WHERE {where} ORDER BY {key} {lock}", params
        ).fetchall()
        if rows:
            import pandas as pd  # (the store's commands on DuckDB never import it)

            names = [name for name, _ in columns]
            self.con.register("lent_rows", pd.DataFrame(rows, columns=names, dtype=object))
            try:
                casts = ", ".join(f"CAST({ident(n)} AS {kind})" for n, kind in columns)
                self.con.execute(
                    f"INSERT INTO {ident(table)} ({', '.join(map(ident, names))}) "
                    f"SELECT {casts} FROM lent_rows"
                )
            finally:
                self.con.unregister("lent_rows")
        self._keep(table)

    def lend_nothing(self, tables: Sequence[str]) -> None:
        """Tables the command only appends to (or copies whole): lent empty, so every row in
        them is new."""
        for table in tables:
            self._keep(table, empty=True)

    def _keep(self, table: str, empty: bool = False) -> None:
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE {ident('lent_' + table)} AS FROM {ident(table)}"
            + (" LIMIT 0" if empty else "")
        )
        self.lent.add(table)

    def clear(self) -> None:
        """The workspace emptied for another attempt."""
        for table in TABLE_KEYS:
            self.con.execute(f"DELETE FROM {ident(table)}")
        self.lent.clear()

    def write_back(self) -> None:
        """What the command changed in the workspace, applied to PostgreSQL: new rows inserted,
        changed rows updated (by key), deleted rows deleted (children by ON DELETE CASCADE)."""
        deleted: dict[str, list[str]] = {}
        for table, key in TABLE_KEYS.items():
            if table not in self.lent:
                continue
            columns = [name for name, _ in _columns(self.con, table)]
            as_text = ", ".join(f"CAST({ident(n)} AS VARCHAR)" for n in columns)
            lent, now = ident("lent_" + table), ident(table)
            changed = self.con.execute(
                f"SELECT {as_text} FROM {now} EXCEPT SELECT {as_text} FROM {lent}"
            ).fetchall()
            lent_keys = {
                row[0]
                for row in self.con.execute(
                    f"SELECT CAST({ident(key)} AS VARCHAR) FROM {lent}"
                ).fetchall()
            }
            position = columns.index(key)
            _copy_rows(
                self.pg, table, columns, [r for r in changed if r[position] not in lent_keys]
            )
            updated = [r for r in changed if r[position] in lent_keys]
            if updated:
                _update_rows(self.pg, table, key, columns, updated)
            if lent_keys:
                deleted[table] = [
                    row[0]
                    for row in self.con.execute(
                        f"SELECT CAST({ident(key)} AS VARCHAR) FROM {lent} "
                        f"EXCEPT SELECT CAST({ident(key)} AS VARCHAR) FROM {now}"
                    ).fetchall()
                ]
        for table, keys in reversed(list(deleted.items())):
            if keys:
                self.pg.execute(
                    f"DELETE FROM {ident(table)} WHERE {ident(TABLE_KEYS[table])}::text = ANY(%s)",
                    [keys],
                )


def _copy_rows(pg: Any, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    listed = ", ".join(map(ident, columns))
    with pg.cursor().copy(f"COPY {ident(table)} ({listed}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _update_rows(
    pg: Any, table: str, key: str, columns: list[str], rows: list[tuple[Any, ...]]
) -> None:
    staged = "duckscore_changed_" + table
    listed = ", ".join(map(ident, columns))
    pg.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {ident(staged)} ON COMMIT DROP AS "
        f"SELECT {listed} FROM {ident(table)} WITH NO DATA"
    )
    pg.execute(f"TRUNCATE {ident(staged)}")
    _copy_rows(pg, staged, columns, rows)
    assignments = ", ".join(f"{ident(c)} = s.{ident(c)}" for c in columns if c != key)
    pg.execute(
        f"UPDATE {ident(table)} AS t SET {assignments} FROM {ident(staged)} AS s "
        f"WHERE t.{ident(key)} = s.{ident(key)}"
    )


def retrying(pg: Any, attempt: Callable[[], T]) -> T:
    """`attempt` in a transaction, committed; retried after a conflict with another writer."""
    psycopg = _psycopg()
    conflicts = (
        psycopg.errors.SerializationFailure,
        psycopg.errors.DeadlockDetected,
        psycopg.errors.UniqueViolation,
    )
    for tries in range(1, RETRIES + 1):
        try:
            result = attempt()
            pg.commit()
            return result
        except conflicts:
            pg.rollback()
            if tries == RETRIES:
                raise
            time.sleep(random.uniform(0, 0.005 * tries))
        except BaseException:
            pg.rollback()
            raise
    raise AssertionError("unreachable")


def stored_policy(pg: Any, dsn: str) -> str:
    """The policy record a store was created with (`instincts init`)."""
    exists = pg.execute("SELECT to_regclass('duckscore_store') IS NOT NULL").fetchone()[0]
    row = (
        pg.execute("SELECT value FROM duckscore_store WHERE key = 'policy'").fetchone()
        if exists
        else None
    )
    pg.rollback()
    if row is None:
        raise DuckscoreError(
            f"--db {describe(dsn)}: not a duckscore instincts store "
            "(run `duckscore instincts init`)"
        )
    return str(row[0])


def lend_snapshot(loan: Loan) -> None:
    """Every row of the store, as of one snapshot (read-only)."""
    loan.pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
    for table in TABLE_KEYS:
        loan.lend(table)
    loan.pg.rollback()


@dataclass(frozen=True)
class Migration:
    version: int
    description: str


def migrate_schema(pg: Any, policy_parameters: Mapping[str, Any]) -> list[Migration]:
    """Apply the migrations the store lacks, each recorded in duckscore_migrations."""
    pg.execute(
        "CREATE TABLE IF NOT EXISTS duckscore_migrations (version INTEGER PRIMARY KEY, "
        "description TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    done = {row[0] for row in pg.execute("SELECT version FROM duckscore_migrations").fetchall()}
    applied = []
    for version, description in MIGRATIONS.items():
        if version in done:
            continue
        ddl = render("instincts/schema.sql", policy=policy_parameters, postgres=True)
        for statement in ddl.statements:
            pg.execute(statement)
        pg.execute(
            "INSERT INTO duckscore_migrations (version, description) VALUES (%s, %s)",
            [version, description],
        )
        applied.append(Migration(version, description))
    return applied
