"""The seed-004 store as a user runs it: init, ingest, recompute, the weekly decay simulated over
months against a plain-Python model of the seed's job, interruption and concurrency.

The decay model below is written from the seed's three SQL statements (with Decimal, like the
store's DECIMAL(4,3)), not from duckscore's code.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.errors import DuckscoreError, InputError
from duckscore.instincts.store import decay, ingest, init_store, recompute, top
from duckscore.instincts.workspace import Store, open_store, open_workspace

USER = str(uuid.UUID(int=10**6))
START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)  # a Monday


def ids(n: int) -> list[str]:
    return [str(uuid.UUID(int=i + 1)) for i in range(n)]


def new_instincts(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": names,
            "trigger_text": [f"when {n[-4:]}" for n in names],
            "action_text": ["act"] * len(names),
            "domain": ["code"] * len(names),
            "user_id": [USER] * len(names),
        }
    )


def events(rows: list[tuple[str, str, str, dt.datetime]]) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["event_id", "instinct_id", "event_type", "occurred_at"]
    ).assign(
        occurred_at=lambda f: pd.to_datetime(f["occurred_at"].map(lambda t: t.replace(tzinfo=None)))
    )


def store(location: Callable[[], Store]) -> Store:
    db = location()
    assert init_store(db) == "created"
    return db


def snapshot(db: Store) -> dict[str, list[tuple]]:
    with open_workspace(db, read_all=True) as work:
        con = work.con
        # every column as text (TIMESTAMPTZ values would need pytz in Python); random ids aside
        return {
            table: con.execute(
                f"SELECT COLUMNS(* EXCLUDE ({skip}))::VARCHAR FROM {table} ORDER BY ALL"
            ).fetchall()
            for table, skip in (
                ("instincts", "created_at"),
                ("confidence_history", "id"),
                ("decay_runs", "ran_at"),
                ("instinct_evidence", "id"),
            )
        }


def test_init_is_idempotent_and_bound_to_its_policy(store_location, tmp_path: Path) -> None:
    db = store(store_location)
    assert init_store(db) == "up to date"
    other = tmp_path / "other.yaml"
    text = (Path(__file__).parents[2] / "sql/instincts/policies/instinct_v1.yaml").read_text()
    other.write_text(
        text.replace("instinct_v1", "instinct_x").replace(
            "frequency: 0.35, effectiveness: 0.40", "frequency: 0.40, effectiveness: 0.35"
        )
    )
    with pytest.raises(DuckscoreError, match="created with another policy"):
        init_store(db, str(other))


@pytest.mark.parametrize("name", ["store.parquet", "store.CSV", "store.jsonl"])
def test_a_store_named_like_a_data_file_is_refused(name: str, tmp_path: Path) -> None:
    # `instincts init --db x.parquet` used to say "created" for a file other tools read as Parquet
    with pytest.raises(InputError, match=r"not a \.\w+ data file; give it a name such as"):
        init_store(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_ingest_applies_rules_in_event_order_and_skips_what_it_has_seen(
    store_location, tmp_path: Path
) -> None:
    db = store(store_location)
    [a] = ids(1)
    day = dt.timedelta(days=1)
    rows = [
        ("e2", a, "pattern_contradicted", START + 2 * day),
        ("e1", a, "causal_link_confirmed", START + day),
        ("e3", a, "applied_successfully", START + 3 * day),
        ("e4", a, "user_corrected", START + 4 * day),
    ]
    assert ingest(db, events(rows), new_instincts([a]), now=START) == {
        "instincts_added": 1,
        "events_applied": 4,
        "events_skipped": 0,
    }
    with open_workspace(db, read_all=True) as work:
        con = work.con
        history = con.execute(
            "SELECT reason, CAST(freq_score AS VARCHAR), CAST(eff_score AS VARCHAR), "
            "CAST(human_score AS VARCHAR) FROM confidence_history ORDER BY recorded_at"
        ).fetchall()
        counts = con.execute(
            "SELECT observation_count, contradiction_count, application_count, success_count "
            "FROM instincts"
        ).fetchone()
    # 0.30 +0.10 -> 0.40, -0.10 -> 0.30; eff 0.50 +0.08 -> 0.58, -0.10 -> 0.48; human 0.50 -0.15 -> 0.35
    assert history == [
        ("causal_link_confirmed", "0.400", "0.500", "0.500"),
        ("pattern_contradicted", "0.300", "0.500", "0.500"),
        ("applied_successfully", "0.300", "0.580", "0.500"),
        ("user_corrected", "0.300", "0.480", "0.350"),
    ]
    assert counts == (1, 1, 1, 1)
    before = snapshot(db)
    assert ingest(db, events(rows))["events_skipped"] == 4
    assert snapshot(db) == before


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (
            lambda a: events([("e1", str(uuid.UUID(int=777)), "user_accepted", START)]),
            r"instinct_id .* is not in the store",
        ),
        (lambda a: events([("e1", a, "user_liked", START)]), r"column 'event_type' is not one of"),
        (
            lambda a: events([("e1", "not-a-uuid", "user_accepted", START)]),
            r"'not-a-uuid', not a UUID",
        ),
        # an instinct last seen in the future would never decay (issue 35 §5)
        (
            lambda a: events([("e9", a, "user_accepted", dt.datetime(2100, 1, 4, tzinfo=dt.UTC))]),
            r"event_id 'e9' occurred at 2100-01-04 00:00:00.*, in the future \(later than ",
        ),
    ],
)
def test_bad_events_change_nothing(store_location, frame, message: str) -> None:
    db = store(store_location)
    [a] = ids(1)
    ingest(db, new_instincts=new_instincts([a]), now=START)
    before = snapshot(db)
    with pytest.raises(InputError, match=message):
        ingest(db, frame(a))
    assert snapshot(db) == before


def test_recompute_uses_the_counts(store_location, tmp_path: Path) -> None:
    db = store(store_location)
    [a] = ids(1)
    rows = [(f"o{i}", a, "pattern_observed_again", START) for i in range(5)]
    rows += [(f"s{i}", a, "applied_successfully", START) for i in range(3)] + [
        ("f", a, "applied_failed", START)
    ]
    rows += [("r", a, "reflect_approved", START)]
    ingest(db, events(rows), new_instincts([a]), now=START)
    assert recompute(db, now=START) == {"instincts": 1, "changed": 1}
    assert recompute(db, now=START) == {"instincts": 1, "changed": 0}
    [row] = top(db).to_dict("records")
    # observations 1 + 5 = 6 -> 0.70; Wilson(3 of 4, z 1.96) = 0.3006...; reflect approved -> 0.95
    assert (row["frequency_score"], row["effectiveness_score"], row["human_score"]) == (
        0.7,
        0.301,
        0.95,
    )
    assert row["tier"] == "strong" and row["injection_method"] == "context_suggestion"


class SeedDecayModel:
    """The seed's ConfidenceDecayJob on Decimal scores, one call per run."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def add(self, instinct: str, last_seen: dt.datetime, scores: tuple[str, str, str]) -> None:
        f, e, h = (Decimal(s) for s in scores)
        self.rows[instinct] = {
            "f": f,
            "e": e,
            "h": h,
            "status": "active",
            "last_seen": last_seen,
            "updated": last_seen,
        }

    def run(self, now: dt.datetime) -> tuple[int, int, int]:
        decayed = [
            k
            for k, r in self.rows.items()
            if r["status"] == "active" and r["last_seen"] < now - dt.timedelta(days=7)
        ]
        for k in decayed:
            r = self.rows[k]
            r["f"], r["e"], r["h"] = (
                max(Decimal(0), r["f"] - Decimal("0.02")),
                max(Decimal(0), r["e"] - Decimal("0.01")),
                max(Decimal(0), r["h"] - Decimal("0.005")),
            )
            r["updated"] = now
        weak = [
            k
            for k, r in self.rows.items()
            if r["status"] == "active"
            and (
                r["f"] * Decimal("0.35") + r["e"] * Decimal("0.40") + r["h"] * Decimal("0.25")
            ).quantize(Decimal("0.001"))
            < Decimal("0.2")
        ]
        for k in weak:
            self.rows[k].update(status="deprecated", updated=now)
        gone = [
            k
            for k, r in self.rows.items()
            if r["status"] == "deprecated" and r["updated"] < now - dt.timedelta(days=30)
        ]
        for k in gone:
            del self.rows[k]
        return len(decayed), len(weak), len(gone)


