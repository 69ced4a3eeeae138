"""Seed 004's lifecycle past maturity: `evolved` (the policy's evolve rule) and `archived` (by
command, and by the weekly job for the long evolved), each transition a history row.

The instincts' scores below are the seed's UPDATE_RULES summed by hand from 0.30 / 0.50 / 0.50,
and their composites 0.35 f + 0.40 e + 0.25 h computed by hand, not read from duckscore."""

from __future__ import annotations

import datetime as dt

import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.errors import InputError, PolicyError
from duckscore.instincts.lifecycle import archive, evolve
from duckscore.instincts.store import decay, ingest, init_store, top
from duckscore.instincts.workspace import Store, open_workspace

from .test_store import START, events, ids, new_instincts

MATURE, SHY, FEW, UNREVIEWED = ids(4)
# (event type, times) per instinct, applied in this order a minute apart
PLANS = {
    # f 0.30 + 2 * 0.10 = 0.50; e 0.50 + 3 * 0.08 + 0.05 = 0.79; h 0.50 + 0.10 + 0.30 = 0.90
    # composite 0.175 + 0.316 + 0.225 = 0.716 >= 0.7, 3 successes, reviewed: may evolve
    MATURE: [
        ("causal_link_confirmed", 2),
        ("applied_successfully", 3),
        ("user_accepted", 1),
        ("reflect_approved", 1),
    ],
    # f 0.30; e 0.74; h 0.80: composite 0.105 + 0.296 + 0.20 = 0.601 < 0.7
    SHY: [("applied_successfully", 3), ("reflect_approved", 1), ("user_accepted", 0)],
    # f 0.60; e 0.71; h 0.90: composite 0.21 + 0.284 + 0.225 = 0.719, but 2 successes < 3
    FEW: [
        ("causal_link_confirmed", 3),
        ("applied_successfully", 2),
        ("user_accepted", 1),
        ("reflect_approved", 1),
    ],
    # f 0.60; e 0.84; h 0.5 + 0.1 + 0.3 - 0.3 + 0.1 = 0.70: composite 0.21 + 0.336 + 0.175
    # = 0.721, 3 successes, but the latest /reflect review is a rejection
    UNREVIEWED: [
        ("causal_link_confirmed", 3),
        ("applied_successfully", 3),
        ("user_accepted", 1),
        ("reflect_approved", 1),
        ("reflect_rejected", 1),
        ("user_accepted", 1),
    ],
}


def grown_store(location, policy: str = "instinct_v2") -> Store:
    db = location()
    init_store(db, policy)
    rows, minute = [], 0
    for instinct, plan in PLANS.items():
        for event_type, times in plan:
            for _ in range(times):
                minute += 1
                at = START + dt.timedelta(minutes=minute)
                rows.append((f"e{minute}", instinct, event_type, at))
    ingest(db, events(rows), new_instincts(list(PLANS)), now=START + dt.timedelta(days=1))
    return db


def statuses(db: Store) -> dict[str, str]:
    with open_workspace(db, read_all=True) as work:
        rows = work.con.execute("SELECT CAST(id AS VARCHAR), status FROM instincts").fetchall()
    return dict(rows)


def transitions(db: Store) -> list[tuple[str, str, str]]:
    with open_workspace(db, read_all=True) as work:
        rows = work.con.execute(
            "SELECT CAST(instinct_id AS VARCHAR), reason, CAST(recorded_at AS VARCHAR) "
            "FROM confidence_history WHERE reason IN ('evolved', 'archived') "
            "ORDER BY recorded_at, instinct_id"
        ).fetchall()
    return rows


def test_the_hand_computed_composites(store_location) -> None:
    db = grown_store(store_location)
    found = top(db).set_index("instinct_id")["composite"].round(6).to_dict()
    assert found == {MATURE: 0.716, SHY: 0.601, FEW: 0.719, UNREVIEWED: 0.721}


@pytest.mark.parametrize(
    ("instinct", "reason"),
    [
        (SHY, "composite 0.601 is below lifecycle.evolve.min_composite 0.7"),
        (FEW, "2 successful applications, below lifecycle.evolve.min_successes 3"),
        (UNREVIEWED, "its latest /reflect review is not an approval"),
    ],
)
def test_evolve_refuses_an_immature_instinct_and_changes_nothing(
    store_location, instinct: str, reason: str
) -> None:
    db = grown_store(store_location)
    with pytest.raises(InputError, match=rf"--id '{instinct}': cannot evolve: {reason}"):
        evolve(db, [MATURE, instinct])
    assert set(statuses(db).values()) == {"active"}
    assert transitions(db) == []


