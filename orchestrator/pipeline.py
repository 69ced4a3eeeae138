"""`duckscore run`: fuse a retrieval log (seed 003), then score its parents (seed 000), one call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .contracts import QUERY_IDS
from .engine import EngineSettings, connect
from .errors import DuckscoreError
from .fuse import FUSE_RECIPE, fuse_manifest, open_log, write_fuse_outputs, write_sql
from .inputs import open_input
from .outputs import atomic_output_dir, write_json
from .policy import Policy, load_policy
from .progress import SILENT, Progress
from .score import SCORE_POLICY, score_tables, write_score_outputs


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    recipe: Policy
    policy: Policy
    queries: int
    parents: int
    manifest: dict[str, Any]


def run(log: str | Path | pd.DataFrame, out_dir: str | Path, recipe: str = "hybrid_v1",
        policy: str = "overall_v1", recipe_overrides: list[str] | None = None,
        policy_overrides: list[str] | None = None, queries: str | Path | pd.DataFrame | None = None,
        top_n: int = 5, settings: EngineSettings | None = None,
        progress: Progress = SILENT) -> RunResult:
    """Fuse then score into out_dir: fused.parquet, parent_features.parquet, parents.parquet,
    queries.parquet, contract.jsonl, manifest.json (recipe and policy) and the rendered SQL."""
    if top_n < 1:
        raise DuckscoreError(f"--top-n must be at least 1, got {top_n}")
    loaded_recipe = load_policy(FUSE_RECIPE, recipe, recipe_overrides)
    loaded_policy = load_policy(SCORE_POLICY, policy, policy_overrides)
    con = connect(settings)
    progress.step(f"checking the log (recipe {loaded_recipe.version}, policy {loaded_policy.version})")
    opened, fuse_plan = open_log(con, log, loaded_recipe)
    inputs = {"log": opened}
    if queries is not None:
        inputs["queries"] = open_input(con, QUERY_IDS, queries, "--queries")
    progress.step(f"{opened.rows:,} hits from {len(fuse_plan.sources)} sources")
    with atomic_output_dir(Path(out_dir)) as stage:
        rendered, counts = write_fuse_outputs(con, fuse_plan, stage, progress)
        progress.step("scoring parents")
        rendered += score_tables(con, loaded_policy, top_n, with_query_ids=queries is not None)
        progress.step("writing scores and the contract")
        counts |= write_score_outputs(con, stage)
        manifest = fuse_manifest(fuse_plan, rendered, inputs, counts, settings)
        manifest.update(command="run", score_policy=loaded_policy.as_record(), top_n=top_n)
        write_sql(stage, rendered)
        write_json(stage / "manifest.json", manifest)
    return RunResult(Path(out_dir), fuse_plan.recipe, loaded_policy, counts["queries.parquet"],
                     counts["parents.parquet"], manifest)
