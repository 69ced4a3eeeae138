"""`duckscore.scorer` (issue 33, part 1): the live contract is the batch contract, line for line —
for all 300 SciFact queries in one call, for one query, for fifty, for a policy with a p_good
map and for the seed's — from every kind of input, from many threads at once, with nothing left
behind; bad hits are one line naming them."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import duckscore as ds
from duckscore.answering.pipeline import score_answers
from duckscore.core.errors import DuckscoreError
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

from ..helpers import FIXTURES, SCIFACT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("scorer")]

LOG = SCIFACT / "retrieval_log.parquet"
ANSWERS_DIR = FIXTURES / "answers"


@pytest.fixture(scope="module")
def hits() -> pa.Table:
    return duckdb.sql(f"FROM read_parquet('{LOG}')").to_arrow_table()


def batch_contract(tmp_path: Path, policy: str) -> dict[str, dict]:
    """`duckscore run`'s contract.jsonl, by query_id, as JSON."""
    run(LOG, tmp_path / policy, Job(policy=policy))
    lines = (tmp_path / policy / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    return {line["query_id"]: line for line in map(json.loads, lines)}


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict]]:
    folder = tmp_path_factory.mktemp("batch")
    return {policy: batch_contract(folder, policy) for policy in ("overall_v3", "overall_v1")}


def of_queries(hits: pa.Table, queries: list[str]) -> pa.Table:
    return hits.filter(pa.compute.is_in(hits["query_id"], pa.array(queries)))


@pytest.mark.parametrize("policy", ["overall_v3", "overall_v1"])
def test_all_of_scifact_in_one_call_is_the_batch_contract(
    hits: pa.Table, batches: dict[str, dict[str, dict]], policy: str
) -> None:
    with ds.scorer(policy=policy) as scorer:
        live = scorer.score(hits).contract
    batch = batches[policy]
    assert [line["query_id"] for line in live] == sorted(batch)
    assert live == [batch[line["query_id"]] for line in live]  # keys, values, floats: equal
    assert ("p_good" in live[0]) == (policy == "overall_v3")


def test_one_and_fifty_queries_give_their_batch_lines(
    hits: pa.Table, batches: dict[str, dict[str, dict]]
) -> None:
    batch = batches["overall_v3"]
    queries = sorted(batch)
    with ds.scorer() as scorer:
        for chosen in ([queries[0]], [queries[-1]], queries[100:150]):
            live = scorer.score(of_queries(hits, chosen)).contract
            assert live == [batch[q] for q in sorted(chosen)]


def test_every_kind_of_input_gives_the_same_lines(hits: pa.Table) -> None:
    one = of_queries(hits, ["1", "3"])
    with ds.scorer() as scorer:
        expected = scorer.score(one).contract
        kinds = (one.to_pylist(), one.to_pandas(), pl.from_arrow(one), duckdb.arrow(one),
                 one.to_batches()[0], one.to_reader())  # fmt: skip
        for given in kinds:
            assert scorer.score(given).contract == expected
        with pytest.raises(DuckscoreError, match=r"^hits: cannot read an object of type dict"):
            scorer.score({"query_id": "1"})  # type: ignore[arg-type]
        tables = scorer.score(one, tables=True)
    assert tables.contract == expected
    assert set(tables.fused.column("query_id").to_pylist()) == {"1", "3"}
    assert tables.parents.num_rows == len(
        set(zip(tables.fused["query_id"].to_pylist(), tables.fused["item_id"].to_pylist()))
    )


def test_many_threads_at_once_and_nothing_left_behind(
    hits: pa.Table, batches: dict[str, dict[str, dict]]
) -> None:
    batch = batches["overall_v3"]
    queries = sorted(batch)[:40]
    with ds.scorer() as scorer:
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(
                pool.map(lambda q: scorer.score(of_queries(hits, [q])).contract, queries)
            )
        left = scorer._con.execute(  # the base connection: each call's tables went with its cursor
            "SELECT count(*) FROM duckdb_tables() WHERE temporary"
        ).fetchone()
    assert results == [[batch[q]] for q in queries]
    assert left == (0,)


