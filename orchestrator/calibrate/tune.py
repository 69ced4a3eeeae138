"""`tune()`: a fusion recipe's parameters chosen on relevance judgments (`duckscore tune`).

1. Every grid point is the base recipe with `--set-recipe`-style overrides (keys checked as
   `--set-recipe` checks them). Its fusion is sql/fuse/fused.sql for that recipe, as a view.
2. sql/calibrate/tune_runs.sql tags each grid point's ranking and the judgments with the grid
   point; sql/metrics/per_query.sql then evaluates every grid point on every query in one
   DuckDB query. The base recipe is evaluated in the same query.
3. Folds (calibrate/tune_grid.py): each fold's choice is the grid point best on the other folds,
   scored on the fold; the cross-validated metric is the mean of those held-out values, compared
   with the base recipe by sql/metrics/significance.sql's paired randomization test. The recipe
   written is the grid point best on every query.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.connection import EngineSettings
from ..core.errors import PolicyError
from ..core.inputs import Table
from ..core.outputs import atomic_output_dir, atomic_output_file, check_output_file
from ..core.policy import dump_yaml, load_policy
from ..core.render import render
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.version import __version__
from ..fusion.log import open_log
from ..fusion.plugins import plugins_relative_to
from ..fusion.recipe import FUSE_RECIPE, FusePlan, load_recipe, plan, refuse_rerank
from ..fusion.recipe_view import Recipe
from ..fusion.stages import FUSED_ITEMS, RANKED_LOG, fuse_graph
from ..metrics.catalog import Metric, parse_metrics
from ..metrics.retrieval import render_per_query
from ..metrics.significance import p_value_text
from ..metrics.tables import open_qrels
from .tune_grid import (
    Axis,
    Selection,
    TuneError,
    as_overrides,
    assign_folds,
    grid_points,
    parse_grid,
)
from .tune_grid import select as select_grid_point

logger = module_logger(__name__)

GRID_KIND = replace(FUSE_RECIPE, override_option="--grid")  # errors name --grid
KEY_WIDTH = 6  # grid point keys g000001: … (the base recipe is g000000:)


@dataclass(frozen=True)
class TuneResult:
    out_path: Path
    document: dict[str, Any]
    axes: list[Axis]
    points: list[dict[str, Any]]
    metric: str
    base_version: str
    selection: Selection
    base_mean: float  # the base recipe's mean on every query (its cross-validated value: untuned)
    p_value: float  # held-out values against the base's, paired randomization test
    permutations: int
    seed: int
    folds: dict[str, int]  # query_id -> its fold
    per_query: pd.DataFrame  # grid_point (0 the base, 1… the grid), query_id, value

    @property
    def difference(self) -> float:
        return self.selection.cross_validated - self.base_mean


def tune(
    log: Table,
    qrels: Table,
    grid: Sequence[str],
    out: str | Path,
    *,
    recipe: str = "canonical_rrf",
    recipe_overrides: Sequence[str] = (),
    metric: str = "ndcg@10",
    folds: int = 5,
    seed: int = 42,
    version: str | None = None,
    report_dir: str | Path | None = None,
    permutations: int = 10_000,
    settings: EngineSettings | None = None,
) -> TuneResult:
    """Choose the grid point of `recipe` (with `recipe_overrides`, fixed) with the best
    `metric` on `qrels`; write it to `out`."""
    check_counts(folds, version, permutations)
    inputs = {"--log": log, "--qrels": qrels}
    if Path(recipe).is_file():  # a recipe file, not a packaged name
        inputs["--recipe"] = recipe
    check_output_file(out, "--out", inputs, "yaml")  # before any work
    parsed = parse_metrics(metric)
    if len(parsed) != 1:
        raise TuneError(f"--metric {metric!r}: give one metric")
    axes = parse_grid(grid)
    points = grid_points(axes)
    fixed = list(recipe_overrides)
    base = load_recipe(recipe, fixed)
    refuse_rerank(base, "tune")
    recipes = [base] + [grid_recipe(recipe, fixed, point) for point in points]
    with Session(settings) as session:
        logger.info(f"checking inputs (base recipe {base.version})")
        opened, base_plan = open_log(session, log, base)
        judged, _ = open_qrels(session, qrels)
        session.execute("CREATE OR REPLACE TEMP TABLE tune_qrels AS SELECT * FROM eval_qrels")
        logger.info(f"{len(points)} grid points of {opened.rows:,} hits, {parsed[0].key}")
        per_query = evaluate_grid(session, base_plan, recipes, parsed[0])
        if per_query.empty:
            raise TuneError(f"--qrels ({judged.given}): no judged query to tune on")
        values = [
            dict(zip(group["query_id"], group["value"]))
            for _, group in per_query.groupby("grid_point", sort=True)
        ]
        queries = sorted(values[0])
        if folds > len(queries):
            raise TuneError(f"--folds {folds}: more folds than the {len(queries)} judged queries")
        assignment = assign_folds(queries, folds, seed)
        selection = select_grid_point(values[1:], assignment)
        base_mean = math.fsum(values[0].values()) / len(queries)
        logger.info(f"paired randomization test over {len(queries):,} queries")
        p_value = paired_p_value(
            session, parsed[0], selection.held_out, values[0], permutations, seed
        )
    result = TuneResult(
        Path(out),
        {},
        axes,
        points,
        parsed[0].key,
        base.version,
        selection,
        base_mean,
        p_value,
        permutations,
        seed,
        assignment,
        per_query,
    )
    chosen = recipes[selection.best + 1]
    document = recipe_document(
        result, chosen, version, {"log": opened.given, "qrels": judged.given}
    )
    document = plugins_relative_to(document, Path(out))
    with atomic_output_file(out, "--out", inputs, "yaml") as staging:
        staging.write_text(dump_yaml(document), encoding="utf-8")
    if report_dir is not None:
        write_report(Path(report_dir), result)
    return replace(result, document=document)


def check_counts(folds: int, version: str | None, permutations: int) -> None:
    """The options tune and learn share, checked before any work."""
    if folds < 2:
        raise TuneError(f"--folds {folds}: at least 2")
    if version is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", version):
        raise TuneError(
            f"--version {version!r}: a recipe_id is letters, digits, _ . and -, "
            "starting with a letter or digit"
        )
    if permutations < 1:
        raise TuneError(f"--permutations {permutations}: at least 1")


def grid_recipe(recipe: str, fixed: list[str], point: dict[str, Any]) -> Recipe:
    """The base recipe with the grid point's overrides; an error names the grid point."""
    try:
        return Recipe.of(load_policy(GRID_KIND, recipe, fixed + as_overrides(point)))
    except PolicyError as exc:
        if str(exc).startswith("--grid"):
            raise
        raise PolicyError(f"--grid point {' '.join(as_overrides(point))}: {exc}") from None


