"""Tests written for mutants of sql/metrics/ that survived the fast tests (tests/mutants/, issue 37):
`--baseline`'s means summed in `query_id` DESC order instead of ASC passed every test, which
compared them with a tolerance. docs/metrics.md promises each mean "summed in `query_id` order";
recalls of 0.1, 0.2 and 0.3 sum to 0.6000000000000001 in that order and to 0.6 in the other, so
the run's, the baseline's and the difference's means are checked here to the bit against a Python
sum in that order.

The full run's survivors, each killed by a test below:
- the templates' own refusals (labels' k below 1 or not whole, an order_by other than rank or
  score, precision without a cutoff, an unknown metric) had no test rendering such a context;
- significance.sql's means divide by NULLIF(count(*), 0): made NULLIF(count(*), 1), a single
  query's means were NULL; its t-test branch leaves the p-value NULL (the runner computes it);
- means.sql's eval means summed in query_id DESC order, and per_query.sql's ordered sums
  (average precision) in position DESC order, passed: checked to the bit as above;
- the gains: a 3 for a 2 (pow(3, -s)), a gain scale of floor(max grade) + 52 (subnormal gains
  for a grade of 1021) and a scale of at least 1 (halved gains, which change the last bit of
  nDCG with fractional grades) passed, every test's grades being 0/1 below 53;
- the randomization test's seed replaced by 1.0 passed: no test checked the permutations
  against docs/metrics.md's hash('seed/permutation/query_id') coin;
- ranked's `NULLS LAST` on rank and on the doc_id tie-break made FIRST passed: the commands
  refuse NULLs, but the table macros (ds_labels, ds_eval) check no input."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from duckscore.core.errors import TemplateError
from duckscore.core.render import render
from duckscore.metrics.retrieval import evaluate
from duckscore.metrics.significance import compare_runs
from duckscore.pack.install import pack_script

# recall@10 per query (of ten relevant documents); the query ids sort q_a < q_b < q_c
RUN = {"q_a": 0.1, "q_b": 0.2, "q_c": 0.3}
BASELINE = {"q_a": 0.2, "q_b": 0.4, "q_c": 0.6}


def mean_in_order(values: dict[str, float], reverse: bool = False) -> float:
    return sum(values[q] for q in sorted(values, reverse=reverse)) / len(values)


def as_run(recalls: dict[str, float]) -> pd.DataFrame:
    """The top ten of each query: round(10 × recall) relevant documents, then irrelevant ones."""
    rows = [
        (q, f"rel{i}" if i < round(recall * 10) else f"other{i}", 1.0 - i / 100)
        for q, recall in recalls.items()
        for i in range(10)
    ]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])


def test_baseline_means_are_summed_in_query_id_order(tmp_path: Path) -> None:
    differences = {q: RUN[q] - BASELINE[q] for q in RUN}
    for values in (RUN, BASELINE, differences):  # the order shows in the last bit: this can fail
        assert mean_in_order(values) != mean_in_order(values, reverse=True), values
    qrels = pd.DataFrame(
        [(q, f"rel{i}", 1) for q in RUN for i in range(10)],
        columns=["query_id", "doc_id", "relevance"],
    )
    paths = [tmp_path / f"{name}.parquet" for name in ("run", "baseline", "qrels")]
    for frame, path in zip((as_run(RUN), as_run(BASELINE), qrels), paths, strict=True):
        frame.to_parquet(path)
    expected = (mean_in_order(RUN), mean_in_order(BASELINE), mean_in_order(differences))
    run, baseline, judged = paths
    for test in ("t-test", "randomization"):
        (recall,) = compare_runs(
            run, baseline, judged, "recall@10", test=test, permutations=10
        ).metrics
        assert (recall.run, recall.baseline, recall.difference) == expected, test


# --- survivors of the full metrics run (issue 37) ---

INPUTS = {"run": "eval_run", "qrels": "eval_qrels"}


def metric(name: str, k: int | None) -> dict[str, object]:
    return {"column": name, "name": name, "suffix": "" if k is None else f"_{k}", "k": k}


PER_QUERY = {"order_by": "rank", "final": "per_query", "inputs": INPUTS}
LABELS = {"final": "labels", "inputs": INPUTS}


@pytest.mark.parametrize(
    ("template", "context", "message"),
    [
        ("metrics/labels.sql", {**LABELS, "k": 0, "order_by": "rank"}, "k must be a whole"),
        ("metrics/labels.sql", {**LABELS, "k": 2.5, "order_by": "rank"}, "k must be a whole"),
        ("metrics/labels.sql", {**LABELS, "k": 10, "order_by": "bogus"}, "order_by must be"),
        (
            "metrics/per_query.sql",
            {
                **PER_QUERY,
                "metrics": [metric("precision", None)],
                "cutoffs": [{"k": None, "suffix": ""}],
            },
            "precision needs a cutoff",
        ),
        (
            "metrics/per_query.sql",
            {
                **PER_QUERY,
                "metrics": [metric("bogus", 10)],
                "cutoffs": [{"k": 10, "suffix": "_10"}],
            },
            "unknown metric bogus",
        ),
    ],
)
def test_the_templates_refuse_a_context_they_cannot_compute(
    template: str, context: dict[str, object], message: str
) -> None:
    with pytest.raises(TemplateError, match=message):
        render(template, **context)


@pytest.mark.parametrize("test", ["randomization", "t-test"])
def test_significance_sql_of_one_query_gives_its_values_as_means(test: str) -> None:
    """One evaluated query: each mean is that query's value (a division by count(*) = 1), every
    sign flip of its one difference has the same |sum| (p = 1), and the t-test leaves the p-value
    to the runner (NULL)."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE paired AS SELECT 'm' AS metric, 'q' AS query_id, "
        "0.75::DOUBLE AS run_value, 0.5::DOUBLE AS baseline_value"
    )
    sql = render(
        "metrics/significance.sql", inputs={"paired": "paired"}, test=test, permutations=10, seed=42
    ).text
    cursor = con.execute(sql)
    (row,) = cursor.fetchall()
    got = dict(zip([d[0] for d in cursor.description], row, strict=True))
    assert (got["queries"], got["run_mean"], got["baseline_mean"]) == (1, 0.75, 0.5)
    assert got["difference"] == 0.25
    assert got["p_value"] == (1.0 if test == "randomization" else None)


