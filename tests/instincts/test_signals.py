"""An application's outcome from its OutcomeSignals (instinct_v2's `outcome_signals` rule), when
the event gives signals and no outcome: through the Python API and the command line.

`expected_outcome` is the rule as docs/instincts.md states it, written here in plain Python."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.errors import InputError
from duckscore.instincts.store import ingest, init_store
from duckscore.instincts.workspace import Store, open_workspace

from .test_store import START, ids, new_instincts

INSTINCT = ids(1)[0]


def expected_outcome(signals: dict) -> str:
    if not (signals["userAccepted"] and signals["noErrorsIntroduced"]):
        return "negative"
    if signals["taskCompleted"] and signals["timeSaved"] >= 0:
        return "positive"
    return "neutral"


def every_signal() -> list[dict]:
    flags = itertools.product([True, False], repeat=3)
    return [
        {"userAccepted": a, "taskCompleted": t, "noErrorsIntroduced": n, "timeSaved": saved}
        for (a, t, n), saved in itertools.product(flags, [-500, 0, 1200.5])
    ]


def application_events(signals: list[str | None], outcomes: list[str | None]) -> pd.DataFrame:
    n = len(signals)
    return pd.DataFrame(
        {
            "event_id": [f"a{i:03d}" for i in range(n)],
            "instinct_id": [INSTINCT] * n,
            "event_type": [("applied_successfully", "applied_failed")[i % 2] for i in range(n)],
            "occurred_at": [START.replace(tzinfo=None) + dt.timedelta(minutes=i) for i in range(n)],
            "outcome": outcomes,
            "signals": signals,
        }
    )


def new_store(location, policy: str) -> Store:
    db = location()
    init_store(db, policy)
    ingest(db, new_instincts=new_instincts([INSTINCT]), now=START)
    return db


def stored_outcomes(db: Store) -> list[str]:
    with open_workspace(db, read_all=True) as work:
        rows = work.con.execute(
            "SELECT outcome FROM instinct_applications ORDER BY applied_at"
        ).fetchall()
    return [row[0] for row in rows]


def test_the_outcome_derives_from_the_signals(store_location) -> None:
    signals = every_signal()
    # the 24 combinations; then an outcome given with signals, and signals without an outcome
    # rule's keys absent (no signals): the given outcome and the event type decide
    texts = [json.dumps(s) for s in signals] + [json.dumps(signals[0]), None]
    outcomes = [None] * len(signals) + ["neutral", None]
    frame = application_events(texts, outcomes)
    db = new_store(store_location, "instinct_v2")
    ingest(db, frame, now=START + dt.timedelta(days=1))
    last_type = frame["event_type"].iloc[-1]
    assert stored_outcomes(db) == [
        *(expected_outcome(s) for s in signals),
        "neutral",
        "positive" if last_type == "applied_successfully" else "negative",
    ]
    assert set(stored_outcomes(db)) == {"positive", "negative", "neutral"}


def test_a_policy_without_the_rule_keeps_the_event_types_outcome(store_location) -> None:
    frame = application_events([json.dumps(s) for s in every_signal()], [None] * 24)
    db = new_store(store_location, "instinct_v1")
    ingest(db, frame, now=START + dt.timedelta(days=1))
    assert stored_outcomes(db) == ["positive", "negative"] * 12


@pytest.mark.parametrize(
    ("signals", "message"),
    [
        ('{"userAccepted": true, "taskCompleted": true, "noErrorsIntroduced": true}',
         "signals.timeSaved is missing, expected a number of milliseconds"),
        ('{"userAccepted": "yes", "taskCompleted": true, "noErrorsIntroduced": true, "timeSaved": 1}',
         "signals.userAccepted is varchar, expected true or false"),
        ('{"userAccepted": true,', "signals is not valid JSON"),
    ],
)  # fmt: skip
def test_signals_an_outcome_cannot_derive_from_are_refused(
    store_location, signals: str, message: str
) -> None:
    db = new_store(store_location, "instinct_v2")
    frame = application_events([json.dumps(every_signal()[0]), signals], [None, None])
    with pytest.raises(InputError, match=rf"--events: event_id 'a001': {message}"):
        ingest(db, frame, now=START + dt.timedelta(days=1))
    assert stored_outcomes(db) == []


def test_cli_reads_signals_from_the_events_file(store_location, tmp_path: Path) -> None:
    db = new_store(store_location, "instinct_v2")
    declined = {"userAccepted": False, "taskCompleted": True, "noErrorsIntroduced": True}
    path = tmp_path / "events.csv"
    application_events([json.dumps({**declined, "timeSaved": 10})], [None]).to_csv(
        path, index=False
    )
    done = CliRunner().invoke(
        cli, ["-q", "instincts", "ingest", "--db", str(db), "--events", str(path)]
    )
    assert done.exit_code == 0, done.output
    assert stored_outcomes(db) == ["negative"]  # a success the user corrected
