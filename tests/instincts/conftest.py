"""The two store backends the instinct tests run on: a DuckDB file, and a database on a
throwaway PostgreSQL server (started once per test worker; the PostgreSQL cases run on one
worker). Without PostgreSQL its cases are skipped, except in CI."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ..engines.warehouses import Postgres, postgres_bin, postgres_server
from ..helpers import need, need_module

BACKENDS = [
    pytest.param("duckdb"),
    pytest.param(
        "postgres", marks=[pytest.mark.postgres, pytest.mark.xdist_group("instincts-postgres")]
    ),
]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Postgres]:
    need(postgres_bin() is not None, "PostgreSQL")
    need_module("psycopg")
    # commit timestamps: the concurrency test replays batches in the order they committed
    with postgres_server(settings={"track_commit_timestamp": "on"}) as server:
        yield server


def new_database(server: Postgres) -> str:
    """A new, empty database on the server, as a postgresql:// URL."""
    name = f"store_{uuid.uuid4().hex[:16]}"
    server.connection.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql://duckscore@/{name}?host={server.connection.info.host}"


def location(backend: str, folder: Path, request: pytest.FixtureRequest) -> Path | str:
    if backend == "duckdb":
        return folder / f"store_{uuid.uuid4().hex[:8]}.duckdb"
    return new_database(request.getfixturevalue("pg_server"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_location(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[], Path | str]:
    """A new store location (not yet initialised) on the test's backend, one per call."""
    return lambda: location(backend, tmp_path, request)
