"""`fuse()`: a retrieval log in, fused.parquet and parent_features.parquet out."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..common.defaults import DEFAULT_RECIPE
from ..core.connection import EngineSettings
from ..core.inputs import Table
from ..core.outputs import check_output_dir
from ..core.reporting import module_logger
from ..core.session import Relations, Session, folder_of
from .code_plan import CodeTarget, code_inputs
from .log import open_log, open_rerank_scores
from .recipe import load_recipe
from .recipe_view import Recipe
from .stages import fuse_graph, keeps_source_parents, manifest_fields
from .traces import TraceLog

logger = module_logger(__name__)


@dataclass(frozen=True)
class FuseResult:
    out_dir: Path | None  # None: the outputs are tables of the connection (Relations)
    recipe: Recipe
    fused_rows: int
    parents: int  # rows of parent_features.parquet (0 when it was not written)
    manifest: dict[str, Any]


def fuse(
    log: Table,
    out_dir: str | Path | Relations,
    recipe: str = DEFAULT_RECIPE,
    overrides: list[str] | None = None,
    settings: EngineSettings | None = None,
    explain: bool = True,
    connection: duckdb.DuckDBPyConnection | None = None,
    features: bool = True,
    rerank_scores: Table | None = None,
    code: CodeTarget | None = None,
) -> FuseResult:
    """Fuse a retrieval log into out_dir: fused.parquet, parent_features.parquet, manifest.json
    (and spans.parquet for a log of trace spans).
    `explain=False`: fused.parquet's contributions and best_provenance are NULL (faster);
    `features=False`: no parent_features.parquet (fusion alone); `rerank_scores`: the
    re-ranker's scores (query_id, item_id, rerank_score) a recipe's rerank block reads; `code`:
    the entities table the log's blocks map through (docs/code.md), and loc_outputs.jsonl's
    lengths."""
    loaded = load_recipe(recipe, overrides)
    check_output_dir(
        out_dir,
        "--out",
        {"--log": log, "--rerank-scores": rerank_scores, **code_inputs(code)},
    )
    with Session(settings, connection=connection) as session:
        logger.info(f"checking the log (recipe {loaded.version})")
        opened, fuse_plan = open_log(session, log, loaded, code=code)
        open_rerank_scores(session, rerank_scores, fuse_plan)
        logger.info(f"{opened.rows:,} hits from {len(fuse_plan.sources)} sources")
        graph = fuse_graph(
            fuse_plan,
            explain=explain,
            features=features,
            shared=keeps_source_parents(session, fuse_plan),
            spans=isinstance(log, TraceLog),
        )
        with session.publish(out_dir) as out:
            session.materialise(graph, out)
            manifest = out.manifest(
                "fuse",
                fuse_plan.recipe.policy.as_record(),
                {"settings": session.settings.record()},
                **manifest_fields(fuse_plan, explain, features),
            )
    return FuseResult(
        folder_of(out_dir),
        fuse_plan.recipe,
        out.counts["fused.parquet"],
        out.counts.get("parent_features.parquet", 0),
        manifest,
    )
