"""`duckscore eval --baseline`: is a run better than a baseline, metric by metric?

Both runs are evaluated against the same qrels (so over the same queries, paired by query_id);
sql/metrics/significance.sql computes, per metric, both means, their difference and the paired
two-sided test: Fisher's randomization test (sign flips of each query's difference, seeded, in
SQL) or Student's paired t-test (the t statistic from the SQL's mean and standard deviation; its
p-value here, from the regularised incomplete beta function). A metric is significant when its
p-value is at most `alpha`, as ranx's `compare` marks it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.connection import EngineSettings
from ..core.errors import InputError
from ..core.inputs import Table
from ..core.render import ident, lit, render
from ..core.reporting import module_logger
from ..core.session import Session
from .catalog import DEFAULT_METRICS, TESTS
from .retrieval import EvalResult, no_coverage, run_evaluation

logger = module_logger(__name__)


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    run: float
    baseline: float
    difference: float
    p_value: float
    significant: bool
    # randomization, no permutation as extreme as observed: p_value is 0, and p < this, 1/(n + 1)
    p_value_below: float | None = None


@dataclass(frozen=True)
class Comparison:
    test: str
    alpha: float
    permutations: int
    seed: int
    queries: int  # the judged queries, each paired
    metrics: list[MetricComparison]
    run_covers: int = 0  # judged queries with a row in the run (the others score 0)
    baseline_covers: int = 0  # … in the baseline


def compare_runs(
    run: Table,
    baseline: Table,
    qrels: Table,
    metrics: str | Sequence[str] = DEFAULT_METRICS,
    test: str = "randomization",
    alpha: float = 0.05,
    permutations: int = 10_000,
    seed: int = 42,
    settings: EngineSettings | None = None,
) -> Comparison:
    """The run against the baseline on every metric (see the module doc)."""
    if test not in TESTS:
        raise InputError(f"--test {test!r}: one of {', '.join(TESTS)}")
    if not 0 < alpha < 1:
        raise InputError(f"--alpha {alpha}: between 0 and 1")
    if permutations < 1:
        raise InputError(f"--permutations {permutations}: at least 1")
    evaluated = run_evaluation(run, qrels, metrics, settings)
    against = run_evaluation(baseline, qrels, metrics, settings, run_label="--baseline")
    for result in (evaluated, against):
        refuse_no_coverage(result)
    if evaluated.queries < 2:
        raise InputError(f"--qrels: {evaluated.queries} evaluated queries; a test needs 2 or more")
    with Session(settings) as session:
        for name, result in (("run_per_query", evaluated), ("baseline_per_query", against)):
            session.register(name, result.per_query)
            session.execute(f"CREATE TEMP TABLE {name}_long AS {_long(result, name)}")
        session.execute(
            "CREATE TEMP VIEW paired AS SELECT r.metric, r.query_id, r.value AS run_value, "
            "b.value AS baseline_value FROM run_per_query_long AS r "
            "JOIN baseline_per_query_long AS b USING (metric, query_id)"
        )
        logger.info(f"{test} test over {evaluated.queries:,} queries")
        rendered = render(
            "metrics/significance.sql",
            inputs={"paired": "paired"},
            test=test,
            permutations=permutations,
            seed=seed,
        )
        rows = {row["metric"]: row for row in session.rows(rendered)}
    compared = []
    for metric in evaluated.metrics:
        row = rows[metric.key]
        p_value = row["p_value"]
        if test == "t-test":
            p_value = paired_t_p_value(row["difference"], row["difference_sd"], row["queries"])
        below = 1 / (permutations + 1) if test == "randomization" and p_value == 0 else None
        compared.append(
            MetricComparison(
                metric.key,
                row["run_mean"],
                row["baseline_mean"],
                row["difference"],
                p_value,
                p_value <= alpha,
                below,
            )
        )
    return Comparison(
        test, alpha, permutations, seed, evaluated.queries, compared,
        evaluated.queries_covered, against.queries_covered,
    )  # fmt: skip


def refuse_no_coverage(result: EvalResult) -> None:
    """A comparison with a run that covers no judged query would call the other run's whole
    mean a significant difference: refused."""
    problem = no_coverage(result)
    if problem is not None:
        raise InputError(
            f"{problem}, so there is nothing to compare (are its query ids the qrels'?)"
        )


def _long(result: EvalResult, frame: str) -> str:
    """The per-query frame as (metric, query_id, value) rows."""
    return " UNION ALL ".join(
        f"SELECT {lit(m.key)} AS metric, query_id, CAST({ident(m.key)} AS DOUBLE) AS value "
        f"FROM {ident(frame)}"
        for m in result.metrics
    )


def paired_t_p_value(mean: float, sd: float | None, n: int) -> float:
    """Two-sided p-value of Student's paired t-test from the differences' mean, sample standard
    deviation and count. All differences equal: p = 1 when they are 0, else 0 (scipy gives NaN
    and 0)."""
    if sd is None or sd == 0 or math.isnan(sd):
        return 1.0 if mean == 0 else 0.0
    return t_two_sided_tail(mean / (sd / math.sqrt(n)), n - 1)


def t_two_sided_tail(t: float, freedom: int) -> float:
    """P(|T| >= |t|) for Student's t with `freedom` degrees: I_{ν/(ν+t²)}(ν/2, 1/2)."""
    return regularized_beta(freedom / (freedom + t * t), freedom / 2, 0.5)


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), by the continued fraction (Numerical Recipes §6.4), to double precision."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(x, a, b) / a
    return 1 - front * _beta_fraction(1 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny, c, d = 1e-300, 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return fraction


def format_comparison(result: Comparison) -> str:
    """The table `duckscore eval --baseline` prints: one line per metric, `*` where significant."""
    width = max(len("metric"), *(len(m.metric) for m in result.metrics)) + 2
    lines = [f"{'metric':<{width}}{'run':>10}{'baseline':>10}{'difference':>12}{'p-value':>10}"]
    permutations = result.permutations if result.test == "randomization" else None
    for m in result.metrics:
        lines.append(
            f"{m.metric:<{width}}{m.run:>10.6f}{m.baseline:>10.6f}{m.difference:>+12.6f}"
            f"{p_value_text(m.p_value, permutations):>10}{' *' if m.significant else ''}"
        )
    how = (
        f"{result.permutations:,} permutations, seed {result.seed}"
        if result.test == "randomization"
        else "Student's t"
    )
    lines += [
        "",
        f"paired two-sided {'t' if result.test == 't-test' else result.test} test ({how}) over {result.queries:,} queries; "
        f"* p <= {result.alpha:g}",
        f"judged queries with run rows: run {result.run_covers:,} of {result.queries:,}, "
        f"baseline {result.baseline_covers:,} of {result.queries:,}",
    ]
    return "\n".join(lines)


def p_value_text(p_value: float, permutations: int | None = None) -> str:
    """A p-value as a table prints it: 4 decimals, or one too small for them as 1.2e-07 (never
    0.0000). `permutations`: those of a randomization test, whose p-value 0 (no permutation as
    extreme as observed) prints as `< 1/(permutations + 1)` rounded up to one significant
    digit: `< 0.0001` for 9,999 or 10,000 permutations, `< 0.002` for 500."""
    if permutations is not None and p_value == 0:
        bound = 1 / (permutations + 1)
        exponent = math.floor(math.log10(bound))
        digit = math.ceil(round(bound / 10.0**exponent, 9))
        if digit == 10:
            digit, exponent = 1, exponent + 1
        return f"< {digit * 10.0**exponent:.{max(0, -exponent)}f}"
    if 0 < p_value < 0.00005:
        return f"{p_value:.1e}"
    return f"{p_value:.4f}"