@pytest.mark.parametrize(
    "backend",
    [
        "duckdb",
        # the same job's code on PostgreSQL's lent rows: 156 transactions, 27 s; its locks,
        # rollback and once-a-week rule are the cases of test_postgres.py and the rest here
        pytest.param(
            "postgres",
            marks=[
                pytest.mark.postgres,
                pytest.mark.xdist_group("instincts-postgres"),
                pytest.mark.extended,
            ],
        ),
    ],
)
def test_decay_over_months_matches_the_seeds_job(store_location, tmp_path: Path) -> None:
    db = store(store_location)
    names = ids(4)
    ingest(db, new_instincts=new_instincts(names), now=START)
    # lower the scores so that deprecation comes within months: user_corrected x n per instinct
    rows = [
        (f"c{i}-{j}", name, "user_corrected", START)
        for i, name in enumerate(names)
        for j in range(i + 1)
    ]
    ingest(db, events(rows), now=START)
    # the last instinct is observed every week (it is deprecated all the same once its composite
    # falls below 0.2: nothing in the seed revives an instinct, but its updates defer deletion)
    model = SeedDecayModel()
    with open_workspace(db, read_all=True) as work:
        con = work.con
        for name, f, e, h in con.execute(
            "SELECT CAST(id AS VARCHAR), CAST(freq_score AS VARCHAR), "
            "CAST(eff_score AS VARCHAR), CAST(human_score AS VARCHAR) FROM instincts"
        ).fetchall():
            model.add(name, START, (f, e, h))
    for week in range(1, 40):
        now = START + dt.timedelta(weeks=week, hours=3)
        seen = START + dt.timedelta(weeks=week)
        ingest(db, events([(f"seen-{week}", names[-1], "pattern_observed_again", seen)]), now=now)
        model.rows[names[-1]].update(last_seen=seen, updated=now)  # an ingest touches updated_at
        model.rows[names[-1]]["f"] = min(Decimal(1), model.rows[names[-1]]["f"] + Decimal("0.05"))
        expected = model.run(now)
        result = decay(db, now)
        assert (result.decayed, result.deprecated, result.deleted) == expected, week
        assert decay(db, now + dt.timedelta(hours=1)).already_ran  # same week: nothing
        with open_workspace(db, read_all=True) as work:
            con = work.con
            stored = {
                r[0]: r[1:]
                for r in con.execute(
                    "SELECT CAST(id AS VARCHAR), freq_score, eff_score, human_score, status FROM instincts"
                ).fetchall()
            }
            written = dict(
                con.execute(
                    "SELECT reason, count(*) FROM confidence_history WHERE recorded_at = ? GROUP BY reason",
                    [now.replace(tzinfo=None)],
                ).fetchall()
            )
        # every change of the run is in the history (a deleted instinct's rows go with it)
        assert (written.get("weekly_decay", 0), written.get("deprecated", 0)) == expected[:2], week
        assert stored == {
            k: (r["f"], r["e"], r["h"], r["status"]) for k, r in model.rows.items()
        }, week
    assert len(model.rows) == 1  # the three neglected instincts were deprecated, then deleted
    with open_workspace(db, read_all=True) as work:
        con = work.con
        reasons = dict(
            con.execute(
                "SELECT reason, count(*) FROM confidence_history GROUP BY reason"
            ).fetchall()
        )
        runs = con.execute("SELECT count(*) FROM decay_runs").fetchone()[0]
    # the survivor's history: its 4 corrections, 39 observations, its deprecation
    assert runs == 39 and reasons == {
        "user_corrected": 4,
        "pattern_observed_again": 39,
        "deprecated": 1,
    }


