"""Tests written for mutants of sql/metrics/ that survived the fast tests (tests/mutants/, issue 37):
`--baseline`'s means summed in `query_id` DESC order instead of ASC passed every test, which
compared them with a tolerance. docs/metrics.md promises each mean "summed in `query_id` order";
recalls of 0.1, 0.2 and 0.3 sum to 0.6000000000000001 in that order and to 0.6 in the other, so
the run's, the baseline's and the difference's means are checked here to the bit against a Python
sum in that order."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from duckscore.metrics.significance import compare_runs

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
    for test in ("t-test", "randomization"):
        (recall,) = compare_runs(*paths, "recall@10", test=test, permutations=10).metrics
        assert (recall.run, recall.baseline, recall.difference) == expected, test