def test_evolve_moves_the_mature_and_records_it(store_location) -> None:
    db = grown_store(store_location)
    at = START + dt.timedelta(days=2)
    assert evolve(db, eligible=True, now=at) == [MATURE]
    assert statuses(db)[MATURE] == "evolved"
    assert transitions(db) == [(MATURE, "evolved", "2026-01-07 00:00:00+00")]
    assert MATURE not in set(top(db)["instinct_id"])  # an agent no longer injects it
    with pytest.raises(InputError, match="its status is evolved, not active"):
        evolve(db, [MATURE])
    assert evolve(db, eligible=True, now=at) == []


def test_a_policy_without_lifecycle_rules_cannot_evolve(store_location) -> None:
    db = grown_store(store_location, "instinct_v1")
    with pytest.raises(PolicyError, match="policy instinct_v1 has no lifecycle rules"):
        evolve(db, eligible=True)


def test_archive_from_any_status_once(store_location) -> None:
    db = grown_store(store_location, "instinct_v1")  # archiving needs no rule
    at = START + dt.timedelta(days=3)
    assert archive(db, [SHY, FEW], at) == {"archived": 2, "already_archived": 0}
    assert archive(db, [SHY], at) == {"archived": 0, "already_archived": 1}
    assert [s for i, s in sorted(statuses(db).items())] == [
        "archived" if i in (SHY, FEW) else "active" for i in sorted(PLANS)
    ]
    when = "2026-01-08 00:00:00+00"
    assert transitions(db) == sorted([(SHY, "archived", when), (FEW, "archived", when)])
    with pytest.raises(InputError, match="--id 'x': not a UUID"):
        archive(db, ["x"])
    absent = ids(9)[-1]
    with pytest.raises(InputError, match=f"--id '{absent}': no such instinct in the store"):
        archive(db, [MATURE, absent])
    assert statuses(db)[MATURE] == "active"


def test_the_weekly_job_archives_the_long_evolved(store_location) -> None:
    db = grown_store(store_location)
    evolved_at = START + dt.timedelta(days=2)  # 2026-01-07
    evolve(db, [MATURE], now=evolved_at)
    archive(db, [SHY], evolved_at)
    early = decay(db, evolved_at + dt.timedelta(days=29))  # 29 days: not yet
    assert (early.archived, statuses(db)[MATURE]) == (0, "evolved")
    late = decay(db, evolved_at + dt.timedelta(days=35))  # 2026-02-11: 35 days after
    assert late.archived == 1 and statuses(db)[MATURE] == "archived"
    assert transitions(db)[-1] == (MATURE, "archived", "2026-02-11 00:00:00+00")
    for week in range(1, 20):  # archived: never decayed, deprecated nor deleted
        decay(db, evolved_at + dt.timedelta(days=35 + 7 * week))
    assert {statuses(db)[i] for i in (MATURE, SHY)} == {"archived"}


def test_a_policy_without_lifecycle_rules_keeps_the_seeds_job(store_location) -> None:
    db = grown_store(store_location, "instinct_v1")
    assert decay(db, START + dt.timedelta(days=60)).archived is None


def test_cli_evolve_and_archive(store_location) -> None:
    db = str(grown_store(store_location))
    runner = CliRunner()
    evolved = runner.invoke(
        cli, ["instincts", "evolve", "--db", db, "--eligible", "--now", "2026-01-07"]
    )
    assert (evolved.exit_code, evolved.stderr) == (0, "duckscore: 1 instinct evolved\n")
    refused = runner.invoke(cli, ["instincts", "evolve", "--db", db, "--id", SHY])
    assert refused.exit_code == 2 and "cannot evolve: composite 0.601" in refused.stderr
    neither = runner.invoke(cli, ["instincts", "evolve", "--db", db])
    assert neither.exit_code == 2 and "give --id (one or more) or --eligible" in neither.output
    archived = runner.invoke(cli, ["instincts", "archive", "--db", db, "--id", SHY, "--id", SHY])
    assert archived.stderr == "duckscore: 1 archived, 0 already archived\n"
    job = runner.invoke(cli, ["instincts", "decay", "--db", db, "--now", "2026-02-11"])
    assert job.stderr.endswith("0 deleted, 1 archived\n"), job.output
