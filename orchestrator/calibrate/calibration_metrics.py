"""Calibration metrics of a confidence score, computed in SQL (issue 4's report figures).

Input: a table or view `predictions(query_id, score, outcome[, level])` on a DuckDB connection —
one row per query (query_id unique, not NULL); `score` a finite number in any range, higher = more
confident; `outcome` boolean or 0/1, 1 = the retrieval was right; `level` optional (e.g. the
confidence level the policy assigned).

The SQL is sql/calibrate/*.sql (one CTE per stage), rendered with Jinja and checked with sqlglot
(`check_sql`) before it runs. Conventions:

- AUROC: Mann–Whitney, ties count 1/2 (= sklearn roc_auc_score); None when one class is absent.
  Its bootstrap percentile interval resamples queries with a seeded integer hash written in SQL,
  so it is identical run to run, on any thread count; resamples with one class are skipped.
- average precision: sklearn's average_precision_score (tied scores form one threshold);
  None when there is no positive.
- Brier score, ECE and the reliability bins: only when every score is in [0, 1], else None.
  Bins: k = min(floor(score · bins), bins − 1), i.e. [k/n, (k+1)/n), the last bin closed at 1.
- risk–coverage: one point per distinct score, from the highest; risk = error rate among kept.
- Wilson intervals (macros/wilson_interval.sql) for the overall accuracy, each bin's accuracy and
  each level's precision; None for an empty group.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pandas as pd

from ..core.connection import first_line
from ..core.errors import InputError, TemplateError
from ..core.render import ident, render
from ..core.session import Session

VIEW = "duckscore_calibration_predictions"
FRAME = "duckscore_calibration_frame"
MAX_SEED = 2**32


def compute_metrics(
    con: duckdb.DuckDBPyConnection,
    table: str = "predictions",
    *,
    bins: int = 10,
    bootstrap: int = 1000,
    seed: int = 0,
    z: float = 1.96,
) -> dict[str, Any]:
    """Every calibration figure of `table` as plain JSON-serialisable Python.

    Returns a dict with: n, n_positive, n_negative, min_score, max_score,
    scores_in_unit_interval, accuracy {value, wilson_lower, wilson_upper}, auroc,
    auroc_ci {lower, upper, level, resamples, valid_resamples, seed}, average_precision, brier,
    ece, bins (list of {bin, lower_edge, upper_edge, n, n_correct, mean_score, accuracy,
    accuracy_wilson_lower, accuracy_wilson_upper}, or None), risk_coverage (list of {threshold,
    kept, errors, coverage, risk}), levels (list of {level, n, n_correct, precision,
    precision_wilson_lower, precision_wilson_upper, mean_score}, or None without a `level`
    column), and settings {bins, bootstrap, seed, z}.
    Raises InputError for a missing column or bad values, TemplateError for bad settings.
    """
    _check_settings(bins, bootstrap, seed, z)
    session = Session(connection=con)
    has_level = _prepare(session, table)
    try:
        inputs = {"predictions": VIEW}
        [summary] = session.rows(
            render("calibrate/summary.sql", inputs=inputs, z=z, final="summary")
        )
        [interval] = session.rows(
            render(
                "calibrate/bootstrap.sql",
                inputs=inputs,
                resamples=bootstrap,
                seed=seed,
                alpha=0.05,
                final="bootstrap_interval",
            )
        )
        curve = session.rows(render("calibrate/risk_coverage.sql", inputs=inputs, final="curve"))
        reliability: list[dict[str, Any]] | None = None
        ece: float | None = None
        if summary["scores_in_unit_interval"]:
            reliability = session.rows(
                render("calibrate/reliability.sql", inputs=inputs, bins=bins, z=z, final="bins")
            )
            [ece_row] = session.rows(
                render("calibrate/reliability.sql", inputs=inputs, bins=bins, z=z, final="ece")
            )
            ece = ece_row["ece"]
        levels = None
        if has_level:
            levels = session.rows(
                render("calibrate/levels.sql", inputs=inputs, z=z, final="per_level")
            )
    finally:
        session.execute(f"DROP VIEW IF EXISTS {ident(VIEW)}")
    return {
        "n": summary["n"],
        "n_positive": summary["n_positive"],
        "n_negative": summary["n_negative"],
        "min_score": summary["min_score"],
        "max_score": summary["max_score"],
        "scores_in_unit_interval": summary["scores_in_unit_interval"],
        "accuracy": {
            "value": summary["accuracy"],
            "wilson_lower": summary["accuracy_wilson_lower"],
            "wilson_upper": summary["accuracy_wilson_upper"],
        },
        "auroc": summary["auroc"],
        "auroc_ci": {
            "lower": interval["ci_lower"],
            "upper": interval["ci_upper"],
            "level": 0.95,
            "resamples": interval["resamples"],
            "valid_resamples": interval["valid_resamples"],
            "seed": seed,
        },
        "average_precision": summary["average_precision"],
        "brier": summary["brier"],
        "ece": ece,
        "bins": reliability,
        "risk_coverage": curve,
        "levels": levels,
        "settings": {"bins": bins, "bootstrap": bootstrap, "seed": seed, "z": z},
    }


def frame_metrics(
    session: Session, frame: pd.DataFrame, *, bootstrap: int = 0, seed: int = 0
) -> dict[str, Any]:
    """compute_metrics of a DataFrame's query_id, score, outcome (and level, when it has one),
    registered on the session's connection for the call."""
    columns = [c for c in ("query_id", "score", "outcome", "level") if c in frame.columns]
    session.con.register(FRAME, frame[columns])
    try:
        return compute_metrics(session.con, FRAME, bootstrap=bootstrap, seed=seed)
    finally:
        session.con.unregister(FRAME)