def test_bad_hits_are_one_line_naming_them(hits: pa.Table) -> None:
    broken = of_queries(hits, ["1"]).to_pandas()
    broken.loc[3, "score"] = float("nan")
    with ds.scorer() as scorer, pytest.raises(DuckscoreError) as raised:
        scorer.score(broken)
    message = str(raised.value)
    # pandas' NaN is DuckDB's NULL: the message says which row and column, as `run` would
    assert message.startswith("hits (<DataFrame>, row 4, query_id='1'") and "'score'" in message
    assert "\n" not in message


def test_the_policys_recipe_is_used_and_another_refused() -> None:
    assert ds.scorer().recipe.version == "canonical_rrf"
    with pytest.raises(DuckscoreError, match="--recipe: recipe hybrid_v1 is not the recipe"):
        ds.scorer(recipe="hybrid_v1")
    assert ds.scorer(recipe="hybrid_v1", policy="overall_v1").recipe.version == "hybrid_v1"


def test_an_empty_request_is_refused_as_run_refuses_it() -> None:
    empty = pd.DataFrame(
        {"query_id": pd.Series(dtype=str), "source": pd.Series(dtype=str),
         "item_id": pd.Series(dtype=str), "parent_id": pd.Series(dtype=str),
         "score": pd.Series(dtype=float)}
    )  # fmt: skip
    with (
        ds.scorer() as scorer,
        pytest.raises(DuckscoreError, match=r"^hits \(<DataFrame>\): no rows$"),
    ):
        scorer.score(empty)


@pytest.mark.parametrize("with_events", [False, True])
def test_answers_are_the_batch_contract(tmp_path: Path, with_events: bool) -> None:
    """Seed 001 on the bundled answers: `duckscore answers`' contract.jsonl, line for line."""
    tables = {name: ANSWERS_DIR / f"{name}.csv" for name in ("answers", "citations", "chunks")}
    events = ANSWERS_DIR / "events.csv" if with_events else None
    score_answers(
        tables["answers"], tables["citations"], tables["chunks"], tmp_path / "batch", events=events
    )
    batch = [json.loads(line) for line in (tmp_path / "batch" / "contract.jsonl").open()]
    frames = {name: pd.read_csv(path, dtype=str) for name, path in tables.items()}
    read = duckdb.connect()
    typed = {  # the live call gets Arrow tables read by DuckDB, as a service would pass its rows
        name: read.sql(f"FROM read_csv('{path}')").to_arrow_table() for name, path in tables.items()
    }
    with ds.scorer() as scorer:
        live = scorer.answers(
            typed["answers"],
            typed["citations"],
            typed["chunks"],
            None if events is None else read.sql(f"FROM read_csv('{events}')").to_arrow_table(),
        ).contract
    assert live == batch
    assert len(frames["answers"]) == len(live)


def test_the_warm_path_refuses_what_run_refuses_of_a_payload() -> None:
    """The probe of a lane (api/lanes.py) knows the log's payload rules: after a good call of a
    shape, lines that run backwards or a source of two granularities take the checked path,
    which refuses them naming the row."""
    good = pd.DataFrame({"query_id": ["q", "q"], "source": ["s", "s"], "item_id": ["a.py:1:2", "b.py:1:3"],
                         "parent_id": ["a.py", "b.py"], "score": [2.0, 1.0],
                         "granularity": ["block", "block"], "start_line": [1, 1], "end_line": [2, 3]})  # fmt: skip
    backwards = good.assign(start_line=[1, 4])
    mixed = good.assign(granularity=["block", "doc"])
    with ds.scorer() as scorer:
        scorer.score(good)
        with pytest.raises(DuckscoreError, match=r"row 2.*lines '4-3' run backwards"):
            scorer.score(backwards)
        with pytest.raises(DuckscoreError, match=r"row 2.*source 's' mixes granularities"):
            scorer.score(mixed)
