"""Recycling a lane's DuckDB instance (orchestrator/api/recycle.py, lanes.py; issue 52 §2): due
after N warm calls or when the median latency drifts; the calls give the same lines across a
recycle, a call in flight on another thread finishes, and every instance replaced is closed."""

from __future__ import annotations

import json
import threading

import duckdb
import pyarrow.compute as pc
import pytest

import duckscore as ds
from duckscore.api.recycle import WINDOW, Watch

from ..helpers import SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"


def test_due_after_n_calls() -> None:
    watch = Watch(calls_limit=3, drift=0)
    assert [watch.record(10.0) for _ in range(3)] == [None, None, "3 calls"]


def test_due_when_the_median_drifts_past_the_ratio() -> None:
    """Medians by hand: the first 200 calls 10 ms, then 200 of 12 ms (1.2x: not due) and 100
    of 20 ms: the last 200 are 100 of 12 and 100 of 20, median (12 + 20) / 2 = 16 > 1.3 x 10,
    looked at every 50th call, so due at call 500."""
    watch = Watch(calls_limit=0, drift=1.3)
    assert {watch.record(10.0) for _ in range(WINDOW)} == {None}
    assert {watch.record(12.0) for _ in range(WINDOW)} == {None}
    said = [watch.record(20.0) for _ in range(100)]
    assert said[:-1] == [None] * 99
    assert said[-1] == "p50 of the last 200 calls 16.0 ms, the first 200's 10.0 ms"
    assert watch.calls == 500
    assert Watch(calls_limit=0, drift=0).record(1e9) is None


@pytest.mark.slow
def test_a_recycle_after_n_calls_keeps_the_lines_and_leaks_no_instance() -> None:
    hits = duckdb.sql(f"FROM read_parquet('{LOG}')").to_arrow_table()
    ids = sorted(set(hits["query_id"].to_pylist()))[:13]
    queries = [hits.filter(pc.equal(hits["query_id"], q)) for q in ids]
    with ds.scorer() as cold:
        expected = [json.dumps(cold.score(one, tables=True).contract) for one in queries]
    scorer = ds.scorer(recycle_calls=5, recycle_drift=0)
    lanes = scorer.lanes
    got, instances = [], []
    for one in queries:  # 1 checked + 5 warm, recycled; again; 1 checked on a third instance
        got.append(json.dumps(scorer.score(one).contract))
        instances.append(lanes._threads[threading.get_ident()].con if lanes._threads else None)
    assert got == expected
    assert lanes.recycles == 2
    assert (lanes.instances_opened, lanes.instances_closed, lanes.open_instances) == (3, 2, 1)
    assert instances.count(None) == 2  # just after each recycle: reopened by the next call
    assert len({id(con) for con in instances}) == 4  # three instances, and None
    for old in (instances[0], instances[6]):
        with pytest.raises(duckdb.ConnectionException):
            old.execute("SELECT 1")
    scorer.close()
    assert lanes.open_instances == 0


@pytest.mark.slow
def test_a_call_in_flight_on_another_thread_finishes_across_a_recycle() -> None:
    """Two threads, each its own instance, recycled every 3 calls: 40 calls of the same
    queries give the same lines throughout; at the end one instance a live thread is open."""
    hits = duckdb.sql(f"FROM read_parquet('{LOG}')").to_arrow_table()
    ids = sorted(set(hits["query_id"].to_pylist()))[:4]
    queries = [hits.filter(pc.equal(hits["query_id"], q)) for q in ids]
    with ds.scorer() as cold:
        expected = [cold.score(one).contract for one in queries]
    scorer = ds.scorer(recycle_calls=3, recycle_drift=0)
    wrong: list[int] = []

    def calls(offset: int) -> None:
        for n in range(20):
            at = (n + offset) % len(queries)
            if scorer.score(queries[at]).contract != expected[at]:
                wrong.append(at)

    threads = [threading.Thread(target=calls, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert scorer.lanes.recycles >= 2 * 4
    scorer.close()
    assert scorer.lanes.open_instances == 0
