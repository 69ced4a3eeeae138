"""Micro-batching (orchestrator/api/batcher.py, issue 52 §2): requests submitted together from
many threads are scored in fewer statements, and each caller gets exactly the lines
`duckscore run` writes for its queries; a bad request in a batch gets its own one-line error and
the others their lines; requests that share a query_id, that name other sources, or of a job
that is not per query, never share a statement."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import duckscore as ds
from duckscore.api.scorer import Live, Scorer
from duckscore.core.errors import DuckscoreError, OptionError
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

from ..helpers import SCIFACT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("scorer")]

LOG = SCIFACT / "retrieval_log.parquet"


@pytest.fixture(scope="module")
def hits() -> pa.Table:
    return duckdb.sql(f"FROM read_parquet('{LOG}')").to_arrow_table()


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """`duckscore run`'s contract.jsonl lines, by query_id, as dumped JSON."""
    out = tmp_path_factory.mktemp("batch") / "out"
    run(LOG, out, Job())
    lines = (out / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    return {line["query_id"]: json.dumps(line) for line in map(json.loads, lines)}


def per_query(hits: pa.Table) -> list[pa.Table]:
    ids = sorted(set(hits["query_id"].to_pylist()))
    return [hits.filter(pc.equal(hits["query_id"], q)) for q in ids]


def dumped(live: Live) -> list[str]:
    return [json.dumps(line) for line in live.contract]


def together(batcher: ds.Batcher, given: list[pa.Table]) -> list[Future[Live]]:
    """Submitted while the scoring threads cannot take any (the queue's lock is re-entrant and
    held here): they are then taken at once."""
    with batcher._ready:
        return [batcher.submit(one) for one in given]


def test_many_threads_get_exactly_their_batch_lines_in_fewer_statements(
    hits: pa.Table, batch: dict[str, str]
) -> None:
    queries = per_query(hits)
    pairs = [pa.concat_tables(queries[i : i + 2]) for i in range(0, 300, 2)]  # 2 queries each
    with ds.scorer() as scorer, ds.Batcher(scorer, max_batch=16, workers=2) as batcher:
        with ThreadPoolExecutor(16) as clients:
            answers = list(clients.map(lambda one: dumped(batcher.score(one)), pairs))
        statements = batcher.statements
    for one, answer in zip(pairs, answers, strict=True):
        assert answer == [batch[q] for q in sorted(set(one["query_id"].to_pylist()))]
    assert statements < len(pairs) / 2  # most requests shared a statement


def test_a_bad_request_in_a_batch_gets_its_own_error_and_the_others_their_lines(
    hits: pa.Table, batch: dict[str, str]
) -> None:
    queries = per_query(hits)[:6]
    bad = queries[2].set_column(
        queries[2].schema.get_field_index("score"),
        "score",
        pa.array([None] * queries[2].num_rows, pa.float64()),
    )
    with ds.scorer() as scorer:
        with pytest.raises(DuckscoreError) as alone:
            scorer.score(bad)
        with ds.Batcher(scorer, max_batch=16, workers=1) as batcher:
            futures = together(batcher, [*queries[:2], bad, *queries[3:]])
            wait(futures)
            assert batcher.statements == 1  # the six were taken together, in one statement
    for n, future in enumerate(futures):
        if n == 2:
            with pytest.raises(DuckscoreError) as error:
                future.result()
            assert str(error.value) == str(alone.value)
            assert "column 'score' is null" in str(error.value)
        else:
            query_id = queries[n]["query_id"][0].as_py()
            assert dumped(future.result()) == [batch[query_id]]


def test_requests_sharing_a_query_id_get_their_own_lines(
    hits: pa.Table, batch: dict[str, str]
) -> None:
    """Four requests that all call their query `q1` (four SciFact queries renamed) share a
    statement (their ids renamed in it, named back in their lines); one whose hits lack the
    dense source has a statement of its own, and so do two whose integer ids are both 7:
    four statements, each request its own lines."""
    queries = per_query(hits)[:7]

    def named(one: pa.Table, query_id: object, kind: pa.DataType) -> pa.Table:
        return one.set_column(0, "query_id", pa.array([query_id] * one.num_rows, kind))

    text = [named(one, "q1", pa.string()) for one in queries[:4]]
    sparse = queries[4].filter(pc.not_equal(queries[4]["source"], "dense"))
    integer = [named(one, 7, pa.int64()) for one in queries[5:7]]
    given = [*text, sparse, *integer]
    with ds.scorer() as scorer:
        alone = [dumped(scorer.score(one)) for one in given]
        with ds.Batcher(scorer, max_batch=16, workers=1) as batcher:
            answers = [dumped(future.result()) for future in together(batcher, given)]
            statements = batcher.statements
    assert answers == alone
    for n in range(4):  # q1's line is the renamed query's batch line
        expected = json.loads(batch[queries[n]["query_id"][0].as_py()]) | {"query_id": "q1"}
        assert json.loads(answers[n][0]) == expected
    assert [json.loads(answer[0])["query_id"] for answer in answers[5:]] == ["7", "7"]
    assert statements == 4


def test_a_job_that_is_not_per_query_scores_each_request_alone(hits: pa.Table) -> None:
    queries = per_query(hits)[:4]
    job = Job(recipe="opensearch_hybrid", allow_recipe_mismatch=True)
    with Scorer(job) as scorer:
        assert not scorer.per_query
        alone = [dumped(scorer.score(one)) for one in queries]
        with ds.Batcher(scorer, max_batch=16, workers=1) as batcher:
            futures = together(batcher, queries)
            assert [dumped(future.result()) for future in futures] == alone
            assert batcher.statements == 4


def test_bounds_and_a_closed_batcher() -> None:
    with ds.scorer() as scorer:
        with pytest.raises(OptionError, match="--max-batch must be at least 1, got 0"):
            ds.Batcher(scorer, max_batch=0)
        batcher = ds.Batcher(scorer, workers=1)
        batcher.close()
        with pytest.raises(RuntimeError, match="closed"):
            batcher.submit(pa.table({"query_id": ["q"]}))
        with ds.Batcher(workers=1) as lonely, pytest.raises(TypeError, match="no scorer"):
            lonely.submit(pa.table({"query_id": ["q"]}))


def batch_threads() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("duckscore-batch-"))