INTERRUPTED_JOB = textwrap.dedent("""
    import datetime as dt, os, sys, time
    from pathlib import Path
    import duckscore.instincts.store as instincts
    real = instincts.history_rows
    def slow(session, ids_table, reason, at):
        count = real(session, ids_table, reason, at)
        print("inside", flush=True)
        time.sleep(60)
        return count
    instincts.history_rows = slow
    db = sys.argv[1] if sys.argv[1].startswith("postgresql://") else Path(sys.argv[1])
    instincts.decay(db, dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc))
""")


def _stale_store(location: Callable[[], Store]) -> Store:
    db = store(location)
    ingest(db, new_instincts=new_instincts(ids(3)), now=START)
    return db


def test_a_killed_decay_job_leaves_the_store_as_it_was(store_location, tmp_path: Path) -> None:
    db = _stale_store(store_location)
    before = snapshot(db)
    job = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_JOB, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert job.stdout is not None and job.stdout.readline().strip() == "inside"
    job.kill()
    job.wait()
    assert snapshot(db) == before
    result = decay(db, dt.datetime(2026, 3, 2, tzinfo=dt.UTC))
    assert (result.already_ran, result.decayed) == (False, 3)


def test_a_failing_decay_job_rolls_back(store_location, monkeypatch: pytest.MonkeyPatch) -> None:
    import duckscore.instincts.store as instincts
    from duckscore.core.session import Session

    db = _stale_store(store_location)
    before = snapshot(db)
    real = instincts.history_rows

    def fail_on_deprecation(session: Session, ids_table: str, reason: str, at: str) -> int:
        if reason == "deprecated":
            raise RuntimeError("disk full")
        return real(session, ids_table, reason, at)

    monkeypatch.setattr(instincts, "history_rows", fail_on_deprecation)
    with pytest.raises(RuntimeError, match="disk full"):
        decay(db, dt.datetime(2026, 3, 2, tzinfo=dt.UTC))
    assert snapshot(db) == before


HOLDER = textwrap.dedent("""
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1])
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
""")


