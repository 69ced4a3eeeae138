"""Issue 35 §3.2 and §3.4: numbers of `duckscore eval` that changed silently.

- a relevance grade of 1024 or more overflowed the gain 2^grade − 1 to inf, and nDCG became
  inf / inf = NaN, exit 0, and `--json` printed `NaN` (not JSON). The oracle is a hand
  computation with exact integer gains (Python's big integers), scaled into floats.
- `eval --baseline` against a baseline that covers no judged query reported the run's whole
  mean as a significant gain with p = 0; each run's coverage is now reported and a run covering
  none is refused; a p-value below the permutations' resolution prints as `< 1/(n + 1)`.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.cli import metrics as metrics_cli
from duckscore.core.errors import InputError
from duckscore.metrics import significance
from duckscore.metrics.retrieval import evaluate
from duckscore.metrics.significance import compare_runs, format_comparison

from ..helpers import SCIFACT

QRELS = SCIFACT / "qrels.parquet"
RRF = SCIFACT / "reference_rrf_k60.parquet"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN and ±Infinity, which are not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def exact_ndcg(ranked_grades: list[int], judged_grades: list[int], k: int | None) -> float:
    """nDCG@k with the gains 2^grade − 1 as exact integers (Python's big integers), each divided
    by the largest before it becomes a float: only the logarithms are rounded."""

    def gains(grades: list[int]) -> list[int]:
        return [2**grade - 1 if grade > 0 else 0 for grade in grades]

    ideal = sorted(gains(judged_grades), reverse=True)

    def dcg(values: list[int]) -> float:
        top = values if k is None else values[:k]
        return sum(float(Fraction(g, ideal[0])) / math.log2(i + 2) for i, g in enumerate(top))

    return dcg(gains(ranked_grades)) / dcg(ideal)


GRADED = [  # (query, doc, grade): q1 has a grade of 1024, q2 of 1100 and 3, q3 small grades
    ("q1", "a", 1),
    ("q1", "b", 1024),
    ("q1", "c", 3),
    ("q2", "x", 1100),
    ("q2", "y", 1099),
    ("q2", "z", 3),
    ("q3", "m", 2),
    ("q3", "n", 1),
]
RUN = {"q1": ["a", "c", "b", "d"], "q2": ["z", "y", "w", "x"], "q3": ["n", "m"]}


@pytest.fixture()
def graded(tmp_path: Path) -> tuple[Path, Path]:
    qrels = pd.DataFrame(GRADED, columns=["query_id", "doc_id", "relevance"])
    run = pd.DataFrame(
        [(q, d, r) for q, docs in RUN.items() for r, d in enumerate(docs, 1)],
        columns=["query_id", "doc_id", "rank"],
    )
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    run.to_csv(tmp_path / "run.csv", index=False)
    return tmp_path / "run.csv", tmp_path / "qrels.csv"


def expected_ndcg(query: str, k: int | None) -> float:
    grades = {(q, d): g for q, d, g in GRADED}
    judged = [g for q, _, g in GRADED if q == query]
    return exact_ndcg([grades.get((query, d), 0) for d in RUN[query]], judged, k)


def test_ndcg_of_grades_of_1024_and_more_is_finite_and_exact(graded: tuple[Path, Path]) -> None:
    run, qrels = graded
    means, per_query = evaluate(run, qrels, "ndcg@2,ndcg@10,ndcg")
    for metric, k in (("ndcg@2", 2), ("ndcg@10", 10), ("ndcg", None)):
        values = dict(zip(per_query["query_id"], per_query[metric], strict=True))
        for query in RUN:
            assert values[query] == pytest.approx(expected_ndcg(query, k), rel=1e-12), (
                metric,
                query,
            )
        assert math.isfinite(means[metric])
    # q1: the grade-1024 document at position 3 dwarfs the others: nDCG@10 = 1 / log2(4) = 0.5
    assert dict(zip(per_query["query_id"], per_query["ndcg@10"], strict=True))["q1"] == (
        pytest.approx(0.5, rel=1e-12)
    )


def test_small_grades_are_bit_identical_to_the_plain_formula(tmp_path: Path) -> None:
    """Grades up to 52 keep gain 2^grade − 1 as it was computed before the fix."""
    qrels = pd.DataFrame({"query_id": ["q"] * 4, "doc_id": list("abcd"),
                          "relevance": [0.5, 3.0, 52.0, 7.25]})  # fmt: skip
    run = pd.DataFrame({"query_id": ["q"] * 4, "doc_id": list("dcba"), "rank": [1, 2, 3, 4]})
    _, per_query = evaluate(run, qrels, "ndcg")
    gains = {d: 2.0**g - 1 for d, g in zip(qrels["doc_id"], qrels["relevance"], strict=True)}
    dcg = sum(gains[d] / math.log2(i + 2) for i, d in enumerate("dcba"))
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(gains.values(), reverse=True)))
    assert per_query["ndcg"].iloc[0] == dcg / idcg


def test_the_command_prints_json_and_a_finite_table(graded: tuple[Path, Path]) -> None:
    run, qrels = graded
    done = invoke("eval", "--run", str(run), "--qrels", str(qrels), "--metrics", "ndcg@10",
                  "--json")  # fmt: skip
    assert done.exit_code == 0, done.output
    means = strict_json(done.stdout)
    expected = sum(expected_ndcg(q, 10) for q in RUN) / len(RUN)
    assert means["ndcg@10"] == pytest.approx(expected, rel=1e-12)
    table = invoke("eval", "--run", str(run), "--qrels", str(qrels), "--metrics", "ndcg@10")
    assert "nan" not in table.stdout.lower()


def test_json_never_holds_nan_or_infinity() -> None:
    line = metrics_cli.json_line(
        {"a": math.nan, "b": {"c": math.inf, "d": [-math.inf, 1.5]}, "e": 2}
    )
    assert strict_json(line) == {"a": None, "b": {"c": None, "d": [None, 1.5]}, "e": 2}


# --- eval --baseline: coverage and p-values -------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("baseline")
    reference = pd.read_parquet(RRF)
    paths = {"reference": RRF}
    moved = reference.assign(query_id="other-" + reference["query_id"].astype(str))
    moved.to_parquet(paths.setdefault("nowhere", folder / "nowhere.parquet"))
    some = sorted(reference["query_id"].unique())[:12]
    part = reference[reference["query_id"].isin(some)]
    part.to_parquet(paths.setdefault("twelve", folder / "twelve.parquet"))
    # 30 queries, the relevant document first in the run and second in the baseline: every
    # query's difference is the same, so hardly any permutation is as extreme
    queries = [f"q{i:02d}" for i in range(30)]
    qrels = pd.DataFrame({"query_id": queries, "doc_id": "good", "relevance": 1})
    qrels.to_parquet(paths.setdefault("qrels30", folder / "qrels30.parquet"))
    first = pd.DataFrame({"query_id": queries * 2, "doc_id": ["good"] * 30 + ["bad"] * 30,
                          "rank": [1] * 30 + [2] * 30})  # fmt: skip
    first.to_parquet(paths.setdefault("first", folder / "first.parquet"))
    second = first.assign(rank=[2] * 30 + [1] * 30)
    second.to_parquet(paths.setdefault("second", folder / "second.parquet"))
    return paths


def test_a_baseline_that_covers_no_judged_query_is_refused(runs: dict[str, Path]) -> None:
    with pytest.raises(InputError, match="covers none of the 300 judged queries") as refused:
        compare_runs(RRF, runs["nowhere"], QRELS, "ndcg@10", permutations=200)
    assert str(refused.value).startswith(f"--baseline ({runs['nowhere']}): ")
    with pytest.raises(InputError, match=r"^--run \(.*\): covers none of the 300"):
        compare_runs(runs["nowhere"], RRF, QRELS, "ndcg@10", permutations=200)
    done = invoke("eval", "--run", str(RRF), "--qrels", str(QRELS),
                  "--baseline", str(runs["nowhere"]))  # fmt: skip
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "covers none of the 300 judged queries" in done.stderr


def test_each_runs_coverage_is_reported(runs: dict[str, Path]) -> None:
    result = compare_runs(RRF, runs["twelve"], QRELS, "ndcg@10", permutations=200)
    assert (result.queries, result.run_covers, result.baseline_covers) == (300, 300, 12)
    text = format_comparison(result)
    assert "judged queries with run rows: run 300 of 300, baseline 12 of 300" in text
    done = invoke("eval", "--run", str(RRF), "--qrels", str(QRELS), "--metrics", "ndcg@10",
                  "--baseline", str(runs["twelve"]), "--permutations", "200", "--json")  # fmt: skip
    assert done.exit_code == 0, done.output
    ndcg = strict_json(done.stdout)["ndcg@10"]
    assert (ndcg["judged_queries"], ndcg["run_covers"], ndcg["baseline_covers"]) == (300, 300, 12)


def test_plain_eval_refuses_a_run_that_shares_no_query_with_the_qrels(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Issue 47 §4: every metric 0 with exit 0 hid a run keyed by other query ids; now one line
    naming both files, exit 2, and no --per-query written (the CLI and the Python API alike)."""
    per_query = tmp_path / "pq.parquet"
    done = CliRunner().invoke(cli, ["eval", "--run", str(runs["nowhere"]), "--qrels", str(QRELS),
                                    "--metrics", "ndcg@10", "--json",
                                    "--per-query", str(per_query)])  # fmt: skip
    assert (done.exit_code, done.stdout) == (2, "")
    assert done.stderr == (
        f"duckscore: error: --run ({runs['nowhere']}) and --qrels ({QRELS}) share no query: the "
        "run has no row for any of the 300 judged queries, so every metric would be 0 (are its "
        "query ids the qrels'?)\n"
    )
    assert not per_query.exists()
    import duckscore as ds

    with pytest.raises(InputError, match=r"^--run \(.*\) and --qrels \(.*\) share no query: "):
        ds.eval(runs["nowhere"], QRELS, "ndcg@10")
    # one shared query is enough: the others score 0, as documented
    one = pd.read_parquet(runs["nowhere"]).head(1).assign(query_id="1")
    one.to_parquet(tmp_path / "one.parquet")
    some = invoke("eval", "--run", str(tmp_path / "one.parquet"), "--qrels", str(QRELS),
                  "--metrics", "ndcg@10", "--json")  # fmt: skip
    assert some.exit_code == 0, some.output


@pytest.mark.parametrize(
    ("permutations", "text"), [(9999, "< 0.0001"), (10_000, "< 0.0001"), (500, "< 0.002")]
)
def test_a_p_value_below_the_resolution_is_a_bound(
    runs: dict[str, Path], permutations: int, text: str
) -> None:
    result = compare_runs(runs["first"], runs["second"], runs["qrels30"], "mrr@10",
                          permutations=permutations)  # fmt: skip
    (mrr,) = result.metrics
    assert mrr.difference == pytest.approx(0.5)
    assert mrr.p_value == 0.0 and mrr.p_value_below == pytest.approx(1 / (permutations + 1))
    line = format_comparison(result).splitlines()[1]
    assert line.split()[-2:] == [*text.split()[1:], "*"] and f"  {text} *" in line
    assert significance.p_value_text(mrr.p_value, permutations) == text


def test_p_values_print_as_p_less_than_in_json_too(runs: dict[str, Path]) -> None:
    done = invoke("eval", "--run", str(runs["first"]), "--qrels", str(runs["qrels30"]),
                  "--metrics", "mrr@10", "--baseline", str(runs["second"]), "--json")  # fmt: skip
    assert done.exit_code == 0, done.output
    mrr = strict_json(done.stdout)["mrr@10"]
    assert mrr["p_value"] == 0.0 and mrr["p_value_below"] == pytest.approx(1 / 10_001)
    assert mrr["significant"] is True
    table = invoke("eval", "--run", str(runs["first"]), "--qrels", str(runs["qrels30"]),
                   "--metrics", "mrr@10", "--baseline", str(runs["second"]))  # fmt: skip
    assert "< 0.0001 *" in table.stdout and "0.0000" not in table.stdout


def test_a_t_test_p_value_is_never_printed_as_zero(runs: dict[str, Path]) -> None:
    result = compare_runs(RRF, runs["twelve"], QRELS, "recall@100", test="t-test")
    (recall,) = result.metrics
    assert 0 < recall.p_value < 1e-10 and recall.p_value_below is None
    assert significance.p_value_text(recall.p_value) == f"{recall.p_value:.1e}"
    assert f"{recall.p_value:.1e}" in format_comparison(result)
