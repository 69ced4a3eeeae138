"""What `duckscore learn` writes and prints: the training report (JSON, beside the recipe), the
learned recipe (the base's parameters, `fusion.method: ltr` and the `ltr` block) and the summary
on stdout. Every figure is a mean of per-query values of sql/metrics/per_query.sql; sums are
exactly rounded (math.fsum), so they do not depend on summation order."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from ..core.policy import at_written_precision, canonical_json
from ..core.records import OMITTED_WHEN_NONE, Report
from ..core.version import __version__
from ..fusion.ltr import FEATURES, parse_feature
from ..fusion.recipe_view import Recipe
from ..metrics.significance import p_value_text
from .ltr_fit import Fitted, ModelSettings
from .tune_grid import Selection


@dataclass(frozen=True)
class LearnOutcome:
    model: ModelSettings
    features: list[str]
    metric: str
    base_version: str
    queries: list[str]  # the judged queries, sorted
    folds: dict[str, int]  # query_id -> its fold
    learned: dict[str, float]  # query_id -> its fold's model's value (held out)
    in_sample: dict[str, float]  # query_id -> the final model's value
    base: dict[str, float]  # query_id -> the base recipe's value
    tuned: Selection | None  # the grid tuned on the same folds (held out), when given
    grid_points: list[dict[str, Any]]
    grid: dict[str, list[Any]]
    p_base: float
    p_tuned: float | None
    permutations: int
    final: Fitted
    fold_pairs: list[int]
    training_rows: int
    training_sha256: str

    @property
    def test(self) -> str:
        return (
            f"paired two-sided randomization, {self.permutations} permutations, "
            f"seed {self.model.seed}"
        )


@dataclass(frozen=True, kw_only=True)
class HeldOut(Report):
    """The cross-validated means and the comparisons: learned against base, and against the
    tuned recipe when a grid was given."""

    learned: float
    base: float
    against_base: dict[str, float]  # difference, p_value
    tuned: float | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    against_tuned: dict[str, float | None] | None = field(default=None, metadata=OMITTED_WHEN_NONE)


@dataclass(frozen=True, kw_only=True)
class FoldFigures(Report):
    """One fold's held-out means (and the grid point the tuning chose on the other folds)."""

    fold: int
    test_queries: int
    train_queries: int
    train_pairs: int
    learned: float
    base: float
    tuned: float | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    tuned_choice: dict[str, Any] | None = field(default=None, metadata=OMITTED_WHEN_NONE)


@dataclass(frozen=True, kw_only=True)
class LearnReport(Report):
    """The training report, `<name>.report.json` (docs/learn.md#what-it-writes)."""

    report: str = "duckscore learn"
    model: str
    settings: dict[str, Any]
    features: list[dict[str, str]]  # name, definition
    metric: str
    base: str
    grid: dict[str, list[Any]] | None
    folds: int
    seed: int
    queries: int
    training_rows: int
    training_sha256: str
    test: str
    held_out: HeldOut
    in_sample: dict[str, float]  # learned, base
    per_fold: list[FoldFigures]
    importances: dict[str, float]
    per_query: list[dict[str, Any]]
    # the linear model's
    weights: dict[str, float] | None = field(default=None, metadata=OMITTED_WHEN_NONE)


def mean(values: dict[str, float], queries: list[str]) -> float:
    return math.fsum(values[q] for q in queries) / len(queries)


def _fold_queries(o: LearnOutcome, fold: int) -> list[str]:
    return [q for q in o.queries if o.folds[q] == fold]


def held_out(o: LearnOutcome) -> HeldOut:
    """The cross-validated means and the comparisons: learned against base, and against tuned."""
    q = o.queries
    learned = mean(o.learned, q)
    tuned = None if o.tuned is None else o.tuned.cross_validated
    return HeldOut(
        learned=learned,
        base=mean(o.base, q),
        against_base={"difference": learned - mean(o.base, q), "p_value": o.p_base},
        tuned=tuned,
        against_tuned=None
        if tuned is None
        else {"difference": learned - tuned, "p_value": o.p_tuned},
    )


def fold_figures(o: LearnOutcome, fold: int) -> FoldFigures:
    tested = _fold_queries(o, fold)
    return FoldFigures(
        fold=fold,
        test_queries=len(tested),
        train_queries=len(o.queries) - len(tested),
        train_pairs=o.fold_pairs[fold],
        learned=mean(o.learned, tested),
        base=mean(o.base, tested),
        tuned=None if o.tuned is None else mean(o.tuned.held_out, tested),
        tuned_choice=None if o.tuned is None else o.grid_points[o.tuned.folds[fold].grid_point],
    )


