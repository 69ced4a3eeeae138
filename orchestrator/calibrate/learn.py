"""`learn()`: learned fusion (`duckscore learn`, seed 003 §6.4's `ltr`), a ranking model fitted on
relevance judgments and written as a recipe whose SQL holds the model.

1. The base recipe, resolved against the log's sources, becomes the training recipe:
   `fusion.method: ltr`, its sources declared (`discover_sources: false`), the features. Its
   `ltr_features` stage (sql/fuse/fused.sql) is the feature table: training reads the numbers
   the recipe computes at run time, never features recomputed in Python.
2. The judged queries are dealt into folds as `duckscore tune` deals them (tune_grid.py:
   sorted, shuffled by the seed, round-robin), so a `--grid` tuned alongside is cross-validated
   on the same folds. Fold f's model is fitted on the other folds' queries (ltr_fit.py).
3. Every fold's recipe, the final one (fitted on every judged query), the base and the grid's
   recipes are evaluated in one DuckDB query (tune.evaluate_grid): the held-out metric of a query
   is its fold's recipe's, computed by the compiled SQL, not by the library.
4. The report (learn_report.py) is written beside the recipe; its digest, the features, the
   model and the settings are the recipe's `ltr` block, so its version names all of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.connection import EngineSettings
from ..core.errors import InputError
from ..core.inputs import Table
from ..core.outputs import atomic_output_file, check_output_file
from ..core.policy import at_written_precision, dump_yaml, policy_from_parameters
from ..core.reporting import module_logger
from ..core.session import Session
from ..fusion.log import open_log
from ..fusion.ltr import DEFAULT_FEATURES, MAX_LEAVES, MAX_TREES, feature_names
from ..fusion.plugins import plugins_relative_to
from ..fusion.recipe import FUSE_RECIPE, FusePlan, load_recipe, plan
from ..fusion.recipe_view import Recipe
from ..metrics.catalog import parse_metrics
from ..metrics.tables import open_qrels
from .learn_report import LearnOutcome, LearnReport, learn_report, recipe_document
from .ltr_fit import Fitted, ModelSettings, fit, lightgbm_module
from .tune import check_counts, create_fused_view, evaluate_grid, grid_recipe, paired_p_value
from .tune_grid import TuneError, assign_folds, grid_points, parse_grid
from .tune_grid import select as select_grid_point

logger = module_logger(__name__)

MAX_GRADE = 30  # lambdarank's default label_gain has 31 grades


@dataclass(frozen=True)
class LearnResult:
    out_path: Path
    report_path: Path
    document: dict[str, Any]  # the recipe written
    report: LearnReport  # the report written (at the written precision: its as_record())
    outcome: LearnOutcome


def report_path_for(out: str | Path) -> Path:
    """The report beside the recipe: `learned.yaml` -> `learned.report.json`."""
    out = Path(out)
    return out.with_name(f"{out.stem}.report.json")


def learn(
    log: Table,
    qrels: Table,
    out: str | Path,
    *,
    recipe: str = "canonical_rrf",
    recipe_overrides: Sequence[str] = (),
    model: ModelSettings | None = None,
    features: Sequence[str] = DEFAULT_FEATURES,
    grid: Sequence[str] = (),
    metric: str = "ndcg@10",
    folds: int = 5,
    version: str | None = None,
    permutations: int = 10_000,
    settings: EngineSettings | None = None,
) -> LearnResult:
    """Fit `model` on `qrels` over the features of `recipe` fused from `log`; write the learned
    recipe to `out` and its report beside it. `grid` (tune's `--grid`) adds the recipe tuned
    on the same folds to the comparison. The folds' seed is the model's."""
    model = model or ModelSettings()
    check_counts(folds, version, permutations)
    _check_model(model)
    inputs = {"--log": log, "--qrels": qrels}
    if Path(recipe).is_file():
        inputs["--recipe"] = recipe
    report_path = report_path_for(out)
    check_output_file(out, "--out", inputs, "yaml")
    check_output_file(report_path, "--out (its report)", inputs, "json")
    parsed = parse_metrics(metric)
    if len(parsed) != 1:
        raise TuneError(f"--metric {metric!r}: give one metric")
    if model.kind == "trees":
        lightgbm_module()  # the install hint before any work
    fixed = list(recipe_overrides)
    base = load_recipe(recipe, fixed)
    axes = parse_grid(grid) if grid else []
    points = grid_points(axes) if axes else []
    grid_recipes = [grid_recipe(recipe, fixed, point) for point in points]
    with Session(settings) as session:
        logger.info(f"checking inputs (base recipe {base.version})")
        opened, base_plan = open_log(session, log, base)
        if len(base_plan.sources) < 2:
            raise InputError(
                f"--log ({opened.given}): one source ({', '.join(base_plan.sources)}) to fuse; "
                "learned fusion weighs two or more"
            )
        judged, _ = open_qrels(session, qrels)
        session.execute("CREATE OR REPLACE TEMP TABLE tune_qrels AS SELECT * FROM eval_qrels")
        names = feature_names(list(features), base_plan.sources)
        training = training_recipe(base, base_plan, names)
        table = feature_table(session, training, base_plan)
        if table.empty:
            raise InputError(
                f"--qrels ({judged.given}) and --log ({opened.given}) share no query: no judged "
                "query has a candidate to learn from (are the query ids the same?)"
            )
        _check_grades(table, model, judged.given)
        queries = [
            row[0]
            for row in session.con.execute(
                "SELECT query_id FROM tune_qrels GROUP BY query_id ORDER BY query_id"
            ).fetchall()
        ]
        if folds > len(queries):
            raise TuneError(f"--folds {folds}: more folds than the {len(queries)} judged queries")
        assignment = assign_folds(queries, folds, model.seed)
        logger.info(f"fitting {model.kind} on {len(names)} features, {folds} folds + all")
        fold_of = table["query_id"].map(assignment).to_numpy()
        fitted = [
            _fit_rows(table, names, fold_of != fold, model) for fold in range(folds)
        ]  # fmt: skip
        final = _fit_rows(table, names, np.ones(len(table), dtype=bool), model)
        recipes = [training_with(training, f) for f in [*fitted, final]]
        logger.info(f"evaluating {len(recipes) + 1 + len(grid_recipes)} recipes in one query")
        per_query = evaluate_grid(session, base_plan, [base, *recipes, *grid_recipes], parsed[0])
        values = [
            dict(zip(group["query_id"], group["value"]))
            for _, group in per_query.groupby("grid_point", sort=True)
        ]
        learned = {q: values[1 + assignment[q]][q] for q in queries}
        tuned = select_grid_point(values[2 + folds :], assignment) if grid_recipes else None
        p_base = paired_p_value(session, parsed[0], learned, values[0], permutations, model.seed)
        p_tuned = (
            paired_p_value(session, parsed[0], learned, tuned.held_out, permutations, model.seed)
            if tuned
            else None
        )
    outcome = LearnOutcome(
        model=model,
        features=names,
        metric=parsed[0].key,
        base_version=base.version,
        queries=queries,
        folds=assignment,
        learned=learned,
        in_sample=values[1 + folds],
        base=values[0],
        tuned=tuned,
        grid_points=points,
        grid={axis.key: list(axis.values) for axis in axes},
        p_base=p_base,
        p_tuned=p_tuned,
        permutations=permutations,
        final=final,
        fold_pairs=[f.pairs for f in fitted],
        training_rows=len(table),
        training_sha256=_table_digest(table),
    )
    report = learn_report(outcome)
    report_text = _json(at_written_precision(report.as_record()))
    digest = hashlib.sha256(report_text.encode("utf-8")).hexdigest()
    document = recipe_document(
        outcome, training, report_path.name, digest, version,
        {"log": opened.given, "qrels": judged.given},
    )  # fmt: skip
    # the report first: a failure of the recipe leaves no recipe naming a report not there
    with atomic_output_file(report_path, "--out (its report)", inputs, "json") as staging:
        staging.write_text(report_text, encoding="utf-8")
    document = plugins_relative_to(document, Path(out))
    with atomic_output_file(out, "--out", inputs, "yaml") as staging:
        staging.write_text(dump_yaml(document, flow=None), encoding="utf-8")
    return LearnResult(Path(out), report_path, document, report, outcome)


def _check_model(model: ModelSettings) -> None:
    if model.kind not in ("linear", "trees"):
        raise TuneError(f"--model {model.kind!r}: linear or trees")
    if not 1 <= model.trees <= MAX_TREES:
        raise TuneError(f"--trees {model.trees}: 1 to {MAX_TREES}")
    if not 2 <= model.leaves <= MAX_LEAVES:
        raise TuneError(f"--leaves {model.leaves}: 2 to {MAX_LEAVES}")
    if not 0 < model.learning_rate <= 1:
        raise TuneError(f"--learning-rate {model.learning_rate}: above 0, at most 1")
    if model.min_data_in_leaf < 1:
        raise TuneError(f"--min-data-in-leaf {model.min_data_in_leaf}: at least 1")
    if not 0 <= model.l2 < float("inf"):
        raise TuneError(f"--l2 {model.l2}: a number >= 0")


def training_recipe(base: Recipe, base_plan: FusePlan, names: list[str]) -> Recipe:
    """The base recipe as learned fusion: its fused sources declared (a model reads those
    sources only: a log source it has not seen is ignored, not fused), `fusion.method: ltr`,
    the features, and a model of zeros (the features do not depend on the model)."""
    base_parameters = base.policy.parameters.thawed()
    declared = base_plan.recipe.policy.parameters["sources"]
    parameters = {
        **base_parameters,
        "discover_sources": False,
        "sources": {name: declared[name].thawed() for name in base_plan.sources},
        "fusion": {**base_parameters["fusion"], "method": "ltr", "missing": "default"},
        "ltr": {
            "features": names,
            "model": {"kind": "linear", "intercept": 0.0, "weights": [0.0] * len(names)},
        },
    }
    return Recipe.of(policy_from_parameters(FUSE_RECIPE, base.version, parameters, base.source))


def training_with(training: Recipe, fitted: Fitted) -> Recipe:
    parameters = training.policy.parameters.thawed()
    parameters["ltr"] = {**parameters["ltr"], "model": fitted.model}
    return Recipe.of(
        policy_from_parameters(FUSE_RECIPE, training.version, parameters, training.source)
    )


def feature_table(session: Session, training: Recipe, base_plan: FusePlan) -> pd.DataFrame:
    """The `ltr_features` stage of the training recipe for every judged query: query_id,
    target_id, ltr_1 … ltr_n (NaN where SQL has NULL) and relevance (0 when not judged), sorted
    by query and item."""
    log_sources = sorted({*base_plan.sources, *base_plan.ignored_sources})
    training_plan = plan(
        training, log_sources, base_plan.has_rank, base_plan.log_view, base_plan.has_snippet
    )
    create_fused_view(session, training_plan, "ltr_feature_rows", "ltr_features", "ltr_ranked_log")
    assert training.ltr is not None  # training_recipe's
    n = len(training.ltr.features)
    columns = ", ".join(f"f.ltr_{j}" for j in range(1, n + 1))
    return session.frame(
        f"SELECT f.query_id, f.target_id, {columns}, "
        "CAST(coalesce(q.relevance, 0) AS DOUBLE) AS relevance "
        "FROM ltr_feature_rows AS f "
        "SEMI JOIN (SELECT query_id FROM tune_qrels GROUP BY query_id) AS j "
        "ON j.query_id = f.query_id "
        "LEFT JOIN tune_qrels AS q ON q.query_id = f.query_id AND q.doc_id = f.target_id "
        "ORDER BY f.query_id, f.target_id"
    )


def _check_grades(table: pd.DataFrame, model: ModelSettings, qrels: str) -> None:
    """lambdarank learns from whole grades 0 … 30 (a grade <= 0 is not relevant, as eval reads
    it, and learnt as 0)."""
    grades = table["relevance"].clip(lower=0)
    if model.kind != "trees":
        return
    bad = table[(grades != grades.round()) | (grades > MAX_GRADE)]
    if not bad.empty:
        row = bad.iloc[0]
        raise InputError(
            f"--qrels ({qrels}, query_id={row['query_id']!r}, doc {row['target_id']!r}): "
            f"column 'relevance' is {row['relevance']:g}; --model trees learns whole grades "
            f"0 to {MAX_GRADE}"
        )


def _fit_rows(
    table: pd.DataFrame, names: list[str], keep: np.ndarray, model: ModelSettings
) -> Fitted:
    rows = table[keep]
    sizes = rows.groupby("query_id", sort=False).size().tolist()
    x = rows[[f"ltr_{j}" for j in range(1, len(names) + 1)]].to_numpy(dtype=float)
    y = rows["relevance"].clip(lower=0).to_numpy()
    return fit(x, y.astype(int) if model.kind == "trees" else y, sizes, model)


def _table_digest(table: pd.DataFrame) -> str:
    """sha256 of the training table as CSV (doubles to 17 significant digits, NULL for a missing
    value): the numbers the models learnt from, the same on any machine that computes them."""
    text = table.to_csv(index=False, float_format="%.17g", na_rep="NULL", lineterminator="\n")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _json(document: Any) -> str:
    import json

    return json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
