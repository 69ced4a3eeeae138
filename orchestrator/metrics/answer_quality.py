"""`duckscore eval --answers-quality`: each score_policy_version regressed against answer quality
(seed 000 §11). duckscore runs no LLM judge: the per-query faithfulness and answer relevancy
(RAGAS' columns, or any evaluator's) are an input, and so is whether an answer in fact needed the
web or a clarification. The regression is sql/metrics/answer_quality.sql: per version and level
the means (a Student t interval here), the shares routed to the web and to a human, a one-sided
permutation test of `high` above `low`, and the web and HITL routing against the recorded need.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.connection import EngineSettings
from ..core.errors import InputError
from ..core.inputs import FileSet, Table, resolve_files
from ..core.render import render
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import Column, TableContract
from .significance import t_two_sided_tail

logger = module_logger(__name__)

# RAGAS' own column names (ragas.evaluate(...).to_pandas())
QUALITY_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
LEVELS = ("high", "medium", "low")
NEEDS = ("needed_web", "needed_clarification")

ANSWER_QUALITY = TableContract(
    name="answer_quality",
    columns=(
        Column("query_id", "id"),
        *(
            Column(m, "number", required=False, min=0, max=1, nullable=True, nan_as_null=True)
            for m in QUALITY_METRICS
        ),
        *(Column(n, "flag", required=False, nullable=True) for n in NEEDS),
    ),
    key=("query_id",),
)
SCORED = TableContract(
    name="scored_contract",
    columns=(
        Column("score_policy_version", "text"),
        Column("query_id", "id"),
        Column("confidence_level", "text", choices=LEVELS),
        Column("need_hitl", "flag"),
        Column("web_fallback", "flag"),
    ),
    key=("score_policy_version", "query_id"),
    passes_others=True,  # `actions`, when the policy has diagnostics
)
STAGES = ("level_stats", "routing", "tests", "needs")
# a check's permutation test: the group sizes, exact or drawn, the splits and those as extreme
TEST_FIELDS = ("n_high", "n_low", "exact", "splits", "as_extreme")


@dataclass(frozen=True)
class QualityReport:
    versions: list[str]
    metrics: list[str]  # the quality columns given, in QUALITY_METRICS' order
    needs: list[str]  # the NEEDS columns given
    has_actions: bool
    level_stats: list[
        dict[str, Any]
    ]  # scope, version, level, metric, n…, mean, sd, ci_low, ci_high
    routing: list[dict[str, Any]]  # scope, version, level, shares routed and needed
    tests: list[dict[str, Any]]  # version, metric, high, low, difference, p_value, verdict, …
    routing_checks: list[dict[str, Any]]  # version, need, routing_precision, routing_recall, …
    common_queries: int | None  # with two versions or more: the queries every version scored
    ignored_queries: int  # quality rows of queries no version scored
    permutations: int
    seed: int
    alpha: float
    exact_max_n: int


def evaluate_answer_quality(
    quality: Table,
    scored: Sequence[str | Path],
    permutations: int = 10_000,
    seed: int = 42,
    alpha: float = 0.05,
    settings: EngineSettings | None = None,
) -> QualityReport:
    """The report of the module doc: `quality` a table (file, glob, folder or DataFrame),
    `scored` the output folders of `duckscore score` or `run` (their contract.jsonl)."""
    with Session(settings) as session:
        opened = session.open("answers_quality", ANSWER_QUALITY, quality, "--answers-quality")
        metrics = [m for m in QUALITY_METRICS if m in opened.columns]
        if not metrics:
            have = ", ".join(session.schema("__raw_answer_quality")) or "none"
            raise InputError(
                f"--answers-quality ({opened.given}): needs a column {', '.join(QUALITY_METRICS)} "
                f"(RAGAS' names; columns: {have})"
            )
        contracts = session.open("scored", SCORED, scored_contracts(scored), "--scored")
        versions = _versions(session)
        ignored, shared = _overlap(session)
        if shared == 0:
            raise InputError(
                f"--answers-quality ({opened.given}) and --scored ({contracts.given}) share no "
                "query (are its query ids the scored log's?)"
            )
        if ignored:
            logger.warning(
                f"--answers-quality: {ignored:,} queries no --scored folder scored, ignored"
            )
        exact_max_n = permutations.bit_length() - 1  # 2^n <= permutations
        context = {
            "inputs": {"scored": SCORED.name, "quality": ANSWER_QUALITY.name},
            "metrics": metrics,
            "has_actions": any(o.lower() == "actions" for o in contracts.others),
            "side_by_side": len(versions) > 1,
            "exact_max_n": exact_max_n,
            "permutations": permutations,
            "seed": seed,
        }
        logger.info(f"regressing {len(versions)} versions against {', '.join(metrics)}")
        rows = {stage: session.rows(render("metrics/answer_quality.sql", final=stage, **context))
                for stage in STAGES}  # fmt: skip
        common = _common_queries(rows["routing"]) if len(versions) > 1 else None
    level_stats = [_with_interval(row, alpha) for row in rows["level_stats"]]
    return QualityReport(
        versions, metrics, [n for n in NEEDS if n in opened.columns], bool(context["has_actions"]),
        sorted(level_stats, key=_level_order), sorted(rows["routing"], key=_level_order),
        _verdicts(rows["tests"], level_stats, alpha), sorted(rows["needs"], key=_version_order),
        common, ignored, permutations, seed, alpha, exact_max_n,
    )  # fmt: skip


def scored_contracts(folders: Sequence[str | Path]) -> FileSet:
    """The contract.jsonl files (a file, or a folder of parts) of the scored output folders."""
    files: list[str] = []
    for folder in folders:
        contract = os.path.join(folder, "contract.jsonl")
        if not os.path.exists(contract):
            raise InputError(
                f"--scored {folder}: no contract.jsonl here (give a `duckscore score` or `run` "
                "output folder)"
            )
        files += resolve_files(contract, "--scored")[0]
    return FileSet(", ".join(str(f) for f in folders), tuple(files))


def _versions(session: Session) -> list[str]:
    found = session.con.execute(
        f"SELECT score_policy_version FROM {SCORED.name} GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    return [str(row[0]) for row in found]


def _overlap(session: Session) -> tuple[int, int]:
    """(quality rows of no scored query, quality rows of a scored query)."""
    row = session.first_row(
        f"SELECT count(*) FILTER (WHERE s.query_id IS NULL), count(s.query_id) "
        f"FROM {ANSWER_QUALITY.name} AS q LEFT JOIN (SELECT query_id FROM {SCORED.name} "
        "GROUP BY query_id) AS s ON s.query_id = q.query_id"
    )
    assert row is not None
    return int(row[0]), int(row[1])


def _common_queries(routing: list[dict[str, Any]]) -> int:
    """The queries every version scored: one version's count in the scope `common`."""
    counts: dict[str, int] = {}
    for row in routing:
        if row["scope"] == "common":
            counts[row["version"]] = counts.get(row["version"], 0) + row["n_queries"]
    return next(iter(counts.values()), 0)