def test_resized_the_batcher_scores_on_the_new_number_of_threads(
    hits: pa.Table, batch: dict[str, str]
) -> None:
    """resize(3) starts two more threads; resize(1) ends them once idle, and what is submitted
    after is still answered exactly; resize(2) starts one again."""
    queries = per_query(hits)[:6]
    with ds.scorer() as scorer, ds.Batcher(scorer, workers=1) as batcher:
        before = set(batch_threads())
        batcher.resize(3)
        assert batcher.workers == 3
        assert len(set(batch_threads()) - before) == 2
        batcher.resize(1)
        deadline = time.monotonic() + 10
        while len(batch_threads()) > len(before) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert batch_threads() == sorted(before)
        answers = [dumped(batcher.score(one)) for one in queries]
        batcher.resize(2)
        assert len(batch_threads()) == len(before) + 1
    assert answers == [[batch[q] for q in set(one["query_id"].to_pylist())] for one in queries]
    with ds.Batcher(workers=1) as spare, pytest.raises(ValueError, match="1 or more, got 0"):
        spare.resize(0)
    with pytest.raises(RuntimeError, match="closed"):
        batcher.resize(2)


def test_a_batch_waits_for_as_many_as_the_last_held_and_no_longer(hits: pa.Table) -> None:
    """With a window of a second: three submitted together set the size; three submitted one
    after another then go as soon as the third is in (one statement, well within the window); a
    lone request after them waits the window out for company; after that batch of one, a lone
    request goes at once."""
    queries = per_query(hits)[:3]
    with ds.scorer() as scorer, ds.Batcher(scorer, batch_window_ms=1000, workers=1) as batcher:
        assert len([f.result() for f in together(batcher, queries)]) == 3
        before, started = batcher.statements, time.monotonic()
        [future.result() for future in [batcher.submit(one) for one in queries]]
        assert batcher.statements == before + 1 and time.monotonic() - started < 0.9
        started = time.monotonic()
        batcher.score(queries[0])
        assert time.monotonic() - started >= 1.0
        started = time.monotonic()
        batcher.score(queries[0])
        assert time.monotonic() - started < 0.9
