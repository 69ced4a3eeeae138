"""`duckscore demo code`: the bundled code-localization collection (200 commits of
pallets/click) run with recipe code_rrf_v1 through its entities table, and its
loc_outputs.jsonl judged against the bundled gold as `duckscore eval --loc` judges it."""

from __future__ import annotations

from pathlib import Path

from ..core.connection import EngineSettings
from ..core.reporting import silenced
from ..core.resources import fixtures_dir
from ..fusion.code_plan import CodeTarget
from ..fusion.code_stages import LOC_FILE
from ..metrics.localization import LocResult, evaluate_localization
from ..runner.job import Job
from ..runner.pipeline import run

RECIPE = "code_rrf_v1"
# the benchmarks' headline cutoffs: file Acc@1/3/5, module and function Acc@5/10
SHOWN_K = {"file": (1, 3, 5), "module": (5, 10), "function": (5, 10)}


def run_code_demo(out_dir: Path, settings: EngineSettings | None) -> str:
    out_dir, collection = Path(out_dir), fixtures_dir() / "code"
    job = Job(recipe=RECIPE, settings=settings)
    entities = CodeTarget(collection / "entities.parquet")
    result = run(collection / "retrieval_log.parquet", out_dir, job, code=entities)
    with silenced():  # the demo's summary says what the evaluation found
        judged = evaluate_localization(
            out_dir / LOC_FILE,
            collection / "gold.parquet",
            k=[f"{level}={','.join(map(str, ks))}" for level, ks in SHOWN_K.items()],
            settings=settings,
        )
    return "\n".join(
        [
            f"Code-localization demo: {result.queries} commits of pallets/click, recipe "
            f"{result.recipe.version}, entities at every commit's parent",
            "eval --loc against the commits' changes (every gold location among the first k):",
            "",
            *accuracy_lines(judged),
            "",
            f"outputs in {out_dir}/: {LOC_FILE} (found_files, found_modules, found_entities per "
            "instance),",
            "  contract.jsonl (the files scored, policy "
            f"{result.policy.version}), fused.parquet, parent_features.parquet, parents.parquet, "
            "queries.parquet, manifest.json, sql/",
        ]
    )


def accuracy_lines(judged: LocResult) -> list[str]:
    """One line per level: its instances and Acc@k at SHOWN_K."""
    lines = []
    for level, ks in SHOWN_K.items():
        figures = "  ".join(f"Acc@{k} {judged.means[level][f'Acc@{k}']:.3f}" for k in ks)
        lines.append(f"{level:<10}{judged.summaries[level].evaluated:>4} instances  {figures}")
    return lines
