"""The instinct store on PostgreSQL (issue 25): the seed's schema as migration 1, many processes
ingesting at once equal to a serial replay, two decay schedulers applying the week once, a
DuckDB store migrated with its history, and failures as one line naming the server.

The other store tests (test_store.py, test_report.py) run on both backends."""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.errors import DuckscoreError, InputError
from duckscore.instincts.policy import TRIGGERS
from duckscore.instincts.store import decay, ingest, init_store, migrate_store
from duckscore.instincts.workspace import open_workspace

from ..helpers import need_module
from .conftest import new_database
from .test_store import START, USER, ids, new_instincts

pytestmark = [pytest.mark.postgres, pytest.mark.xdist_group("instincts-postgres")]

TYPES = [t for t in TRIGGERS if t != "weekly_decay"]  # what an event may be


def stored_rows(db: str) -> dict[str, list[tuple]]:
    """Every table as text, through the workspace (the composite as DuckDB computes it)."""
    with open_workspace(db, read_all=True) as work:
        return {
            table: work.con.execute(
                f"SELECT COLUMNS(* EXCLUDE ({skip}))::VARCHAR FROM {table} ORDER BY ALL"
            ).fetchall()
            for table, skip in (
                ("instincts", "created_at"),
                ("confidence_history", "id"),
                ("instinct_applications", "id"),
                ("instinct_evidence", "id"),
                ("decay_runs", "ran_at"),
            )
        }


@pytest.fixture(scope="module")
def psycopg() -> ModuleType:
    return need_module("psycopg")


def test_init_creates_the_seeds_schema_by_migration(pg_server, psycopg: ModuleType) -> None:
    db = new_database(pg_server)
    assert init_store(db) == "created"
    assert init_store(db) == "up to date"
    with psycopg.connect(db) as pg:
        migrations = pg.execute("SELECT version, description FROM duckscore_migrations").fetchall()
        generated = pg.execute(
            "SELECT attgenerated FROM pg_attribute WHERE attrelid = 'instincts'::regclass "
            "AND attname = 'composite'"
        ).fetchone()
        cascades = pg.execute(
            "SELECT conrelid::regclass::text FROM pg_constraint WHERE contype = 'f' "
            "AND confrelid = 'instincts'::regclass AND confdeltype = 'c' ORDER BY 1"
        ).fetchall()
        indexes = dict(
            pg.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'instincts'"
            ).fetchall()
        )
    assert migrations == [(1, "seed 004's schema, duckscore's bookkeeping tables")]
    assert generated == ("s",)  # STORED, as the seed writes it
    assert [c[0] for c in cascades] == [
        "confidence_history",
        "instinct_applications",
        "instinct_evidence",
    ]
    assert "WHERE ((status)::text = 'active'::text)" in indexes["idx_instincts_status"]
    assert "composite DESC" in indexes["idx_instincts_composite"]
    assert "idx_instincts_user_domain" in indexes


WORKER = textwrap.dedent("""
    import datetime as dt, sys
    import pandas as pd
    from duckscore.instincts.store import ingest
    events = pd.read_parquet(sys.argv[2])
    now = dt.datetime(2026, 2, 2, tzinfo=dt.timezone.utc)
    for batch, part in events.groupby("batch", sort=True):
        ingest(sys.argv[1], part.drop(columns="batch"), now=now)
    print("done", flush=True)
""")


@pytest.mark.slow
def test_eight_processes_ingesting_at_once_equal_a_serial_replay(
    pg_server, psycopg: ModuleType, tmp_path: Path
) -> None:
    """8 processes × 2,000 events on 50 shared instincts (each also re-sending 100 events of
    another process), four batches each: no update lost, none applied twice — the store equals a
    DuckDB store that ingests the same batches one at a time in the order PostgreSQL committed
    them (per instinct, the order its row locks were taken)."""
    db = new_database(pg_server)
    init_store(db)
    names = ids(50)
    ingest(db, new_instincts=new_instincts(names), now=START)
    rng = random.Random(25)
    per_process = []
    for p in range(8):
        rows = [
            {
                "event_id": f"p{p}-{i:04d}",
                "instinct_id": rng.choice(names),
                "event_type": rng.choice(TYPES),
                "occurred_at": pd.Timestamp("2026-01-06")
                + pd.Timedelta(minutes=rng.randrange(40_000)),
            }
            for i in range(2000)
        ]
        per_process.append(pd.DataFrame(rows))
    procs = []
    for p, frame in enumerate(per_process):
        resent = per_process[(p + 1) % 8].iloc[:100]  # a neighbour's events, sent again
        mine = pd.concat([frame, resent], ignore_index=True)
        mine["batch"] = [i % 4 for i in range(len(mine))]
        path = tmp_path / f"events{p}.parquet"
        mine.to_parquet(path)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, db, str(path)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0 and out.strip() == "done", err
    with psycopg.connect(db) as pg:
        order = pg.execute(
            "SELECT event_id, pg_xact_commit_timestamp(xmin) AS committed FROM ingested_events"
        ).fetchall()
        composites = pg.execute(
            "SELECT id::text, composite::text FROM instincts ORDER BY id"
        ).fetchall()
    events = pd.concat(per_process, ignore_index=True)
    applied = pd.DataFrame(order, columns=["event_id", "committed"])
    assert len(applied) == len(events) == 16_000  # every event once, the re-sent ones too
    batches = events.merge(applied, on="event_id").groupby("committed", sort=True)
    assert batches.ngroups >= 32  # 32 ingests, some events of each re-sent ones skipped

    serial = tmp_path / "serial.duckdb"
    init_store(serial)
    ingest(serial, new_instincts=new_instincts(names), now=START)
    now = dt.datetime(2026, 2, 2, tzinfo=dt.UTC)
    for _, batch in batches:
        ingest(serial, batch.drop(columns="committed"), now=now)
    concurrent, replayed = stored_rows(db), stored_rows(str(serial))
    for table in concurrent:
        assert concurrent[table] == replayed[table], table
    assert len(concurrent["confidence_history"]) == 16_000
    # PostgreSQL's stored composite equals the DuckDB store's
    with open_workspace(serial, read_all=True) as work:
        expected = work.con.execute(
            "SELECT CAST(id AS VARCHAR), CAST(composite AS VARCHAR) FROM instincts ORDER BY id"
        ).fetchall()
    assert composites == expected