def test_a_second_process_gets_a_clear_error_or_waits(tmp_path: Path) -> None:
    db = _stale_store(lambda: tmp_path / "store.duckdb")  # a DuckDB file admits one process
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), "30"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with (
            pytest.raises(DuckscoreError, match=r"in use by another process \(PID \d+\)"),
            open_store(db, wait_seconds=0.5),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    brief = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), "1.5"], stdout=subprocess.PIPE, text=True
    )
    assert brief.stdout is not None and brief.stdout.readline().strip() == "holding"
    with open_store(db, wait_seconds=20) as con:  # waits for the holder to finish
        assert con.execute("SELECT count(*) FROM instincts").fetchone()[0] == 3
    brief.wait()


def test_cli_runs_the_lifecycle(store_location, tmp_path: Path) -> None:
    db = str(store_location())
    new = tmp_path / "new.csv"
    new_instincts(ids(2)).to_csv(new, index=False)
    runner = CliRunner()
    assert runner.invoke(cli, ["-q", "instincts", "init", "--db", db]).exit_code == 0
    # what a command did is a message on stderr; stdout holds data only (`top`'s rows)
    done = runner.invoke(
        cli, ["instincts", "ingest", "--db", db, "--instincts", str(new), "--now", "2026-01-05"]
    )
    assert (done.exit_code, done.stdout) == (0, "") and "2 instincts added" in done.stderr
    decayed = runner.invoke(cli, ["instincts", "decay", "--db", db, "--now", "2026-02-02"])
    assert decayed.stdout == ""
    assert decayed.stderr == "duckscore: Decay job complete: 2 decayed, 0 deprecated, 0 deleted\n"
    again = runner.invoke(cli, ["instincts", "decay", "--db", db, "--now", "2026-02-03"])
    assert "already ran for the week of 2026-02-02" in again.stderr
    # ISO 8601 with an offset, as `date -Is` prints it: 2026-02-04 01:30 at +02:00 is
    # 2026-02-03 23:30 UTC, still the week of 2026-02-02
    for moment in ("2026-02-04T01:30:00+02:00", "2026-02-03T23:30:00Z"):
        offset = runner.invoke(cli, ["instincts", "decay", "--db", db, "--now", moment])
        assert "already ran for the week of 2026-02-02" in offset.stderr, offset.output
    bad = runner.invoke(cli, ["-q", "instincts", "decay", "--db", db, "--now", "22/11/2026"])
    assert bad.exit_code == 2 and "is not an ISO 8601 date or time" in bad.output
    jsonl = tmp_path / "events.jsonl"  # DuckDB's JSON reader types the ids as UUID
    events([("j1", ids(1)[0], "user_accepted", START)]).to_json(
        jsonl, orient="records", lines=True, date_format="iso"
    )
    loaded = runner.invoke(cli, ["instincts", "ingest", "--db", db, "--events", str(jsonl)])
    assert loaded.exit_code == 0 and "1 events applied" in loaded.stderr
    listed = runner.invoke(cli, ["-q", "instincts", "top", "--db", db, "--format", "jsonl"])
    assert len(listed.stdout.splitlines()) == 2
    missing = runner.invoke(
        cli, ["-q", "instincts", "decay", "--db", str(tmp_path / "none.duckdb")]
    )
    assert missing.exit_code == 2 and "no such store" in missing.stderr


def test_the_duckdb_store_has_the_seeds_indexes(tmp_path: Path) -> None:
    db = store(lambda: tmp_path / "store.duckdb")

    def indexes() -> dict[str, str]:
        with open_store(db, read_only=True) as con:
            rows = con.execute(
                "SELECT index_name, expressions FROM duckdb_indexes() "
                "WHERE table_name = 'instincts' ORDER BY index_name"
            ).fetchall()
        return dict(rows)

    assert indexes() == {
        "idx_instincts_composite": "[composite]",
        "idx_instincts_status": "[status]",
        "idx_instincts_user_domain": "[user_id, '\"domain\"']",
    }
    # the index follows the scores an ingest changes: 0.30 + 0.05 -> 0.35 frequency, composite
    # 0.35 * 0.35 + 0.40 * 0.50 + 0.25 * 0.50 = 0.4475 -> 0.448 (the others stay at 0.430)
    first = ids(2)[0]
    ingest(db, events([("o1", first, "pattern_observed_again", START)]), new_instincts(ids(2)))
    with open_store(db, read_only=True) as con:
        found = con.execute("SELECT CAST(id AS VARCHAR) FROM instincts WHERE composite = 0.448")
        assert found.fetchall() == [(first,)]
    with open_store(db) as con:  # a store created before the index gets it from init
        con.execute("DROP INDEX idx_instincts_composite")
    assert init_store(db) == "up to date"
    assert "idx_instincts_composite" in indexes()
