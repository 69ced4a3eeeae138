"""Engines the transpiled SQL runs on in the tests: a throwaway PostgreSQL server (Debian's
postgresql package, started here as its own user in a temporary folder, socket only) and a
local Spark session; DuckDB tables copied into them with the same column types; rows read back
as plain Python values, so three engines' answers compare with one function."""

from __future__ import annotations

import glob
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

POSTGRES_TYPES = {
    "VARCHAR": "text",
    "DOUBLE": "double precision",
    "BIGINT": "bigint",
    "INTEGER": "integer",
    "BOOLEAN": "boolean",
    "VARCHAR[]": "text[]",
}


def postgres_bin() -> Path | None:
    """The folder of initdb and pg_ctl (Debian keeps them off PATH), or None without PostgreSQL."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


@dataclass
class Postgres:
    connection: Any  # psycopg.Connection

    def load(self, con: duckdb.DuckDBPyConnection, table: str) -> None:
        """Copy the DuckDB table or view `table` into a PostgreSQL table of the same name and types."""
        columns = con.execute(f"DESCRIBE {table}").fetchall()
        definition = ", ".join(f'"{name}" {POSTGRES_TYPES[kind]}' for name, kind, *_ in columns)
        self.connection.execute(f'DROP TABLE IF EXISTS "{table}"')
        self.connection.execute(f'CREATE TABLE "{table}" ({definition})')
        with self.connection.cursor().copy(f'COPY "{table}" FROM STDIN') as copy:
            for row in con.execute(f"FROM {table}").fetchall():
                copy.write_row(row)

    def rows(self, sql: str) -> list[dict[str, Any]]:
        cursor = self.connection.execute(sql)
        names = [c.name for c in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


@contextmanager
def postgres_server(settings: dict[str, str] | None = None) -> Iterator[Postgres]:
    """A PostgreSQL server in a new temporary folder (removed afterwards): byte-order collation
    (as DuckDB compares text), UTF-8, run as the `postgres` user when the tests run as root (the
    server refuses root; pytest's own temporary folders are closed to other users); `settings`
    are passed to the server as `-c name=value`."""
    import psycopg

    bin_dir = postgres_bin()
    assert bin_dir is not None, "PostgreSQL is not installed (Debian: apt-get install postgresql)"
    folder = Path(tempfile.mkdtemp(prefix="duckscore-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data = folder / "data"
    _run(
        [
            *as_user,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "duckscore",
            "-E",
            "UTF8",
            "--lc-collate=C",
            "--lc-ctype=C.UTF-8",
        ]
    )
    extra = "".join(f" -c {name}={value}" for name, value in (settings or {}).items())
    options = f"-k {folder} -c listen_addresses='' -F{extra}"
    _run(
        [
            *as_user,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(folder / "server.log"),
            "-w",
            "start",
        ]
    )
    try:
        with psycopg.connect(
            host=str(folder), dbname="postgres", user="duckscore", autocommit=True
        ) as conn:
            yield Postgres(conn)
    finally:
        subprocess.run(
            [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {(done.stderr or done.stdout).strip()}")


def spark_rows(
    spark: Any, con: duckdb.DuckDBPyConnection, tables: list[str], sql: str
) -> list[dict[str, Any]]:
    """Register the DuckDB tables as Spark temp views (through Arrow, same types), run `sql`."""
    for table in tables:
        spark.createDataFrame(con.sql(f"FROM {table}").to_arrow_table()).createOrReplaceTempView(
            table
        )
    return spark.sql(sql).toArrow().to_pylist()


def duck_rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [c[0] for c in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def plain(value: Any) -> Any:
    """One engine-neutral form: Decimal → float, tuples → lists, nested values recursively."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def same(a: Any, b: Any, rel: float = 1e-9, abs_: float = 1e-12) -> bool:
    a, b = plain(a), plain(b)
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or isinstance(a, (str, bool)) or isinstance(b, (str, bool)):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel, abs_) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rel, abs_) for x, y in zip(a, b))
    return a == b


def first_difference(
    expected: list[dict[str, Any]], actual: list[dict[str, Any]], key: tuple[str, ...]
) -> str | None:
    """None when both row sets match (by `key`, every column within tolerance), else the first difference."""
    if len(expected) != len(actual):
        return f"{len(actual)} rows, expected {len(expected)}"
    by_key = {tuple(r[k] for k in key): r for r in actual}
    for want in expected:
        k = tuple(want[c] for c in key)
        got = by_key.get(k)
        if got is None:
            return f"row {k} missing"
        if got == want:
            continue
        if set(got) != set(want):
            return f"columns {sorted(got)} != {sorted(want)}"
        for column, value in want.items():
            if not same(value, got[column]):
                return f"row {k} column {column}: {got[column]!r} != {value!r}"
    return None