def _with_interval(row: dict[str, Any], alpha: float) -> dict[str, Any]:
    """The row with the Student t interval of its mean at level 1 − alpha, clipped to [0, 1]
    where the values lie (NULL below 2 values)."""
    n, mean, sd = row["n_evaluated"], row["mean"], row["sd"]
    low = high = None
    if n >= 2 and mean is not None and sd is not None:
        half = t_quantile(1 - alpha / 2, n - 1) * sd / math.sqrt(n)
        low, high = max(0.0, mean - half), min(1.0, mean + half)
    return {**row, "ci_low": low, "ci_high": high}


def t_quantile(probability: float, freedom: int) -> float:
    """Student's t quantile for probability in (0.5, 1), by bisection of the two-sided tail
    = 2(1 − probability)."""
    tail = 2 * (1 - probability)
    low, high = 0.0, 1.0
    while t_two_sided_tail(high, freedom) > tail:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if t_two_sided_tail(middle, freedom) > tail:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def _verdicts(
    tests: list[dict[str, Any]], level_stats: list[dict[str, Any]], alpha: float
) -> list[dict[str, Any]]:
    """Per version and metric: the `high` and `low` means, their difference, the test's p-value
    and the verdict — `yes` (high above low, p <= alpha), `not shown`, or `not testable` (no
    evaluated query at one of the two levels)."""
    means = {
        (r["version"], r["metric"], r["level"]): r["mean"]
        for r in level_stats
        if r["scope"] == "all"
    }
    tested = {(t["version"], t["metric"]): t for t in tests}
    checks = []
    for version, metric in sorted({(v, m) for v, m, _ in means}, key=_pair_order):
        high, low = means.get((version, metric, "high")), means.get((version, metric, "low"))
        test = tested.get((version, metric))
        difference = None if high is None or low is None else high - low
        if test is None or difference is None:
            verdict, p_value = "not testable", None
        else:
            p_value = test["p_value"]
            verdict = "yes" if difference > 0 and p_value <= alpha else "not shown"
        checks.append({
            "version": version, "metric": metric, "high": high, "low": low,
            "difference": difference, "p_value": p_value, "verdict": verdict,
            **{key: test[key] if test else None for key in TEST_FIELDS},
        })  # fmt: skip
    return checks


def _pair_order(pair: tuple[str, str]) -> tuple[str, int]:
    return pair[0], QUALITY_METRICS.index(pair[1])


def _level_order(row: dict[str, Any]) -> tuple[Any, ...]:
    metric = QUALITY_METRICS.index(row["metric"]) if "metric" in row else 0
    return row["scope"] != "all", row["version"], LEVELS.index(row["level"]), metric


def _version_order(row: dict[str, Any]) -> tuple[str, str]:
    return row["version"], row["need"]
