"""The scorer's warm lanes (orchestrator/api/lanes.py): after the first request of a shape, a
request of that shape skips the checked path — and still gives the batch lines for every SciFact
query one at a time, the same refusal as a cold scorer for every kind of bad hits, the lines of a
new set of sources, and nothing kept between calls."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import duckscore as ds
from duckscore.api.lanes import _Source
from duckscore.api.scorer import Scorer
from duckscore.core.connection import EngineSettings
from duckscore.core.errors import DuckscoreError
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

from ..helpers import SCIFACT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("scorer")]

LOG = SCIFACT / "retrieval_log.parquet"


@pytest.fixture(scope="module")
def hits() -> pa.Table:
    return duckdb.sql(
        f"FROM read_parquet('{LOG}') ORDER BY query_id, source, rank"
    ).to_arrow_table()


def query(hits: pa.Table, query_id: str) -> pa.Table:
    return hits.filter(pc.equal(hits["query_id"], query_id))


class Counted(Scorer):
    """A Scorer that counts the requests it scores the checked way."""

    checked = 0

    def _score_checked(self, hits, tables):  # type: ignore[no-untyped-def]
        self.checked += 1
        return super()._score_checked(hits, tables)


def counted() -> Counted:
    return Counted(Job(settings=EngineSettings(threads=1)))  # as ds.scorer() builds it


@pytest.mark.extended  # 31 s: make test's 15 minutes (docs/testing.md)
def test_every_query_one_at_a_time_is_its_batch_line_and_warm(
    hits: pa.Table, tmp_path: Path
) -> None:
    run(LOG, tmp_path, Job(policy="overall_v3"))
    lines = (tmp_path / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    batch = {line["query_id"]: line for line in map(json.loads, lines)}
    with counted() as scorer:
        live = {q: scorer.score(query(hits, q)).contract for q in sorted(batch)}
    assert live == {q: [line] for q, line in batch.items()}
    assert scorer.checked == 1  # the first request of the shape; 299 warm ones


def bad_hits(hits: pa.Table) -> dict[str, pa.Table]:
    one = query(hits, "1")
    score, rank = one.schema.get_field_index("score"), one.schema.get_field_index("rank")
    scores, ranks = one["score"].to_pylist(), one["rank"].to_pylist()
    return {
        "nan score": one.set_column(score, "score", pa.array([float("nan"), *scores[1:]])),
        "null score": one.set_column(score, "score", pa.array([None, *scores[1:]], pa.float64())),
        "repeated key": pa.concat_tables([one, one.slice(5, 1)]),
        "rank not from 1": one.set_column(rank, "rank", pa.array([r + 1 for r in ranks])),
        "repeated rank": one.set_column(rank, "rank", pa.array([1, *ranks[:-1]])),
        "no rows": one.slice(0, 0),
        "empty id": one.set_column(0, "query_id", pa.array(["", *one["query_id"].to_pylist()[1:]])),
    }


def refusal(scorer: Scorer, given: pa.Table) -> str:
    with pytest.raises(DuckscoreError) as raised:
        scorer.score(given)
    return str(raised.value)


def test_bad_hits_after_warm_ones_get_the_cold_scorers_refusal(hits: pa.Table) -> None:
    with counted() as warm:
        warm.score(query(hits, "3"))
        for name, given in bad_hits(hits).items():
            with ds.scorer() as cold:
                assert refusal(warm, given) == refusal(cold, given), name
        assert warm.score(query(hits, "1")).contract == ds.scorer().score(query(hits, "1")).contract
    assert warm.checked == 1 + len(bad_hits(hits))  # every fault went the checked way


def test_a_new_set_of_sources_in_a_warm_lane(hits: pa.Table) -> None:
    one = query(hits, "1")
    sparse_only = one.filter(pc.equal(one["source"], "sparse"))
    with counted() as scorer:
        scorer.score(query(hits, "3"))
        warm = scorer.score(sparse_only).contract
        assert scorer.score(one).contract == ds.scorer().score(one).contract
    assert warm == ds.scorer().score(sparse_only).contract
    assert warm[0]["best_parent_id"] is not None
    assert scorer.checked == 1


def test_each_thread_its_own_lane_nothing_kept_and_closed(hits: pa.Table) -> None:
    scorer = ds.scorer()
    expected = ds.scorer().score(query(hits, "5")).contract

    def twice() -> None:
        assert scorer.score(query(hits, "1")).contract  # the thread's lane opens
        assert scorer.score(query(hits, "5")).contract == expected  # and is warm

    threads = [threading.Thread(target=twice) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lanes = [lane for t in scorer._lanes._threads.values() for lane in t.lanes.values()]
    assert len(lanes) == 3
    # between calls a lane keeps no request's rows: its log reads none
    assert [
        lane.cursor.execute("SELECT count(*) FROM retrieval_log").fetchone() for lane in lanes
    ] == [(0,)] * 3
    assert {lane.source.table.num_rows for lane in lanes} == {0}
    scorer.score(query(hits, "5"))  # a new thread's lane: the ended threads' lanes are closed
    assert len(scorer._lanes._threads) == 1
    with pytest.raises(duckdb.ConnectionException):
        lanes[0].cursor.execute("SELECT 1")
    scorer.close()
    with pytest.raises(duckdb.ConnectionException):
        scorer._con.execute("SELECT 1")


def test_one_prepared_plan_reads_each_calls_rows_from_the_source() -> None:
    """What the warm path rests on: DuckDB asks the lane's source for a new stream at every
    EXECUTE of a statement prepared over it, so one plan reads each call's rows — a new table,
    more rows, none."""
    con = duckdb.connect()
    first = pa.table({"score": [1.0, 2.0]})
    source = _Source(first)
    con.register("hits", source)
    con.execute("CREATE TEMP VIEW total AS SELECT sum(score), count(*) FROM hits")
    con.execute("PREPARE total AS SELECT * FROM total")
    with source.holding(first):
        assert con.execute("EXECUTE total").fetchall() == [(3.0, 2)]
    with source.holding(pa.table({"score": [10.0, 20.0, 30.0]})):
        assert con.execute("EXECUTE total").fetchall() == [(60.0, 3)]
    assert con.execute("EXECUTE total").fetchall() == [(None, 0)]
    con.close()


def test_hits_without_scores_are_their_batch_lines_cold_and_warm(
    hits: pa.Table, tmp_path: Path
) -> None:
    """Hits with ranks and no scores are read through the ranked-log stage, a CTE of the lane's
    statement (every source a distance here, its ranks flipped twice): the lines of `run` on
    the same log, the first request checked, the others warm, a new set of sources too."""
    ranked = hits.drop_columns(["score"])
    ranked = ranked.filter(pc.is_in(ranked["query_id"], pa.array(["1", "3", "5", "13"])))
    job = Job(
        recipe="hybrid_v1", policy="overall_v1", recipe_overrides=("source_defaults.distance=true",), top_n=3,
        allow_recipe_mismatch=True, settings=EngineSettings(threads=1),
    )  # fmt: skip
    duckdb.from_arrow(ranked).write_parquet(str(tmp_path / "log.parquet"))
    run(tmp_path / "log.parquet", tmp_path / "out", job)
    lines = (tmp_path / "out" / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    batch = {line["query_id"]: [line] for line in map(json.loads, lines)}
    one = query(ranked, "1")
    dense = one.filter(pc.equal(one["source"], "dense"))
    with Counted(job) as scorer, Scorer(job) as cold:
        assert {q: scorer.score(query(ranked, q)).contract for q in batch} == batch
        assert scorer.score(dense).contract == cold.score(dense).contract
    assert scorer.checked == 1


@pytest.mark.parametrize("kind", ["arrow", "pandas"])
def test_the_hits_are_read_by_a_name_of_ours_not_by_a_replacement_scan(
    hits: pa.Table, kind: str
) -> None:
    """A lane registers the caller's hits under its own name: with DuckDB's scans of Python
    variables turned off, requests after the first still take the warm path, and give the
    checked path's lines (an Arrow table's shape is its schema; a frame's, that of DuckDB's
    reading of it into Arrow)."""
    given = [query(hits, q) for q in ("1", "3", "5")]
    if kind == "pandas":
        given = [table.to_pandas() for table in given]
    with counted() as cold:
        expected = [cold.score(one, tables=True).contract for one in given]
    with counted() as scorer:
        scorer._con.execute("SET GLOBAL python_enable_replacements = false")
        opened = scorer._lanes._connect  # and on the lanes' own DuckDB instances
        scorer._lanes._connect = lambda: opened().execute(
            "SET GLOBAL python_enable_replacements = false"
        )
        live = [scorer.score(one).contract for one in given]
    assert live == expected
    assert scorer.checked == 1
