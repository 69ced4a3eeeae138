"""Seed 004's confidence API over HTTP (`duckscore serve --instincts-db`), on a real server
process: the reads answer what the store functions answer, events posted land as an ingest
lands them, two threads posting at once lose no update, and errors are one line of JSON with
serve's status codes. Scores expected below are the seed's UPDATE_RULES summed by hand."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from duckscore.instincts.store import ingest, init_store, top
from duckscore.instincts.workspace import open_store

from ..instincts.test_store import ids, new_instincts
from .test_serve import Server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("serve")]

FIRST, SECOND = ids(2)
HEADER = "X-Duckscore-Policy-Version"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    folder = tmp_path_factory.mktemp("instincts-http")
    db = folder / "store.duckdb"
    init_store(db, "instinct_v2")
    ingest(db, new_instincts=new_instincts([FIRST, SECOND]), now=dt.datetime(2026, 1, 5))
    server = Server(folder, "--instincts-db", str(db))
    try:
        yield server, db
    finally:
        server.stop()


def event(event_id: str, instinct: str, event_type: str, **more: object) -> dict[str, object]:
    return {"event_id": event_id, "instinct_id": instinct, "event_type": event_type,
            "occurred_at": "2026-01-06 09:00:00", **more}  # fmt: skip


def test_events_posted_land_and_the_reads_answer_them(served) -> None:
    server, db = served
    signals = {"userAccepted": True, "taskCompleted": False, "noErrorsIntroduced": True,
               "timeSaved": 300}  # fmt: skip
    posted = httpx.post(f"{server.url}/v1/instincts/events", json={"events": [
        event("s1", SECOND, "applied_successfully", signals=signals),
        event("s2", SECOND, "user_accepted"),
    ]})  # fmt: skip
    assert posted.status_code == 200, posted.text
    assert posted.headers[HEADER] == "instinct_v2"
    assert posted.json() == {"events_applied": 2, "events_skipped": 0,
                             "instinct_policy_version": "instinct_v2"}  # fmt: skip
    one = httpx.get(f"{server.url}/v1/instincts/{SECOND}").json()["instinct"]
    # 0.30 / 0.50 + 0.08 + 0.05 = 0.63 / 0.50 + 0.10 = 0.60: 0.105 + 0.252 + 0.15 = 0.507
    assert {k: one[k] for k in ("status", "tier", "frequency_score", "effectiveness_score",
                                "human_score")} == {
        "status": "active", "tier": "moderate", "frequency_score": 0.3,
        "effectiveness_score": 0.63, "human_score": 0.6}  # fmt: skip
    assert one["composite"] == pytest.approx(0.507)
    listed = httpx.get(f"{server.url}/v1/instincts", params={"limit": 1}).json()["instincts"]
    assert [row["instinct_id"] for row in listed] == [SECOND]
    with open_store(db, read_only=True) as con:  # the outcome the signals give: not completed
        assert con.execute("SELECT outcome FROM instinct_applications").fetchall() == [("neutral",)]
    assert json.loads(top(db, limit=1).to_json(orient="records")) == listed


def test_two_threads_posting_at_once_lose_no_update(served) -> None:
    server, db = served

    def post(thread: int) -> list[int]:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            return [
                client.post("/v1/instincts/events", json={"events": [
                    event(f"t{thread}-{i}", FIRST, "pattern_observed_again")]}).status_code
                for i in range(15)
            ]  # fmt: skip

    with ThreadPoolExecutor(2) as pool:
        statuses = [s for batch in pool.map(post, range(2)) for s in batch]
    assert statuses == [200] * 30
    with open_store(db, read_only=True) as con:
        count, freq = con.execute(
            f"SELECT observation_count, freq_score FROM instincts WHERE id = '{FIRST}'"
        ).fetchone()
        history = con.execute(
            f"SELECT count(*) FROM confidence_history WHERE instinct_id = '{FIRST}'"
        ).fetchone()[0]
    # 1 + 30 observations, each event a history row; 0.30 + 30 * 0.05 clamped at 1
    assert (count, float(freq), history) == (31, 1.0, 30)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error"),
    [
        ("POST", "/v1/instincts/events", b"{", 400, "the body is not JSON"),
        ("POST", "/v1/instincts/events", b'{"rows": []}', 400, 'with "events"'),
        ("POST", "/v1/instincts/events", b'{"events": []}', 422, "events: no rows"),
        ("POST", "/v1/instincts/events",
         json.dumps({"events": [event("u1", ids(5)[-1], "user_accepted")]}).encode(), 422,
         "is not in the store"),
        ("POST", "/v1/instincts/events",
         json.dumps({"events": [event("b1", FIRST, "applied_successfully",
                                      signals={"userAccepted": True})]}).encode(), 422,
         "event_id 'b1': signals.taskCompleted is missing"),
        ("GET", f"/v1/instincts/{ids(7)[-1]}", None, 404, "no such instinct in the store"),
        ("GET", "/v1/instincts/abc", None, 422, "instinct id 'abc': not a UUID"),
        ("GET", "/v1/instincts?tier=gold", None, 422, "--tier 'gold': not a tier"),
        ("GET", "/v1/instincts?limit=0", None, 422, "limit: '0' is not an integer of 1 or more"),
    ],
)  # fmt: skip
def test_errors_are_one_line_of_json(served, method, path, body, status, error) -> None:
    server, db = served
    with open_store(db, read_only=True) as con:
        before = con.execute("SELECT count(*) FROM confidence_history").fetchone()
    answer = httpx.request(method, f"{server.url}{path}", content=body)
    assert answer.status_code == status
    assert error in answer.json()["error"] and "\n" not in answer.json()["error"]
    with open_store(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM confidence_history").fetchone() == before


def test_without_a_store_the_routes_say_how_to_get_one(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        answer = httpx.get(f"{server.url}/v1/instincts")
    finally:
        server.stop()
    assert answer.status_code == 404
    assert answer.json() == {
        "error": "no instinct store: start the server with --instincts-db STORE"
    }
