"""`duckscore.scorer(...)`: the policy's decisions on one request, in milliseconds (issue 33).

A Scorer loads the policy and its recipe once, and renders and checks the SQL once per shape of
request (the set of sources, whether ranks are given); a call then only checks the hits as
`duckscore run` checks its log, and runs the same statements on a cursor of its own: safe from
many threads, nothing left behind (the cursor's temp tables go with it), nothing written. The
contract it returns is what `duckscore run` writes to contract.jsonl for those queries, line for
line: the same SQL, serialised by the same DuckDB JSON writer.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from ..answering.pipeline import open_answer_inputs
from ..answering.policy import AnswerPolicy, load_answer_policy
from ..answering.stages import render_answers, render_contract
from ..common.defaults import DEFAULT_POLICY
from ..core.connection import EngineSettings, connect
from ..core.errors import InputError, PolicyError
from ..core.graph import Graph
from ..core.inputs import Table
from ..core.render import RenderedSQL, ident
from ..core.session import Session
from ..core.validate import raw_view
from ..fusion.contract import RERANK_SCORES, RETRIEVAL_LOG
from ..fusion.log import open_log
from ..fusion.recipe import FusePlan
from ..fusion.recipe_view import Rerank
from ..fusion.stages import FUSED_ITEMS, LOG, RERANKED_ITEMS, fuse_graph
from ..runner.graph import run_graph
from ..runner.job import Job
from ..scoring.stages import SCORE_CONTRACT, SCORED_PARENTS
from .lanes import Lanes, json_lines_sql, read_json_lines
from .live_settings import LiveSettings

Hits = Table | Sequence[dict[str, Any]] | pa.RecordBatch | pa.RecordBatchReader
# issue 48 §5: (query text, the top_n candidates' snippets, best first) -> a score each (None:
# the candidate is not scored)
Reranker = Callable[[str, list[str]], Sequence[float | None]]


@dataclass(frozen=True)
class Live:
    """One call's results: the contract lines as dicts; the fused items and the scored parents
    as Arrow tables when asked for (`tables=True`)."""

    contract: list[dict[str, Any]]
    fused: pa.Table | None = None
    parents: pa.Table | None = None


@dataclass(frozen=True)
class _Prepared:
    """The run graph of one request shape, checked once, and its contract as one statement
    (the stages it reads as its CTEs)."""

    graph: Graph
    contract: str


class Scorer:
    """The decisions of a job's policy (fused with its recipe) on the hits of one or many
    queries; `duckscore.scorer(...)` builds the job from keywords."""

    def __init__(
        self,
        job: Job,
        answer_policy: str = "answer_v1",
        reranker: Reranker | None = None,
        live: LiveSettings | None = None,
    ) -> None:
        self.job = job
        loaded = job.load()
        self.recipe, self.policy = loaded
        # why a query's numbers may depend on the others scored with it: () when per query,
        # and only then may requests share a statement (api/batcher.py)
        self.cross_query = loaded.cross_query
        self.rerank: Rerank | None = self.recipe.rerank
        if self.rerank is not None and reranker is None:
            raise PolicyError(
                f"recipe {self.recipe.version} re-ranks (rerank.top_n {self.rerank.top_n}): "
                "give scorer(..., reranker=callable)"
            )
        if self.rerank is None and reranker is not None:
            raise PolicyError(
                f"reranker: recipe {self.recipe.version} has no rerank block to use it "
                "(set rerank.top_n and rerank.mode)"
            )
        self.reranker = reranker
        self.answer_policy: AnswerPolicy = load_answer_policy(answer_policy)
        self.top_n = job.top_n
        self._con = connect(job.settings)
        self._prepared: dict[tuple[Any, ...], _Prepared] = {}
        self._answer_sql: dict[bool, tuple[RenderedSQL, RenderedSQL]] = {}
        self._lock = threading.Lock()
        self._lanes = Lanes(
            lambda: connect(job.settings), self.recipe, self._contract_sql, live or LiveSettings()
        )

    def score(self, hits: Hits, *, tables: bool = False) -> Live:
        """The contract lines of the queries in `hits` (the retrieval log's columns), ordered by
        query_id; with `tables`, also the fused items and the scored parents."""
        given = as_table(hits)
        if tables:
            return self._score_checked(given, tables=True)
        warm = self._lanes.contract(given)
        if warm is not None:
            return Live(warm)
        live = self._score_checked(given, tables=False)
        self._lanes.open(given)  # the next hits of this shape take the warm path
        return live

    def _score_checked(self, hits: Table, tables: bool) -> Live:
        """The hits checked and scored on a cursor of their own; a refusal names the row."""
        cursor = self._con.cursor()
        try:
            session = Session(connection=cursor)
            _, fuse_plan = open_log(session, hits, self.recipe, label="hits")
            if self.reranker is not None:
                given = {column.lower() for column in session.schema(raw_view(RETRIEVAL_LOG))}
                missing = {"snippet", "query_text"} - given
                if missing:
                    raise InputError(
                        f"hits: the reranker reads columns snippet and query_text; "
                        f"{', '.join(sorted(missing))} missing"
                    )
            prepared = self._statements(session, fuse_plan)
            if not tables:  # one statement: DuckDB plans it once, nothing is materialised
                return Live(_json_lines(cursor, prepared.contract, "query_id"))
            final = FUSED_ITEMS
            if self.reranker is not None:
                self._rerank(session, fuse_plan, self.reranker)
                final = RERANKED_ITEMS
            session.materialise(prepared.graph)
            contract = _json_lines(cursor, f"SELECT * FROM {SCORE_CONTRACT}", "query_id")
            fused = prepared.graph.render(final).text
            by_rank = " ORDER BY query_id, rank"
            return Live(
                contract,
                cursor.sql(f"SELECT * FROM ({fused}){by_rank}").to_arrow_table(),
                cursor.sql(f"SELECT * FROM {SCORED_PARENTS}{by_rank}").to_arrow_table(),
            )
        finally:
            cursor.close()

    def answers(
        self, answers: Hits, citations: Hits, chunks: Hits, events: Hits | None = None
    ) -> Live:
        """Seed 001's answer confidence of the logged answers (and contradiction events): the
        lines `duckscore answers` writes to contract.jsonl for them, ordered by answer_id."""
        cursor = self._con.cursor()
        try:
            session = Session(connection=cursor)
            open_answer_inputs(
                session,
                self.answer_policy,
                as_table(answers),
                as_table(citations),
                as_table(chunks),
                None if events is None else as_table(events),
            )
            scored, contract = self._answer_statements(session, events is not None)
            _create(cursor, "scored_answers", scored)
            return Live(_json_lines(cursor, contract.text, "answer_id"))
        finally:
            cursor.close()

    @property
    def per_query(self) -> bool:
        """No reason in `cross_query`: requests may share a statement."""
        return not self.cross_query

    @property
    def lanes(self) -> Lanes:
        """The warm lanes (their DuckDB instances opened, closed and recycled: api/lanes.py)."""
        return self._lanes

    def close(self) -> None:
        self._lanes.close()
        self._con.close()

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _statements(self, session: Session, fuse_plan: FusePlan) -> _Prepared:
        """The request shape's statements; the first request of a shape checks them with
        sqlglot against its own tables, as `duckscore run` does on every run."""
        key = (
            tuple(fuse_plan.sources),
            fuse_plan.has_rank,
            fuse_plan.log_view,
            fuse_plan.has_snippet,
        )
        with self._lock:
            found = self._prepared.get(key)
        if found is not None:
            return found
        # the same SQL for every request of the shape: no block-type mask read off these hits
        graph = run_graph(fuse_plan, self.policy, self.top_n, portable=True)
        # every stage checked against the tables before it; the re-ranked items (which read
        # the re-ranker's scores, only called for the fused items) when they are asked
        session.materialise(graph.subgraph([n for n in graph.names if n != RERANKED_ITEMS]))
        prepared = _Prepared(graph, graph.chain(SCORE_CONTRACT).sql())
        with self._lock:
            self._prepared.setdefault(key, prepared)
        return prepared

    def _rerank(self, session: Session, fuse_plan: FusePlan, reranker: Reranker) -> None:
        """The input rerank_scores: `reranker` called once per query on its query text (the
        first non-NULL of its hits, '' when none) and the snippets of its top_n fused items,
        best first (the snippet of each item's best hit: best_provenance; '' when NULL),
        checked as --rerank-scores is: a score each, None for an item it does not score."""
        assert self.rerank is not None
        top_n = self.rerank.top_n
        fused = fuse_graph(fuse_plan, features=False, portable=True).chain(FUSED_ITEMS).sql()
        rows = session.con.execute(
            f"SELECT f.query_id, list(f.item_id ORDER BY f.rank), "
            f"list(coalesce(f.best_provenance.snippet, '') ORDER BY f.rank), "
            f"coalesce(any_value(q.query_text), '') "
            f"FROM ({fused}) AS f LEFT JOIN (SELECT query_id, min(query_text) AS query_text "
            f"FROM {ident(LOG)} GROUP BY query_id) AS q ON q.query_id = f.query_id "
            f"WHERE f.rank <= {top_n} GROUP BY f.query_id ORDER BY f.query_id"
        ).fetchall()
        scored: dict[str, list[Any]] = {"query_id": [], "item_id": [], "rerank_score": []}
        for query_id, items, snippets, query_text in rows:
            scores = list(reranker(query_text, list(snippets)))
            if len(scores) != len(items):
                raise InputError(
                    f"reranker (query_id={query_id!r}): {len(scores)} scores for "
                    f"{len(items)} candidates"
                )
            for item_id, value in zip(items, scores, strict=True):
                number = _number(value)
                if number is None:  # no score: the item's rerank_score is NULL
                    continue
                if not math.isfinite(number):
                    number = math.nan  # refused by the contract, naming the row
                scored["query_id"].append(query_id)
                scored["item_id"].append(item_id)
                scored["rerank_score"].append(number)
        types = {"query_id": pa.string(), "item_id": pa.string(), "rerank_score": pa.float64()}
        table = pa.table({name: pa.array(scored[name], kind) for name, kind in types.items()})
        session.open(RERANK_SCORES.name, RERANK_SCORES, table, "reranker")

    def _contract_sql(self, session: Session, fuse_plan: FusePlan) -> str:
        return json_lines_sql(self._statements(session, fuse_plan).contract, "query_id")

    def _answer_statements(
        self, session: Session, with_events: bool
    ) -> tuple[RenderedSQL, RenderedSQL]:
        with self._lock:
            found = self._answer_sql.get(with_events)
        if found is not None:
            return found
        scored = render_answers(self.answer_policy, with_events, ordered=False)
        contract = render_contract(self.answer_policy, with_events, standalone=False)
        session.check(scored)
        _create(session.con, "scored_answers", scored)
        session.check(contract)
        with self._lock:
            self._answer_sql.setdefault(with_events, (scored, contract))
        return scored, contract


def _number(value: Any) -> float | None:
    """A re-ranker's score as a float (None for None: the re-ranker gave the item none)."""
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"reranker: score {value!r} is not a number") from None


def _json_lines(con: duckdb.DuckDBPyConnection, query: str, key: str) -> list[dict[str, Any]]:
    return read_json_lines(con, json_lines_sql(query, key))


def _create(con: duckdb.DuckDBPyConnection, name: str, rendered: RenderedSQL) -> None:
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {rendered.text}")


def as_table(hits: Hits) -> Table:
    """A list of dicts, a RecordBatch or a stream of them (read once), a DuckDB relation, as an
    Arrow table; every other kind as it is."""
    if isinstance(hits, pa.RecordBatch):
        return pa.Table.from_batches([hits])
    if isinstance(hits, pa.RecordBatchReader):
        return hits.read_all()
    if isinstance(hits, list | tuple):
        return pa.Table.from_pylist(list(hits))
    if isinstance(hits, duckdb.DuckDBPyRelation):  # of another connection: read through Arrow
        return hits.to_arrow_table()
    return hits


def scorer(
    recipe: str | None = None,
    policy: str = DEFAULT_POLICY,
    set_recipe: Sequence[str] = (),
    set: Sequence[str] = (),
    *,
    top_n: int = 5,
    threads: int = 1,
    allow_recipe_mismatch: bool = False,
    answer_policy: str = "answer_v1",
    reranker: Reranker | None = None,
    recycle_calls: int = 2000,
    recycle_drift: float = 1.3,
) -> Scorer:
    """`duckscore.scorer(...)`: a Scorer of the job these keywords describe (`recipe` None: the
    recipe the policy was calibrated on); a recipe that is not the policy's is refused.
    `reranker(query_text, candidates) -> scores`: the re-ranker a recipe's rerank block reads,
    called per query on its top_n fused items' snippets when the fused items are asked
    (`score(..., tables=True)`; the decisions read the hits, not the fused order).
    `recycle_calls`, `recycle_drift`: when a calling thread's DuckDB instance is replaced
    (LiveSettings); `duckscore.Batcher(scorer)` scores requests that arrive together at once."""
    job = Job(
        recipe=recipe, policy=policy, recipe_overrides=tuple(set_recipe),
        policy_overrides=tuple(set), top_n=top_n, allow_recipe_mismatch=allow_recipe_mismatch,
        settings=EngineSettings(threads=threads),
    )  # fmt: skip
    live = LiveSettings(recycle_calls=recycle_calls, recycle_drift=recycle_drift)
    return Scorer(job, answer_policy, reranker, live)