def write_inputs(tmp_path: Path, run: pd.DataFrame, qrels: pd.DataFrame) -> tuple[Path, Path]:
    paths = (tmp_path / "run.parquet", tmp_path / "qrels.parquet")
    for frame, path in zip((run, qrels), paths, strict=True):
        frame.to_parquet(path)
    return paths


def ten_relevant_each(recalls: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame(
        [(q, f"rel{i}", 1) for q in recalls for i in range(10)],
        columns=["query_id", "doc_id", "relevance"],
    )


def test_eval_means_are_summed_in_query_id_order(tmp_path: Path) -> None:
    assert mean_in_order(RUN) != mean_in_order(RUN, reverse=True)  # the order shows: can fail
    means, _ = evaluate(*write_inputs(tmp_path, as_run(RUN), ten_relevant_each(RUN)), "recall@10")
    assert means["recall@10"] == mean_in_order(RUN)


def test_average_precision_is_summed_in_position_order(tmp_path: Path) -> None:
    positions = (1, 2, 5, 7)  # the relevant documents' positions among ten
    terms = [hits / position for hits, position in enumerate(positions, start=1)]
    assert sum(terms) != sum(reversed(terms))  # the order shows in the last bit: this can fail
    run = pd.DataFrame(
        [("q", f"d{p}", p) for p in range(1, 11)], columns=["query_id", "doc_id", "rank"]
    )
    qrels = pd.DataFrame(
        [("q", f"d{p}", 1) for p in positions], columns=["query_id", "doc_id", "relevance"]
    )
    _, per_query = evaluate(*write_inputs(tmp_path, run, qrels), "map")
    assert per_query["map"].tolist() == [sum(terms) / len(positions)]


def plain_gain(grade: float) -> float:
    return math.pow(2.0, grade) - 1.0


def halved_gain(grade: float) -> float:
    return math.pow(2.0, grade - 1.0) - math.pow(2.0, -1.0)


def plain_ndcg(
    ranked: list[float], grades: list[float], gain: Callable[[float], float] = plain_gain
) -> float:
    """docs/metrics.md's nDCG, unscaled: gains 2^grade - 1 (grade 0 for an unjudged document)
    over log2(position + 1), summed in position order, best first for the ideal."""

    def dcg(gains: list[float]) -> float:
        return sum(g / math.log2(i + 2) for i, g in enumerate(gains))

    return dcg([gain(g) for g in ranked]) / dcg(sorted(map(gain, grades), reverse=True))


def test_ndcg_of_graded_judgments_and_of_large_grades(tmp_path: Path) -> None:
    """Fractional grades (s = 0: the gains are 2^grade - 1 as written, to the last bit: halved
    gains change the last bit here), a grade of 60 (s = 8) and one of 1021 (s = 969, where a
    scale 104 steps larger would push the grade-1 gain into subnormals and lose its digits)."""
    judged = {
        "fraction": {"a": 0.2, "b": 0.5},
        "sixty": {"a": 60.0, "b": 1.0},
        "huge": {"a": 1021.0, "b": 1.0},
    }
    ranking = {"fraction": ["a", "b"], "sixty": ["b"], "huge": ["x", "b"]}  # x: not judged
    fraction = [0.2, 0.5]  # halved gains show in the last bit: this can fail
    assert plain_ndcg(fraction, fraction) != plain_ndcg(fraction, fraction, halved_gain)
    run = pd.DataFrame(
        [(q, d, r) for q, docs in ranking.items() for r, d in enumerate(docs, start=1)],
        columns=["query_id", "doc_id", "rank"],
    )
    qrels = pd.DataFrame(
        [(q, d, g) for q, grades in judged.items() for d, g in grades.items()],
        columns=["query_id", "doc_id", "relevance"],
    )
    _, per_query = evaluate(*write_inputs(tmp_path, run, qrels), "ndcg@10")
    got = dict(zip(per_query["query_id"], per_query["ndcg@10"], strict=True))
    grade = {q: {**grades, "x": 0.0} for q, grades in judged.items()}
    expected = {
        q: plain_ndcg([grade[q][d] for d in ranking[q]], list(judged[q].values())) for q in judged
    }
    assert got["fraction"] == expected["fraction"]
    assert expected["huge"] > 2.0**-1022  # a normal double, with all its digits
    # values near 1e-18 and 1e-308: a relative tolerance alone (pytest.approx adds 1e-12 absolute)
    for query in ("sixty", "huge"):
        assert math.isclose(got[query], expected[query], rel_tol=1e-12, abs_tol=0.0), query


def coins_agree(seed: object, permutations: int, queries: list[str]) -> int:
    """How many permutations keep every query's sign or flip every one: docs/metrics.md's coin
    is the top bit of hash('seed/permutation/query_id') (DuckDB's hash)."""
    con = duckdb.connect()
    agree = 0
    for p in range(permutations):
        keys = [f"{seed}/{p}/{q}" for q in queries]
        rows = con.execute("SELECT hash(unnest(?::VARCHAR[])) >> 63", [keys]).fetchall()
        agree += len(set(rows)) == 1
    return agree


def test_the_randomization_test_draws_its_coins_from_the_seed(tmp_path: Path) -> None:
    """The run's recalls are each below the baseline's, so a permutation's |mean difference|
    reaches the observed one only when it keeps all the signs or flips them all."""
    permutations, queries = 40, sorted(RUN)
    assert coins_agree(7, permutations, queries) != coins_agree(1.0, permutations, queries)
    paths = [tmp_path / f"{name}.parquet" for name in ("run", "baseline", "qrels")]
    for frame, path in zip(
        (as_run(RUN), as_run(BASELINE), ten_relevant_each(RUN)), paths, strict=True
    ):
        frame.to_parquet(path)
    run, baseline, qrels = paths
    (recall,) = compare_runs(
        run, baseline, qrels, "recall@10", permutations=permutations, seed=7
    ).metrics
    assert recall.p_value == coins_agree(7, permutations, queries) / permutations


@pytest.mark.parametrize(
    ("run_rows", "label", "first_relevant_rank"),
    [
        ([("q", "a", None), ("q", "b", 1)], "ambiguous", 2),  # a NULL rank sorts after rank 1
        ([("q", None, 1), ("q", "a", 1)], "good", 1),  # the tie on rank: a NULL doc_id last
    ],
)
def test_ds_labels_sorts_nulls_of_an_unchecked_run_last(
    run_rows: list[tuple[str, str | None, int | None]], label: str, first_relevant_rank: int
) -> None:
    """The table macros check no input (docs/in-sql.md), so a NULL rank or doc_id reaches the
    ranking; NULLs rank last, the project's convention (docs/design.md; ds_rank_desc and fuse's
    rank in docs/in-sql.md and docs/fuse.md say so)."""
    con = duckdb.connect()
    con.execute(pack_script())
    con.execute("CREATE TABLE run (query_id VARCHAR, doc_id VARCHAR, rank BIGINT)")
    con.executemany("INSERT INTO run VALUES (?, ?, ?)", run_rows)
    con.execute("CREATE TABLE qrels AS SELECT 'q' AS query_id, 'a' AS doc_id, 1 AS relevance")
    got = con.execute(
        "SELECT label, first_relevant_rank FROM ds_labels('run', 'qrels', k := 10)"
    ).fetchall()
    assert got == [(label, first_relevant_rank)]


def test_randomization_compares_differences_rounded_to_18_decimals() -> None:
    """docs/metrics.md: the permutation sums take each difference rounded to 18 decimals, so a
    difference below 5e-19 counts as 0 there: with differences 0.5 and 4e-19 every sign vector
    gives |sum| = 0.5, the observed one, and p = 1 (kept, 4e-19 would make half of them smaller)."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE paired AS SELECT * FROM (VALUES ('m', 'q1', 0.5::DOUBLE, 0.0::DOUBLE), "
        "('m', 'q2', 4e-19::DOUBLE, 0.0::DOUBLE)) AS t (metric, query_id, run_value, baseline_value)"
    )
    sql = render(
        "metrics/significance.sql",
        inputs={"paired": "paired"},
        test="randomization",
        permutations=200,
        seed=42,
    ).text
    cursor = con.execute(sql)
    (row,) = cursor.fetchall()
    got = dict(zip([d[0] for d in cursor.description], row, strict=True))
    assert got["difference"] == (0.5 + 4e-19) / 2  # the mean keeps the tiny difference
    assert got["p_value"] == 1.0
