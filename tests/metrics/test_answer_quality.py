"""`duckscore eval --answers-quality` (seed 000 §11) against independent oracles.

* By version and level: n, mean, the t interval, the shares routed — pandas groupby and
  scipy's t.interval on seeded random contracts and quality tables (missing values, a query in
  one version only, a quality row of no scored query); the routing's precision and recall —
  scikit-learn.
* The one-sided permutation test: p by hand on tiny cases, by enumerating every split with
  itertools on a larger one, and (random splits) within four standard errors of the exact p;
  each version's and metric's test, exact or drawn, equal to the plain-Python reference
  (answer_quality_reference.py).
* The command line: the report as text, JSON and Markdown, the bad inputs (one line, exit 2,
  nothing written) and the options the mode refuses.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from scipy import stats
from sklearn.metrics import precision_score, recall_score

from duckscore.cli import cli
from duckscore.metrics.answer_quality import QualityReport, evaluate_answer_quality

from .answer_quality_reference import permutation_test

LEVELS = ("high", "medium", "low")


def write_scored(folder: Path, version: str, rows: list[dict[str, Any]]) -> str:
    """A scored output folder holding only the contract lines the report reads."""
    folder.mkdir(parents=True)
    with open(folder / "contract.jsonl", "w", encoding="utf-8") as lines:
        for row in rows:
            lines.write(json.dumps({"score_policy_version": version, **row}) + "\n")
    return str(folder)


def contract_row(
    query_id: str, level: str, web: bool, hitl: bool, actions: list[str] | None = None
) -> dict[str, Any]:
    row = {"query_id": query_id, "confidence_level": level, "need_hitl": hitl,
           "web_fallback": web, "top_parents": []}  # fmt: skip
    return row if actions is None else {**row, "actions": actions}


def random_case(
    tmp_path: Path, seed: int, queries: int = 40
) -> tuple[list[str], pd.DataFrame, pd.DataFrame]:
    """Two versions' contracts (as one frame; v_a scored all but the last two queries) and a
    quality table, seeded."""
    rng = random.Random(seed)
    ids = [f"q{i:03d}" for i in range(queries)]
    scored, folders = [], []
    for version in ("v_a", "v_b"):
        rows = []
        for query_id in ids[: queries - 2 if version == "v_a" else queries]:
            level = rng.choice(LEVELS)
            actions = ["re_retrieve", "clarify"] if rng.random() < 0.2 else []
            rows.append(contract_row(query_id, level, level == "low" and rng.random() < 0.7,
                                     rng.random() < 0.2, actions))  # fmt: skip
        folders.append(write_scored(tmp_path / version, version, rows))
        scored += [{"version": version, **r} for r in rows]
    quality = pd.DataFrame({
        "query_id": ids + ["stranger"],
        "faithfulness": [None if rng.random() < 0.1 else round(rng.random(), 3) for _ in ids + [""]],
        "answer_relevancy": [None if rng.random() < 0.2 else rng.random() for _ in ids + [""]],
        "needed_web": [None if rng.random() < 0.1 else rng.random() < 0.3 for _ in ids + [""]],
        "needed_clarification": [None if rng.random() < 0.3 else rng.random() < 0.2
                                 for _ in ids + [""]],
    })  # fmt: skip
    for need in ("needed_web", "needed_clarification"):
        quality[need] = quality[need].astype("boolean")
    scored = pd.DataFrame(scored)
    scored["clarify"] = scored["actions"].map(lambda actions: "clarify" in actions)
    return folders, scored, quality


@pytest.mark.parametrize("seed", [1, 2])
def test_levels_and_routing_match_pandas_scipy_and_sklearn(tmp_path: Path, seed: int) -> None:
    folders, scored, quality = random_case(tmp_path, seed)
    report = evaluate_answer_quality(quality, folders, permutations=200, seed=3)
    assert report.versions == ["v_a", "v_b"] and report.ignored_queries == 1
    assert report.common_queries == 38
    joined = scored.merge(quality, on="query_id", how="left")
    joined["evaluated"] = joined[["faithfulness", "answer_relevancy"]].notna().any(axis=1)
    common = joined[joined["query_id"].isin(set(scored[scored.version == "v_a"].query_id))]
    for scope, frame in (("all", joined), ("common", common)):
        for (version, level, metric), got in _stats(report, scope).items():
            values = frame[(frame.version == version) & (frame.confidence_level == level)][metric]
            present = values.dropna().astype(float)
            assert got["n_queries"] == len(values) and got["n_evaluated"] == len(present)
            assert math.isclose(got["mean"], present.mean(), abs_tol=1e-12)
            if len(present) >= 2:
                low, high = stats.t.interval(0.95, len(present) - 1, loc=present.mean(),
                                             scale=present.std(ddof=1) / math.sqrt(len(present)))  # fmt: skip
                assert math.isclose(got["ci_low"], max(0, low), abs_tol=1e-9)
                assert math.isclose(got["ci_high"], min(1, high), abs_tol=1e-9)
        expected = frame.groupby(["version", "confidence_level"]).agg(
            n=("query_id", "size"),
            evaluated=("evaluated", "sum"),
            web=("web_fallback", "mean"),
            hitl=("need_hitl", "mean"),
            clarify=("clarify", "mean"),
            needed_web=("needed_web", "mean"),
            web_known=("needed_web", "count"),
            needed_clarification=("needed_clarification", "mean"),
        )
        routed = {(r["version"], r["level"]): r for r in report.routing if r["scope"] == scope}
        assert set(routed) == set(expected.index)
        for key, row in expected.iterrows():
            got = routed[key]  # type: ignore[index]
            assert (got["n_queries"], got["share_web"], got["share_hitl"]) == (
                row["n"], pytest.approx(row["web"]), pytest.approx(row["hitl"]))  # fmt: skip
            assert got["share_clarify"] == pytest.approx(row["clarify"])
            assert got["n_evaluated"] == row["evaluated"]
            assert got["n_needed_web_known"] == row["web_known"]
            assert got["share_needed_web"] == pytest.approx(row["needed_web"])
            assert got["share_needed_clarification"] == pytest.approx(row["needed_clarification"])
    joined["routed_clarification"] = joined.need_hitl | joined.clarify
    assert {c["need"] for c in report.routing_checks} == {"web", "clarification"}
    for check in report.routing_checks:
        needed, routed = {"web": ("needed_web", "web_fallback"),
                          "clarification": ("needed_clarification", "routed_clarification")}[
            check["need"]]  # fmt: skip
        known = joined[(joined.version == check["version"]) & joined[needed].notna()]
        truth = known[needed].astype(bool)
        assert check["known"] == len(known)
        assert (check["routed"], check["needed"], check["routed_and_needed"]) == (
            known[routed].sum(), truth.sum(), (truth & known[routed]).sum())  # fmt: skip
        assert check["routing_precision"] == pytest.approx(precision_score(truth, known[routed]))
        assert check["routing_recall"] == pytest.approx(recall_score(truth, known[routed]))
    assert_tests_match_reference(report, joined, permutations=200, seed=3)


@pytest.mark.parametrize("seed", [4, 5])
def test_every_split_of_each_version_and_metric_matches_the_reference(
    tmp_path: Path, seed: int
) -> None:
    """Pools of at most 12 queries, 2^12 permutations: each version's and metric's exact p."""
    folders, scored, quality = random_case(tmp_path, seed, queries=12)
    report = evaluate_answer_quality(quality, folders, permutations=4096)
    assert {check["exact"] for check in report.tests} - {None} == {True}
    assert_tests_match_reference(report, scored.merge(quality, on="query_id", how="left"), 4096, 42)


def assert_tests_match_reference(
    report: QualityReport, joined: pd.DataFrame, permutations: int, seed: int
) -> None:
    """Each version's and metric's permutation test against the plain-Python reference, the
    pool taken from the joined frame (a query's version, level and values) with pandas."""
    assert len(report.tests) == len(report.versions) * len(report.metrics)
    for check in report.tests:
        rows = joined[(joined.version == check["version"]) & joined[check["metric"]].notna()]
        sides = [rows[rows.confidence_level == level].set_index("query_id")[check["metric"]]
                 for level in ("high", "low")]  # fmt: skip
        expected = permutation_test(*(side.to_dict() for side in sides), permutations, seed)
        assert {key: check[key] for key in expected} == expected, check


def _stats(report: QualityReport, scope: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(s["version"], s["level"], s["metric"]): s for s in report.level_stats
            if s["scope"] == scope}  # fmt: skip


def one_version(tmp_path: Path, high: list[float], low: list[float]) -> list[str]:
    rows = [contract_row(f"h{i}", "high", False, False) for i in range(len(high))]
    rows += [contract_row(f"l{i}", "low", True, False) for i in range(len(low))]
    return [write_scored(tmp_path / "v", "v", rows)]


def quality_of(high: list[float], low: list[float]) -> pd.DataFrame:
    ids = [f"h{i}" for i in range(len(high))] + [f"l{i}" for i in range(len(low))]
    return pd.DataFrame({"query_id": ids, "faithfulness": high + low})


def test_exact_p_by_hand(tmp_path: Path) -> None:
    # high {0.9, 0.7}, low {0.2, 0.4}: of the C(4, 2) = 6 splits only the observed one puts a sum
    # as large as 1.6 on the high side, so p = 1/6; all values equal: every split ties, p = 1
    high, low = [0.9, 0.7], [0.2, 0.4]
    (check,) = evaluate_answer_quality(
        quality_of(high, low), one_version(tmp_path, high, low)
    ).tests
    assert check["exact"] and check["splits"] == 6 and check["as_extreme"] == 1
    assert (check["n_high"], check["n_low"]) == (2, 2)
    assert check["p_value"] == pytest.approx(1 / 6) and check["difference"] == pytest.approx(0.5)
    assert check["verdict"] == "not shown"
    tied = evaluate_answer_quality(
        quality_of([0.5, 0.5], [0.5]), one_version(tmp_path / "t", [0.5, 0.5], [0.5])
    )
    assert tied.tests[0]["p_value"] == 1.0


def test_ties_under_random_splits_and_at_18_decimals(tmp_path: Path) -> None:
    # 4 permutations test a pool of 3 by random splits (2^3 > 4): every split ties, p = 5/5;
    # 0.001 and the next double above it are the same to 18 decimal places, so the two splits tie
    tied = [0.5, 0.5], [0.5]
    (check,) = evaluate_answer_quality(
        quality_of(*tied), one_version(tmp_path, *tied), permutations=4
    ).tests
    assert not check["exact"] and (check["splits"], check["as_extreme"]) == (4, 4)
    assert check["p_value"] == 1.0
    close = [math.nextafter(0.001, 1)], [0.001]
    (check,) = evaluate_answer_quality(
        quality_of(*close), one_version(tmp_path / "c", *close)
    ).tests
    assert (check["splits"], check["as_extreme"], check["p_value"]) == (2, 2, 1.0)


def test_one_version_by_hand(tmp_path: Path) -> None:
    """One `high` query (groups of one), three `low` ones with a value and one without any, two
    metrics a level lacks; needs known for some queries only."""
    rows = [contract_row("h0", "high", False, False)]
    rows += [contract_row(f"l{i}", "low", True, False) for i in range(4)]
    nan = None
    quality = pd.DataFrame({
        "query_id": ["h0", "l0", "l1", "l2", "l3"],
        "faithfulness": [0.9, 0.1, 0.2, 0.3, nan],
        "answer_relevancy": [0.8, nan, nan, nan, nan],
        "context_precision": [nan, 0.2, 0.3, nan, nan],
        "needed_web": pd.array([False, True, None, None, None], dtype="boolean"),
        "needed_clarification": pd.array([True, None, None, None, None], dtype="boolean"),
    })  # fmt: skip
    report = evaluate_answer_quality(quality, [write_scored(tmp_path / "v", "v", rows)])
    assert {row["scope"] for row in report.level_stats + report.routing} == {"all"}
    high, low = report.routing
    assert (high["level"], high["n_queries"], high["n_evaluated"], low["n_evaluated"]) == (
        "high", 1, 1, 3)  # fmt: skip
    assert [high[k] for k in ("share_web", "share_hitl", "share_clarify")] == [0.0, 0.0, 0.0]
    assert [low[k] for k in ("share_web", "share_hitl", "share_clarify")] == [1.0, 0.0, 0.0]
    assert (high["n_needed_web_known"], high["share_needed_web"]) == (1, 0.0)
    assert (low["n_needed_web_known"], low["share_needed_web"]) == (1, 1.0)
    assert (high["n_needed_clarification_known"], high["share_needed_clarification"]) == (1, 1.0)
    assert (low["n_needed_clarification_known"], low["share_needed_clarification"]) == (0, None)
    clarification, web = (
        {k: check[k] for k in ("need", "known", "routed", "needed", "routed_and_needed",
                               "routing_precision", "routing_recall")}
        for check in report.routing_checks
    )  # fmt: skip
    assert web == {"need": "web", "known": 2, "routed": 1, "needed": 1, "routed_and_needed": 1,
                   "routing_precision": 1.0, "routing_recall": 1.0}  # fmt: skip
    assert clarification == {"need": "clarification", "known": 1, "routed": 0, "needed": 1,
                             "routed_and_needed": 0, "routing_precision": None,
                             "routing_recall": 0.0}  # fmt: skip
    # of the 4 splits of {0.9 | 0.1, 0.2, 0.3} only the observed one reaches 0.9; the other two
    # metrics lack a level: not tested
    faithfulness, relevancy, precision = report.tests
    assert {k: faithfulness[k] for k in ("n_high", "n_low", "splits", "as_extreme", "p_value")} == {
        "n_high": 1, "n_low": 3, "splits": 4, "as_extreme": 1, "p_value": 0.25}  # fmt: skip
    for untested in (relevancy, precision):
        assert untested["verdict"] == "not testable" and untested["splits"] is None
    # the mean is summed in query_id order: 0.1 + 0.2 + 0.3 is 0.6000000000000001, 0.6 backwards
    assert 0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1
    assert _stats(report, "all")["v", "low", "faithfulness"]["mean"] == (0.1 + 0.2 + 0.3) / 3


def enumerated_p(high: list[float], low: list[float]) -> float:
    """The exact one-sided p: every way of choosing len(high) of the pooled values as `high`."""
    pool, observed = high + low, sum(high) / len(high) - sum(low) / len(low)
    extreme = total = 0
    for chosen in itertools.combinations(range(len(pool)), len(high)):
        picked = [pool[i] for i in chosen]
        rest = [pool[i] for i in range(len(pool)) if i not in chosen]
        total += 1
        extreme += sum(picked) / len(picked) - sum(rest) / len(rest) >= observed - 1e-12
    return extreme / total


def test_exact_p_enumerates_every_split_and_random_splits_approach_it(tmp_path: Path) -> None:
    rng = random.Random(7)
    high = [round(rng.uniform(0.3, 1), 3) for _ in range(6)]
    low = [round(rng.uniform(0, 0.8), 3) for _ in range(7)]
    folders, quality = one_version(tmp_path, high, low), quality_of(high, low)
    exact = enumerated_p(high, low)
    (check,) = evaluate_answer_quality(quality, folders, permutations=8192).tests  # 2^13
    assert check["exact"] and check["splits"] == math.comb(13, 6)
    assert check["p_value"] == pytest.approx(exact, abs=1e-12)
    drawn = evaluate_answer_quality(quality, folders, permutations=4000, seed=5).tests[0]
    assert not drawn["exact"] and drawn["splits"] == 4000
    assert abs(drawn["p_value"] - exact) < 4 * math.sqrt(exact * (1 - exact) / 4000) + 1 / 4001
    again = evaluate_answer_quality(quality, folders, permutations=4000, seed=5).tests[0]
    assert again["p_value"] == drawn["p_value"]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", "eval", *args])


def test_cli_text_json_and_markdown(tmp_path: Path) -> None:
    high, low = [0.9, 0.8, 0.95], [0.1, 0.3]
    folders = one_version(tmp_path, high, low)
    path = tmp_path / "quality.csv"
    quality_of(high, low).assign(needed_web=[False, False, False, True, False]).to_csv(
        path, index=False
    )
    text = invoke(
        "--answers-quality", str(path), "--scored", folders[0], "--out", str(tmp_path / "r.md")
    )
    assert text.exit_code == 0, text.output
    assert "faithfulness: high above low" in text.output and "0.1000" in text.output  # p = 1/10
    assert (
        "| v | web_fallback vs needed_web | 5 | 1 | 2 | 0.5000 | 1.0000 |"
        in (tmp_path / "r.md").read_text()
    )
    as_json = invoke("--answers-quality", str(path), "--scored", folders[0], "--json")
    document = json.loads(as_json.output)
    assert document["checks"][0]["p_value"] == pytest.approx(0.1)
    assert document["by_level"][0]["metrics"]["faithfulness"]["n"] == 3


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    folders = one_version(tmp_path, [0.9], [0.1])
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,faithfulness\nh0,0.9\nl0,1.2\n", encoding="utf-8")
    out = tmp_path / "r.json"
    result = invoke("--answers-quality", str(bad), "--scored", folders[0], "--out", str(out))
    assert result.exit_code == 2 and not out.exists()
    assert (
        f"--answers-quality ({bad}, row 2, query_id='l0', value 1.2): column 'faithfulness' is above 1"
        in result.output
    )
    none = tmp_path / "none.csv"
    none.write_text("query_id,score\nh0,0.9\n", encoding="utf-8")
    result = invoke("--answers-quality", str(none), "--scored", folders[0])
    assert result.exit_code == 2 and "needs a column faithfulness" in result.output
    flags = tmp_path / "flags.csv"
    flags.write_text("query_id,faithfulness,needed_web\nh0,0.9,1\nl0,0.1,2\n", encoding="utf-8")
    result = invoke("--answers-quality", str(flags), "--scored", folders[0])
    assert (
        result.exit_code == 2 and "column 'needed_web' is not true/false (or 1/0)" in result.output
    )
    strangers = tmp_path / "strangers.csv"
    strangers.write_text("query_id,faithfulness\nx,0.5\n", encoding="utf-8")
    result = invoke("--answers-quality", str(strangers), "--scored", str(tmp_path))
    assert result.exit_code == 2 and "no contract.jsonl here" in result.output
    result = invoke("--answers-quality", str(strangers), "--scored", folders[0])
    assert result.exit_code == 2 and "share no query" in result.output


def test_the_modes_refuse_each_others_options(tmp_path: Path) -> None:
    result = invoke("--answers-quality", "q.csv", "--scored", "s", "--run", "r.csv")
    assert result.exit_code == 2 and "--run cannot be used with --answers-quality" in result.output
    result = invoke("--answers-quality", "q.csv")
    assert result.exit_code == 2 and "needs --scored" in result.output
    result = invoke("--run", "r.csv", "--qrels", "q.csv", "--scored", "s")
    assert result.exit_code == 2 and "--scored needs --answers-quality" in result.output


def test_nan_is_not_evaluated_as_ragas_writes_it(tmp_path: Path) -> None:
    # RAGAS writes NaN for a metric its evaluator could not score: read as empty, not refused
    high, low = [0.9, 0.7, 0.8], [0.2, 0.4]
    folders = one_version(tmp_path, high, low)
    frame = quality_of(high, low)
    frame.loc[[1, 3], "faithfulness"] = float("nan")
    as_nan = tmp_path / "nan.parquet"
    columns = {c: pa.array(frame[c].tolist(), from_pandas=False) for c in frame.columns}
    pq.write_table(pa.table(columns), as_nan)
    assert pq.read_table(as_nan).column("faithfulness").null_count == 0  # NaN, not NULL
    as_text = tmp_path / "nan.csv"
    frame.to_csv(as_text, index=False, na_rep="nan")
    expected = {("high", 2, 0.85), ("low", 1, 0.4)}  # by hand: the NaN rows (h1, l0) left out
    for given in (as_nan, as_text):
        report = evaluate_answer_quality(str(given), folders)
        got = {(s["level"], s["n_evaluated"], round(s["mean"], 12)) for s in report.level_stats}
        assert got == expected
    frame.loc[1, "faithfulness"] = float("inf")
    infinite = tmp_path / "inf.parquet"
    frame.to_parquet(infinite)
    result = invoke("--answers-quality", str(infinite), "--scored", folders[0])
    assert result.exit_code == 2 and "column 'faithfulness' is infinite" in result.output
