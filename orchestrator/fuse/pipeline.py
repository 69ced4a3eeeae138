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
from ..core.policy import Policy, load_policy
from ..core.progress import SILENT, Progress
from ..core.session import Relations, Session, folder_of
from .log import open_log
from .recipe import FUSE_RECIPE
from .stages import fuse_graph, keeps_source_parents, manifest_fields
from .traces import TraceLog


@dataclass(frozen=True)
class FuseResult:
    out_dir: Path | None  # None: the outputs are tables of the connection (Relations)
    recipe: Policy
    fused_rows: int
    parents: int  # rows of parent_features.parquet (0 when it was not written)
    manifest: dict[str, Any]


def fuse(
    log: Table,
    out_dir: str | Path | Relations,
    recipe: str = DEFAULT_RECIPE,
    overrides: list[str] | None = None,
    settings: EngineSettings | None = None,
    progress: Progress = SILENT,
    explain: bool = True,
    connection: duckdb.DuckDBPyConnection | None = None,
    features: bool = True,
) -> FuseResult:
    """Fuse a retrieval log into out_dir: fused.parquet, parent_features.parquet, manifest.json
    (and spans.parquet for a log of trace spans).
    `explain=False`: fused.parquet's contributions and best_provenance are NULL (faster);
    `features=False`: no parent_features.parquet (fusion alone)."""
    loaded = load_policy(FUSE_RECIPE, recipe, overrides)
    check_output_dir(out_dir, "--out", {"--log": log})
    with Session(settings, progress, connection=connection) as session:
        progress.step(f"checking the log (recipe {loaded.version})")
        opened, fuse_plan = open_log(session, log, loaded)
        progress.step(f"{opened.rows:,} hits from {len(fuse_plan.sources)} sources")
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
                fuse_plan.recipe.as_record(),
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
