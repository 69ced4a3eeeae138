"""`duckscore eval --baseline`: paired two-sided tests of a run against a baseline.

Oracles: scipy (Student's t distribution, `ttest_rel`) on the SciFact per-query nDCG@10 that
the reference files hold (computed outside duckscore); ranx's `compare` (t-test and Fisher's
randomization test) on the same runs; and, for the randomization test, the exact p-value of a
small case by enumerating every sign vector.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner, Result
from scipy import stats

from duckscore.cli import cli
from duckscore.metrics.significance import compare_runs, paired_t_p_value, regularized_beta

from ..helpers import SCIFACT

QRELS = SCIFACT / "qrels.parquet"
RRF = SCIFACT / "reference_rrf_k60.parquet"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


@pytest.fixture(scope="module")
def sparse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sparse source as a doc-level run (a parent's best chunk score)."""
    log = pd.read_parquet(SCIFACT / "retrieval_log.parquet")
    docs = log[log["source"] == "sparse"].groupby(["query_id", "parent_id"], as_index=False)
    path = tmp_path_factory.mktemp("runs") / "sparse.parquet"
    docs.agg(score=("score", "max")).to_parquet(path)
    return path


@pytest.mark.parametrize("freedom", [1, 2, 5, 29, 299, 10_000])
def test_the_t_p_value_is_scipys(freedom: int) -> None:
    for t in (0.0, 0.01, 0.5, 1.0, 1.96, 3.3, 8.0, 40.0):
        expected = 2 * stats.t.sf(t, freedom)
        actual = paired_t_p_value(t, math.sqrt(freedom + 1), freedom + 1)  # mean/(sd/√n) = t
        assert actual == pytest.approx(expected, rel=1e-9, abs=1e-300), (t, freedom)
    assert regularized_beta(0.3, 2.5, 0.5) == pytest.approx(stats.beta.cdf(0.3, 2.5, 0.5))


def test_t_test_on_scifact_is_scipys_ttest_rel_on_the_reference_per_query(sparse: Path) -> None:
    result = compare_runs(RRF, sparse, QRELS, "ndcg@10", test="t-test")
    reference = pd.read_parquet(SCIFACT / "reference_per_query.parquet")
    run, baseline = reference["ndcg10_rrf_k60_canonical"], reference["ndcg10_sparse_canonical"]
    expected = stats.ttest_rel(run, baseline)
    (ndcg,) = result.metrics
    assert ndcg.p_value == pytest.approx(expected.pvalue, rel=1e-9)
    assert ndcg.difference == pytest.approx(run.mean() - baseline.mean(), abs=1e-12)
    assert result.queries == len(reference) == 300


@pytest.fixture(scope="module")
def ranx_runs(sparse: Path) -> tuple:
    import ranx

    qrels = pd.read_parquet(QRELS)
    judged: dict[str, dict[str, int]] = {}
    for row in qrels.itertuples():
        judged.setdefault(str(row.query_id), {})[str(row.parent_id)] = int(row.relevance)

    def as_run(frame: pd.DataFrame, score: str, name: str) -> ranx.Run:
        scores: dict[str, dict[str, float]] = {}
        for row in frame.itertuples():
            scores.setdefault(str(row.query_id), {})[str(row.parent_id)] = float(
                getattr(row, score)
            )
        return ranx.Run(scores, name=name)

    return (
        ranx.Qrels(judged),
        as_run(pd.read_parquet(RRF), "rrf_score", "run"),
        as_run(pd.read_parquet(sparse), "score", "baseline"),
    )


# not map: both runs hold tied scores (8,397 tied groups in the reference run, 774 in sparse),
# which duckscore orders by rank, else doc id, and ranx by its own tie-break; MAP reads every
# position, so its per-query values (not the tests) differ slightly
METRICS = ["ndcg@10", "recall@100", "mrr@10"]