def evaluate_grid(
    session: Session, base_plan: FusePlan, recipes: list[Recipe], metric: Metric
) -> pd.DataFrame:
    """Each recipe's metric on every judged query (the views eval_qrels and tune_qrels open):
    grid_point (the recipe's index), query_id, value."""
    log_sources = sorted({*base_plan.sources, *base_plan.ignored_sources})
    keyed = []
    for index, loaded in enumerate(recipes):
        point_plan = plan(
            loaded, log_sources, base_plan.has_rank, base_plan.log_view, base_plan.has_snippet
        )
        view = f"tune_fused_{index}"
        create_fused_view(session, point_plan, view, "ranked", f"tune_ranked_{index}")
        keyed.append({"key": f"g{index:0{KEY_WIDTH}d}:", "view": view})
    for name, final in (("eval_run", "runs"), ("eval_qrels", "qrels")):
        rendered = render(
            "calibrate/tune_runs.sql",
            grid_points=keyed,
            inputs={"qrels": "tune_qrels"},
            final=final,
        )
        session.create(name, rendered, view=True)
    logger.info(f"evaluating {len(recipes)} recipes in one query")
    session.create("tune_per_query", render_per_query([metric], "rank"))
    return session.frame(
        f"SELECT CAST(substr(query_id, 2, {KEY_WIDTH}) AS INTEGER) AS grid_point, "
        f"substr(query_id, {KEY_WIDTH + 3}) AS query_id, "
        f"CAST({metric.column} AS DOUBLE) AS value "
        "FROM tune_per_query ORDER BY grid_point, query_id"
    )


def paired_p_value(
    session: Session,
    metric: Metric,
    held_out: dict[str, float],
    base: dict[str, float],
    permutations: int,
    seed: int,
) -> float:
    """`held_out` against `base`, query by query: sql/metrics/significance.sql's paired
    two-sided randomization test, as `eval --baseline` computes it."""
    paired = pd.DataFrame(
        {
            "metric": metric.key,
            "query_id": list(held_out),
            "run_value": list(held_out.values()),
            "baseline_value": [base[q] for q in held_out],
        }
    )
    session.register("tune_paired", paired)
    rendered = render(
        "metrics/significance.sql",
        inputs={"paired": "tune_paired"},
        test="randomization",
        permutations=permutations,
        seed=seed,
    )
    return float(session.rows(rendered)[0]["p_value"])


def tuned_version(base_version: str) -> str:
    """`<base>_tuned`: a recipe_id may not hold the `+` of an overridden version."""
    return base_version.replace("+", "_") + "_tuned"


