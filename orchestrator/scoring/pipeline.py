"""`score()`: parent features in, parents.parquet, queries.parquet, contract.jsonl out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..common.defaults import DEFAULT_POLICY
from ..core.connection import EngineSettings
from ..core.errors import DuckscoreError
from ..core.inputs import Table
from ..core.outputs import check_output_dir
from ..core.reporting import module_logger
from ..core.session import Relations, Session, folder_of
from .policy_view import ScorePolicy, load_score_policy
from .stages import DecisionCounts, decided, score_graph
from .tables import PARENT_FEATURES, QUERY_IDS

logger = module_logger(__name__)


@dataclass(frozen=True)
class ScoreResult:
    out_dir: Path | None  # None: the outputs are tables of the connection (Relations)
    policy: ScorePolicy
    queries: int
    parents: int
    manifest: dict[str, Any]
    decisions: DecisionCounts


def score(
    features: Table,
    out_dir: str | Path | Relations,
    policy: str = DEFAULT_POLICY,
    overrides: list[str] | None = None,
    queries: Table | None = None,
    top_n: int = 5,
    settings: EngineSettings | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> ScoreResult:
    """Score parent features into `out_dir`: parents.parquet, queries.parquet, contract.jsonl,
    manifest.json and the rendered SQL. Nothing is written unless everything succeeds."""
    if top_n < 1:
        raise DuckscoreError(f"--top-n must be at least 1, got {top_n}")
    loaded = load_score_policy(policy, overrides)
    check_output_dir(out_dir, "--out", {"--features": features, "--queries": queries})
    with Session(settings, connection=connection) as session:
        logger.info(f"checking inputs (policy {loaded.version})")
        opened = session.open("features", PARENT_FEATURES, features, "--features")
        if queries is not None:
            session.open("queries", QUERY_IDS, queries, "--queries")
        logger.info(f"{opened.rows:,} candidate parents")
        graph = score_graph(
            loaded, top_n, with_query_ids=queries is not None, where=f"--features ({opened.given})"
        )
        with session.publish(out_dir) as out:
            session.materialise(graph, out)
            decisions = decided(session, loaded)
            manifest = out.manifest(
                "score", loaded.as_record(), {"top_n": top_n, **session.settings.record()}
            )
    return ScoreResult(
        folder_of(out_dir),
        loaded,
        out.counts["queries.parquet"],
        out.counts["parents.parquet"],
        manifest,
        decisions,
    )