def _check_settings(bins: int, bootstrap: int, seed: int, z: float) -> None:
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise TemplateError(f"bins must be a whole number ≥ 1, got {bins!r}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, int) or bootstrap < 0:
        raise TemplateError(f"bootstrap must be a whole number ≥ 0, got {bootstrap!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < MAX_SEED:
        raise TemplateError(f"seed must be a whole number in [0, 2**32), got {seed!r}")
    if isinstance(z, bool) or not isinstance(z, (int, float)) or not math.isfinite(z) or z <= 0:
        raise TemplateError(f"z must be a positive number, got {z!r}")


def _prepare(session: Session, table: str) -> bool:
    """Check `table` and create the view VIEW(query_id, score DOUBLE, outcome INTEGER[, level]);
    return whether it has a level column."""
    try:
        columns = session.schema(table)
    except duckdb.Error as exc:
        raise InputError(f"predictions table {table!r}: {first_line(exc)}") from None
    missing = [c for c in ("query_id", "score", "outcome") if c not in columns]
    if missing:
        raise InputError(
            f"predictions table {table!r}: missing column {missing[0]!r} "
            f"(columns: {', '.join(columns) or 'none'})"
        )
    source = ident(table)
    try:
        bad = session.first_row(
            f"SELECT count(*) FILTER (WHERE query_id IS NULL), "
            f"count(*) FILTER (WHERE score IS NULL OR NOT isfinite(CAST(score AS DOUBLE))), "
            f"count(*) FILTER (WHERE outcome IS NULL OR CAST(outcome AS DOUBLE) NOT IN (0, 1)), "
            f"count(*) - (SELECT count(*) FROM (SELECT query_id FROM {source} GROUP BY query_id)) "
            f"FROM {source}"
        )
    except duckdb.Error as exc:
        raise InputError(f"predictions table {table!r}: {first_line(exc)}") from None
    assert bad is not None
    problems = [
        "query_id is NULL",
        "score is NULL, NaN or infinite",
        "outcome is not 0/1",
        "query_id is repeated",
    ]
    for count, problem in zip(bad, problems):
        if count:
            raise InputError(f"predictions table {table!r}: {problem} in {count} row(s)")
    has_level = "level" in columns
    session.execute(
        f"CREATE OR REPLACE TEMP VIEW {ident(VIEW)} AS SELECT query_id, "
        f"CAST(score AS DOUBLE) AS score, CAST(outcome AS INTEGER) AS outcome"
        f"{', level' if has_level else ''} FROM {source}"
    )
    return has_level