def learn_report(o: LearnOutcome) -> LearnReport:
    """The training report: settings, held-out figures per fold and overall, the final model's
    feature importances and every query's held-out values (paths and versions are left out:
    the report's digest names the recipe, which must not depend on where it was made)."""
    folds = sorted(set(o.folds.values()))
    return LearnReport(
        model=o.model.kind,
        settings=o.model.recorded(),
        features=[
            {"name": name, "definition": FEATURES[parse_feature("features", name).kind][1]}
            for name in o.features
        ],
        metric=o.metric,
        base=o.base_version,
        grid=o.grid or None,
        folds=len(folds),
        seed=o.model.seed,
        queries=len(o.queries),
        training_rows=o.training_rows,
        training_sha256=o.training_sha256,
        test=o.test,
        held_out=held_out(o),
        in_sample={"learned": mean(o.in_sample, o.queries), "base": mean(o.base, o.queries)},
        per_fold=[fold_figures(o, fold) for fold in folds],
        importances=dict(zip(o.features, o.final.importances)),
        per_query=[
            {"query_id": q, "fold": o.folds[q], "learned": o.learned[q], "base": o.base[q]}
            | ({"tuned": o.tuned.held_out[q]} if o.tuned is not None else {})
            for q in o.queries
        ],
        weights=dict(zip(o.features, o.final.model["weights"]))
        if o.model.kind == "linear"
        else None,
    )


def recipe_document(
    o: LearnOutcome,
    training: Recipe,
    report_name: str,
    report_sha256: str,
    version: str | None,
    inputs: dict[str, str],
) -> dict[str, Any]:
    """The learned recipe, complete (it loads without its base): the training recipe's
    parameters with the final model and `ltr.training`; `<base>_ltr_<8 hex of the parameters'
    sha256>` unless `version` names it."""
    parameters = training.policy.parameters.thawed()
    parameters["ltr"] = {
        "features": o.features,
        "model": o.final.model,
        "training": {
            "report_sha256": report_sha256,
            "model": o.model.kind,
            "settings": o.model.recorded(),
            "queries": len(o.queries),
        },
    }
    parameters = at_written_precision(parameters)
    digest = hashlib.sha256(canonical_json(parameters).encode()).hexdigest()
    figures = held_out(o)
    summary: dict[str, Any] = {
        "report": report_name,
        "model": o.model.kind,
        "metric": o.metric,
        "folds": len(set(o.folds.values())),
        "seed": o.model.seed,
        "queries": len(o.queries),
        "held_out": figures.as_record(),
        "test": o.test,
        "importances": dict(
            sorted(zip(o.features, o.final.importances), key=lambda item: -item[1])[:5]
        ),
    }
    base_name = training.policy.base_version.replace("+", "_")
    document: dict[str, Any] = at_written_precision(
        {
            "recipe_id": version or f"{base_name}_ltr_{digest[:8]}",
            "parent_version": o.base_version,
            "description": f"{o.base_version} fused by a learned {o.model.kind} model of "
            f"{len(o.features)} features (duckscore learn: {o.metric} {figures.learned:.4f} "
            f"held out, {figures.base:.4f} for the base).",
            "metadata": {
                "duckscore_version": __version__,
                **_library_version(o.model.kind),
                "inputs": inputs,
                "learn": summary,
            },
            **parameters,
        }
    )
    return document


def _library_version(kind: str) -> dict[str, str]:
    if kind != "trees":
        return {}
    import lightgbm

    return {"lightgbm_version": str(lightgbm.__version__)}


def format_summary(o: LearnOutcome, recipe_id: str) -> str:
    """What `duckscore learn` prints: the held-out metric of the learned recipe, of the base (and
    of the tuned recipe), and the learned recipe's difference from each with the paired test's
    p-value."""
    figures = held_out(o)
    rows = [
        (f"learned ({o.model.kind})", figures.learned, None, None),
        (o.base_version, figures.base, figures.against_base["difference"], o.p_base),
    ]
    if figures.tuned is not None and figures.against_tuned is not None:
        tuned = f"tuned ({len(o.grid_points)} grid points)"
        rows.append((tuned, figures.tuned, figures.against_tuned["difference"], o.p_tuned))
    title = f"{o.metric} held out"
    width = max(len(title), *(len(row[0]) for row in rows)) + 2
    lines = [
        f"learned: {recipe_id} ({o.model.kind}, {len(o.features)} features)",
        "",
        f"{title:<{width}}{'mean':>10}{'difference':>12}{'p-value':>10}",
    ]
    for name, value, difference, p in rows:
        shown = "" if difference is None else f"{difference:>+12.6f}"
        p_text = "" if p is None else f"{p_value_text(p, o.permutations):>10}"
        lines.append(f"{name:<{width}}{value:>10.6f}{shown:>12}{p_text}".rstrip())
    lines += [
        "",
        f"{len(set(o.folds.values()))} folds (seed {o.model.seed}) over {len(o.queries):,} "
        "judged queries, each scored by a recipe fitted without it",
        f"in-sample (the written model on every query): {mean(o.in_sample, o.queries):.6f}",
        f"difference: learned minus the row; p-value: paired two-sided randomization test "
        f"({o.permutations:,} permutations)",
    ]
    return "\n".join(lines)
