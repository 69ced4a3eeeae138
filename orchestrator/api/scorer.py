"""`duckscore.scorer(...)`: the policy's decisions on one request, in milliseconds (issue 33).

A Scorer loads the policy and its recipe once, and renders and checks the SQL once per shape of
request (the set of sources, whether ranks are given); a call then only checks the hits as
`duckscore run` checks its log, and runs the same statements on a cursor of its own: safe from
many threads, nothing left behind (the cursor's temp tables go with it), nothing written. The
contract it returns is what `duckscore run` writes to contract.jsonl for those queries, line for
line: the same SQL, serialised by the same DuckDB JSON writer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from ..common.defaults import DEFAULT_POLICY
from ..core.connection import EngineSettings, connect
from ..core.inputs import Table
from ..core.policy import Policy, load_policy
from ..core.render import RenderedSQL
from ..core.session import Session
from ..fuse.log import open_log
from ..fuse.policy_recipe import recipe_for_policy
from ..fuse.recipe import FusePlan
from ..fuse.stages import render_fused, render_parent_features
from ..score.policy import SCORE_POLICY
from ..score.stages import render_parents, render_queries

Hits = Table | Sequence[dict[str, Any]] | pa.RecordBatch | pa.RecordBatchReader


@dataclass(frozen=True)
class Live:
    """One call's results: the contract lines as dicts; the fused items and the scored parents
    as Arrow tables when asked for (`tables=True`)."""

    contract: list[dict[str, Any]]
    fused: pa.Table | None = None
    parents: pa.Table | None = None


@dataclass(frozen=True)
class _Prepared:
    """The statements of one request shape, rendered and checked once."""

    fuse_hits: RenderedSQL
    parent_features: RenderedSQL
    scored_parents: RenderedSQL
    contract: RenderedSQL
    fused: RenderedSQL
    fuse_hits_view: bool


class Scorer:
    """The decisions of `policy` (fused with its recipe) on the hits of one or many queries."""

    def __init__(
        self,
        recipe: str | None = None,
        policy: str = DEFAULT_POLICY,
        set_recipe: Sequence[str] = (),
        set: Sequence[str] = (),
        *,
        top_n: int = 5,
        threads: int = 1,
        allow_recipe_mismatch: bool = False,
    ) -> None:
        self.policy: Policy = load_policy(SCORE_POLICY, policy, list(set))
        self.recipe: Policy = recipe_for_policy(
            self.policy, recipe, list(set_recipe), allow_recipe_mismatch
        )
        if top_n < 1:
            raise ValueError(f"top_n must be at least 1, got {top_n}")
        self.top_n = top_n
        self._con = connect(EngineSettings(threads=threads))
        self._prepared: dict[tuple[Any, ...], _Prepared] = {}
        self._lock = threading.Lock()

    def score(self, hits: Hits, *, tables: bool = False) -> Live:
        """The contract lines of the queries in `hits` (the retrieval log's columns), ordered by
        query_id; with `tables`, also the fused items and the scored parents."""
        cursor = self._con.cursor()
        try:
            session = Session(connection=cursor)
            _, fuse_plan = open_log(session, _as_table(hits), self.recipe, label="hits")
            prepared = self._statements(session, fuse_plan)
            _create(cursor, "fuse_hits", prepared.fuse_hits, view=prepared.fuse_hits_view)
            _create(cursor, "parent_features", prepared.parent_features)
            _create(cursor, "scored_parents", prepared.scored_parents)
            rows = cursor.execute(
                f"SELECT to_json(c)::VARCHAR FROM ({prepared.contract.text}) AS c ORDER BY query_id"
            ).fetchall()
            contract = [json.loads(row[0]) for row in rows]
            if not tables:
                return Live(contract)
            fused = cursor.sql(
                f"SELECT * FROM ({prepared.fused.text}) ORDER BY query_id, rank"
            ).to_arrow_table()
            parents = cursor.sql(
                "SELECT * FROM scored_parents ORDER BY query_id, rank"
            ).to_arrow_table()
            return Live(contract, fused, parents)
        finally:
            cursor.close()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _statements(self, session: Session, fuse_plan: FusePlan) -> _Prepared:
        """The request shape's statements; the first request of a shape checks them with
        sqlglot against its own tables, as `duckscore run` does on every run."""
        key = (tuple(fuse_plan.sources), fuse_plan.has_rank, fuse_plan.log_view)
        with self._lock:
            found = self._prepared.get(key)
        if found is not None:
            return found
        prepared = _Prepared(
            fuse_hits=render_fused(fuse_plan, final="cut"),
            parent_features=render_parent_features(fuse_plan, ordered=False),
            scored_parents=render_parents(self.policy, ordered=False),
            contract=render_queries(
                self.policy, self.top_n, standalone=False, with_query_ids=False
            ),
            fused=render_fused(fuse_plan),
            fuse_hits_view=fuse_plan.has_rank,
        )
        for name in ("fuse_hits", "parent_features", "scored_parents"):
            rendered = getattr(prepared, name)
            session.check(rendered)
            _create(
                session.con, name, rendered, view=name == "fuse_hits" and prepared.fuse_hits_view
            )
        session.check(prepared.contract)
        session.check(prepared.fused)
        with self._lock:
            self._prepared.setdefault(key, prepared)
        return prepared


def _create(
    con: duckdb.DuckDBPyConnection, name: str, rendered: RenderedSQL, view: bool = False
) -> None:
    kind = "VIEW" if view else "TABLE"
    con.execute(f"CREATE OR REPLACE TEMP {kind} {name} AS {rendered.text}")


def _as_table(hits: Hits) -> Table:
    """A list of dicts, a RecordBatch or a stream of them (read once) as an Arrow table; every
    other kind as it is."""
    if isinstance(hits, pa.RecordBatch):
        return pa.Table.from_batches([hits])
    if isinstance(hits, pa.RecordBatchReader):
        return hits.read_all()
    if isinstance(hits, list | tuple):
        return pa.Table.from_pylist(list(hits))
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
) -> Scorer:
    """A Scorer: the policy (and the recipe it was calibrated on, unless `recipe` names one)
    loaded once, its SQL rendered and checked once per request shape."""
    return Scorer(
        recipe,
        policy,
        set_recipe,
        set,
        top_n=top_n,
        threads=threads,
        allow_recipe_mismatch=allow_recipe_mismatch,
    )