@pytest.mark.slow
@pytest.mark.xdist_group("ranx")  # ranx compiles once, on one worker (with every ranx oracle)
@pytest.mark.parametrize(
    ("test", "ranx_test"), [("t-test", "student"), ("randomization", "fisher")]
)
def test_p_values_are_ranx_compares(
    test: str, ranx_test: str, ranx_runs: tuple, sparse: Path
) -> None:
    import ranx

    qrels, run, baseline = ranx_runs
    permutations = 4000
    report = ranx.compare(qrels, [baseline, run], METRICS, stat_test=ranx_test,
                          n_permutations=permutations, max_p=0.05)  # fmt: skip
    expected = report.to_dict()["run"]["comparisons"]["baseline"]
    ours = compare_runs(RRF, sparse, QRELS, METRICS, test=test, permutations=permutations)
    for metric in ours.metrics:
        p = expected[metric.metric]
        if test == "t-test":
            assert metric.p_value == pytest.approx(p, rel=1e-9), metric
        else:  # two estimates of one p-value, each from `permutations` draws
            error = 4 * math.sqrt(max(p * (1 - p), 1 / permutations) * 2 / permutations)
            assert abs(metric.p_value - p) <= error, (metric, p)


def test_randomization_estimates_the_exact_p_value(tmp_path: Path) -> None:
    """Twelve queries: the exact p-value enumerates all 4,096 sign vectors."""
    run_scores = [0.9, 0.1, 0.8, 0.7, 0.6, 0.95, 0.3, 0.85, 0.75, 0.65, 0.55, 0.45]
    queries = [f"q{i:02d}" for i in range(12)]
    qrels = pd.DataFrame({"query_id": queries, "doc_id": "relevant", "relevance": 1})
    # one relevant document per query, at rank 1 in the baseline for half the queries
    run = pd.DataFrame({"query_id": queries * 2, "doc_id": ["relevant"] * 12 + ["other"] * 12,
                        "score": run_scores + [0.5] * 12})  # fmt: skip
    baseline = pd.DataFrame({"query_id": queries * 2, "doc_id": ["relevant"] * 12 + ["other"] * 12,
                             "score": [0.4, 0.6] * 6 + [0.5] * 12})  # fmt: skip
    qrels.to_parquet(tmp_path / "qrels.parquet")
    run.to_parquet(tmp_path / "run.parquet")
    baseline.to_parquet(tmp_path / "baseline.parquet")
    result = compare_runs(tmp_path / "run.parquet", tmp_path / "baseline.parquet",
                          tmp_path / "qrels.parquet", "mrr@10", permutations=20_000)  # fmt: skip
    reciprocal = {True: 1.0, False: 0.5}
    differences = [reciprocal[r > 0.5] - reciprocal[b > 0.5]
                   for r, b in zip(run_scores, [0.4, 0.6] * 6, strict=True)]  # fmt: skip
    observed = abs(sum(differences))
    exact = (
        sum(
            abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed - 1e-12
            for signs in itertools.product((1, -1), repeat=12)
        )
        / 4096
    )
    (mrr,) = result.metrics
    assert mrr.difference == pytest.approx(sum(differences) / 12)
    assert abs(mrr.p_value - exact) <= 4 * math.sqrt(exact * (1 - exact) / 20_000), (mrr, exact)
    again = compare_runs(tmp_path / "run.parquet", tmp_path / "baseline.parquet",
                         tmp_path / "qrels.parquet", "mrr@10", permutations=20_000)  # fmt: skip
    assert again.metrics == result.metrics  # seeded: the same permutations


def test_cli_table_json_and_refusals(sparse: Path) -> None:
    common = ["eval", "--run", str(RRF), "--qrels", str(QRELS), "--metrics", "ndcg@10,recall@100"]
    table = invoke(*common, "--baseline", str(sparse), "--test", "t-test")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == ["metric", "run", "baseline", "difference", "p-value"]
    assert lines[2].startswith("recall@100") and lines[2].endswith(" *")
    assert "paired two-sided t test (Student's t) over 300 queries; * p <= 0.05" in table.output
    as_json = invoke(*common, "--baseline", str(sparse), "--json", "--permutations", "500")
    document = json.loads(as_json.output)
    assert list(document) == ["ndcg@10", "recall@100"]
    assert list(document["ndcg@10"]) == [
        "run", "baseline", "difference", "p_value", "p_value_below", "significant",
        "judged_queries", "run_covers", "baseline_covers",
    ]  # fmt: skip
    for args, message in (
        (["--test", "t-test"], "--test needs --baseline"),
        (["--baseline", str(sparse), "--per-query", "x.parquet"], "--per-query is not supported"),
        (["--baseline", "missing.parquet"], "--baseline: no such file: missing.parquet"),
        (["--baseline", str(sparse), "--alpha", "1.5"], "--alpha"),
    ):
        refused = invoke(*common, *args)
        assert refused.exit_code == 2 and message in refused.output, refused.output