DECAY_JOB = textwrap.dedent("""
    import datetime as dt, sys, time
    from pathlib import Path
    from duckscore.instincts.store import decay
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.01)
    result = decay(sys.argv[1], dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc))
    print(result.already_ran, result.decayed, flush=True)
""")


def test_two_decay_schedulers_started_together_apply_the_week_once(
    pg_server, tmp_path: Path
) -> None:
    db = new_database(pg_server)
    init_store(db)
    ingest(db, new_instincts=new_instincts(ids(5)), now=START)
    go = tmp_path / "go"
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", DECAY_JOB, db, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    go.touch()
    said = sorted(job.communicate(timeout=120)[0].strip() for job in jobs)
    assert said == ["False 5", "True 0"]  # one applied it, the other waited and found the week
    rows = stored_rows(db)
    assert len(rows["decay_runs"]) == 1
    assert sum(1 for r in rows["confidence_history"] if r[5] == "weekly_decay") == 5


def test_a_duckdb_store_migrates_with_its_history(pg_server, tmp_path: Path) -> None:
    source = tmp_path / "store.duckdb"
    init_store(source)
    names = ids(3)
    ingest(source, new_instincts=new_instincts(names), now=START)
    events = pd.DataFrame(
        {
            "event_id": ["e1", "e2", "e3"],
            "instinct_id": names,
            "event_type": ["applied_successfully", "user_corrected", "pattern_observed_again"],
            "occurred_at": pd.to_datetime(["2026-01-06", "2026-01-07", "2026-01-08"]),
        }
    )
    ingest(source, events, now=START)
    decay(source, START + dt.timedelta(weeks=3))
    target = new_database(pg_server)
    result = CliRunner().invoke(
        cli, ["instincts", "migrate", "--from", str(source), "--to", target]
    )
    assert (result.exit_code, result.stdout) == (0, ""), result.output
    assert result.stderr.startswith(f"duckscore: {source} -> postgresql://")  # a message
    assert "3 instincts" in result.stderr and "1 decay_runs" in result.stderr
    assert "password" not in result.output
    assert stored_rows(target) == stored_rows(str(source))
    assert ingest(target, events)["events_skipped"] == 3  # its ingested event ids came along
    with pytest.raises(InputError, match="already holds instincts; migrate copies into a new"):
        migrate_store(source, target)


def test_failures_are_one_line_naming_the_server(pg_server, tmp_path: Path) -> None:
    socket = pg_server.connection.info.host
    missing = f"postgresql://duckscore:secret@/no_such_db?host={socket}"
    result = CliRunner().invoke(cli, ["-q", "instincts", "top", "--db", missing])
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "secret" not in lines[0]
    assert lines[0].startswith(f"duckscore: error: --db postgresql://duckscore@{socket}/no_such_db")
    assert "no_such_db" in lines[0] and "does not exist" in lines[0]
    # a role that may not create tables
    pg_server.connection.execute("CREATE ROLE reader LOGIN")
    db = new_database(pg_server)
    name = db.split("/")[3].split("?")[0]
    pg_server.connection.execute(f'REVOKE ALL ON DATABASE "{name}" FROM PUBLIC')
    pg_server.connection.execute(f'GRANT CONNECT ON DATABASE "{name}" TO reader')
    as_reader = db.replace("duckscore@", "reader@")
    with pytest.raises(DuckscoreError, match=r"^--db postgresql://reader@.*: permission denied"):
        init_store(as_reader)
    with pytest.raises(DuckscoreError, match="not a duckscore instincts store"):
        ingest(new_database(pg_server), new_instincts=new_instincts([USER]))