def recipe_document(
    result: TuneResult, chosen: Recipe, version: str | None, inputs: dict[str, str]
) -> dict[str, Any]:
    """The chosen recipe, complete (it loads without its base), with the tuning in `metadata`."""
    s = result.selection
    values = result.points[s.best]
    shown = ", ".join(f"{k}={v}" for k, v in values.items())
    return {
        "recipe_id": version or tuned_version(result.base_version),
        "parent_version": result.base_version,
        "description": f"{result.base_version} with {shown} (duckscore tune: {result.metric} "
        f"{s.cross_validated:.4f} cross-validated, {result.base_mean:.4f} for the base).",
        "metadata": {
            "duckscore_version": __version__,
            "inputs": inputs,
            "tune": {
                "base": result.base_version,
                "metric": result.metric,
                "folds": len(s.folds),
                "seed": result.seed,
                "grid": {axis.key: list(axis.values) for axis in result.axes},
                "grid_points": len(result.points),
                "chosen": dict(values),
                "queries": len(s.held_out),
                "cross_validated": {
                    "tuned": s.cross_validated,
                    "base": result.base_mean,
                    "difference": result.difference,
                    "p_value": result.p_value,
                    "test": f"paired two-sided randomization, {result.permutations} "
                    f"permutations, seed {result.seed}",
                },
                "all_queries": {"tuned": s.means[s.best], "base": result.base_mean},
                "per_fold": [
                    {
                        "fold": f.fold,
                        "chosen": dict(result.points[f.grid_point]),
                        "train": f.train_mean,
                        "test": f.test_mean,
                        "queries": f.test_queries,
                    }
                    for f in s.folds
                ],
            },
        },
        **chosen.policy.parameters.thawed(),
    }


def report_frames(result: TuneResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """grid.csv (grid_point, its values, fold: `all` or 0…, queries, mean; grid point 0 is the
    base recipe) and folds.csv (fold, the grid point it chose, train and test means)."""
    frame = result.per_query.assign(fold=result.per_query["query_id"].map(result.folds))
    rows = []
    labelled = [dict.fromkeys(result.points[0])] + result.points
    for g, values in enumerate(labelled):
        group = frame[frame["grid_point"] == g]
        parts = [("all", group)] + [
            (str(f.fold), group[group["fold"] == f.fold]) for f in result.selection.folds
        ]
        for fold, part in parts:
            rows.append(
                {"grid_point": g, **values, "fold": fold, "queries": len(part),
                 "mean": math.fsum(part["value"]) / len(part)}
            )  # fmt: skip
    chosen = pd.DataFrame(
        [
            {"fold": f.fold, "grid_point": f.grid_point + 1, "train_mean": f.train_mean,
             "test_mean": f.test_mean, "test_queries": f.test_queries}
            for f in result.selection.folds
        ]
    )  # fmt: skip
    return pd.DataFrame(rows), chosen


def write_report(report_dir: Path, result: TuneResult) -> None:
    grid, chosen = report_frames(result)
    with atomic_output_dir(report_dir, "--report") as staging:
        grid.to_csv(staging / "grid.csv", index=False)
        chosen.to_csv(staging / "folds.csv", index=False)


def format_summary(result: TuneResult) -> str:
    """What `duckscore tune` prints: the chosen values and the metric, tuned against the base."""
    s = result.selection
    values = ", ".join(f"{k}={v}" for k, v in result.points[s.best].items())
    width = max(len(result.metric), len("cross-validated")) + 2
    lines = [
        f"chosen: {values} (grid point {s.best + 1} of {len(result.points)})",
        "",
        f"{result.metric:<{width}}{'tuned':>10}{'base':>10}{'difference':>12}{'p-value':>10}",
        f"{'cross-validated':<{width}}{s.cross_validated:>10.6f}{result.base_mean:>10.6f}"
        f"{result.difference:>+12.6f}{p_value_text(result.p_value, result.permutations):>10}",
        f"{'all queries':<{width}}{s.means[s.best]:>10.6f}{result.base_mean:>10.6f}"
        f"{s.means[s.best] - result.base_mean:>+12.6f}",
        "",
        f"{len(s.folds)} folds (seed {result.seed}) over {len(s.held_out):,} queries; the folds "
        f"chose grid points {', '.join(str(f.grid_point + 1) for f in s.folds)} (base: "
        f"{result.base_version})",
        f"p-value: paired two-sided randomization test ({result.permutations:,} permutations) "
        "of the held-out values against the base's",
    ]
    return "\n".join(lines)


def create_fused_view(
    session: Session, fuse_plan: FusePlan, view: str, final: str, ranked_view: str
) -> None:
    """The view `view` of the fused items' CTE `final` under `fuse_plan`, reading its own
    ranked log (as `ranked_view`) when the log has ranks alone: the plan's recipe says which
    sources are distances."""
    graph, relations = fuse_graph(fuse_plan, explain=False, features=False), {}
    if RANKED_LOG in graph:
        relations[RANKED_LOG] = ranked_view
        session.create(ranked_view, graph.render(RANKED_LOG), view=True)
    session.create(view, graph.render(FUSED_ITEMS, relations, final=final), view=True)
