"""`duckscore eval` against independent oracles: pytrec_eval (trec_eval) and ranx on random runs,
and the SciFact reference numbers built outside this project.

* Random runs and qrels (seeded): graded relevance 0-3, tied scores and tied ranks, queries only in
  the run, only in the qrels, or judged with no relevant document. The oracles get a strictly
  decreasing pseudo-score derived from the documented order (rank ascending, else score
  descending; ties by doc id ascending), so their tie handling cannot differ. Every metric, per
  query and mean, must agree to 1e-12. nDCG is compared with ranx's `ndcg_burges` (gain
  2^rel - 1) and with trec_eval's `ndcg_cut` fed the gains 2^rel - 1 as judgments.
* SciFact: the canonical per-source doc-level runs (doc score = max of the source's item scores,
  doc order = best item rank) and the reference RRF run reproduce reference_metrics.json.
* The CLI: --json, the table, --per-query, and one-line errors with exit status 2.

The oracle runs all random cases at once (query ids prefixed with the case number), so ranx and
trec_eval are each called a few times in all.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import click
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import DuckscoreGroup, cli
from duckscore.cli.metrics import eval_command
from duckscore.core.check import check_sql
from duckscore.core.connection import EngineSettings
from duckscore.core.errors import DuckscoreError, InputError
from duckscore.core.inputs import schema_of
from duckscore.metrics.catalog import MetricError, parse_metrics
from duckscore.metrics.retrieval import evaluate, render_per_query
from duckscore.metrics.tables import RUN_DOC_COLUMNS

from ..helpers import SCIFACT

TOL = 1e-12
CASES = 40
CUTOFFS = (1, 2, 3, 5, 10)
METRICS = (
    [f"ndcg@{k}" for k in CUTOFFS]
    + ["ndcg"]
    + [f"recall@{k}" for k in CUTOFFS]
    + ["recall"]
    + [f"precision@{k}" for k in CUTOFFS]
    + [f"mrr@{k}" for k in CUTOFFS]
    + ["mrr"]
    + ["map"]
    + [f"map@{k}" for k in CUTOFFS]
    + [f"hit_rate@{k}" for k in CUTOFFS]
    + ["hit_rate"]
    + [f"hits@{k}" for k in CUTOFFS]
    + ["hits"]
)
STAGES = (
    "ranked",
    "judgments",
    "evaluated",
    "ideal",
    "judged_run",
    "positioned",
    "run_stats",
    "ideal_stats",
    "per_query",
)


def close(actual: float, expected: float) -> bool:
    return math.isclose(actual, expected, rel_tol=TOL, abs_tol=TOL)


# ---------------------------------------------------------------------------------------------
# random cases


def random_case(seed: int) -> dict[str, Any]:
    """A run (score, rank, or both) and graded qrels over a small pool of doc ids."""
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(rng.randint(1, 14))]  # d1 < d10 < d2 as text: order is text
    queries = [f"q{i}" for i in range(rng.randint(1, 7))]
    order = rng.choice(["score", "rank", "both"])
    doc_column = rng.choice(RUN_DOC_COLUMNS)
    run_rows, qrels_rows = [], []
    for query in queries:
        kind = rng.random()
        if kind > 0.15:  # in the run (else qrels only)
            for doc in rng.sample(pool, rng.randint(1, len(pool))):
                run_rows.append(
                    {
                        "query_id": query,
                        doc_column: doc,
                        "score": float(rng.choice([0.5, 1.0, 1.5, 2.0, rng.random()])),
                        "rank": rng.randint(1, 6),
                    }
                )
        if kind < 0.9:  # judged (else run only, ignored)
            all_zero = rng.random() < 0.1
            for doc in rng.sample(pool, rng.randint(1, len(pool))):
                relevance = 0 if all_zero else rng.choice([0, 0, 1, 1, 2, 3])
                qrels_rows.append({"query_id": query, "parent_id": doc, "relevance": relevance})
    if not qrels_rows:
        qrels_rows.append({"query_id": "q_only", "parent_id": pool[0], "relevance": 1})
    run = pd.DataFrame(
        run_rows or [{"query_id": "r_only", doc_column: pool[0], "score": 1.0, "rank": 1}]
    )
    if order == "score":
        run = run.drop(columns="rank")
    elif order == "rank":
        run = run.drop(columns="score")
    rng_state = rng.random()
    run = run.sample(frac=1.0, random_state=int(rng_state * 1000)).reset_index(drop=True)
    return {
        "run": run,
        "qrels": pd.DataFrame(qrels_rows),
        "doc_column": doc_column,
        "order": "rank" if "rank" in run.columns else "score",
    }


def documented_order(run: pd.DataFrame, doc_column: str, order: str) -> pd.DataFrame:
    """The run sorted as documented, with position 1.. and a strictly decreasing pseudo-score."""
    frame = run.rename(columns={doc_column: "doc_id"})
    if order == "rank":
        frame = frame.sort_values(["query_id", "rank", "doc_id"], ascending=[True, True, True])
    else:
        frame = frame.sort_values(["query_id", "score", "doc_id"], ascending=[True, False, True])
    frame = frame.reset_index(drop=True)
    frame["position"] = frame.groupby("query_id").cumcount() + 1
    frame["pseudo"] = 1e6 - frame["position"].astype(float)
    return frame


@pytest.fixture(scope="session")
def random_results() -> dict[str, Any]:
    """duckscore on every random case, and the merged oracle inputs (query ids 'c<case>/<q>')."""
    ours: dict[str, dict[str, float]] = {}
    means: dict[int, dict[str, float]] = {}
    evaluated: dict[int, list[str]] = {}
    run_dict: dict[str, dict[str, float]] = {}
    qrels_dict: dict[str, dict[str, int]] = {}
    for case in range(CASES):
        data = random_case(case)
        case_means, per_query = evaluate(data["run"], data["qrels"], METRICS)
        means[case] = case_means
        evaluated[case] = [f"c{case}/{q}" for q in per_query["query_id"]]
        for row in per_query.to_dict("records"):
            ours[f"c{case}/{row['query_id']}"] = {m: row[m] for m in METRICS}
        ordered = documented_order(data["run"], data["doc_column"], data["order"])
        for row in ordered.itertuples():
            run_dict.setdefault(f"c{case}/{row.query_id}", {})[row.doc_id] = row.pseudo
        for row in data["qrels"].itertuples():
            qrels_dict.setdefault(f"c{case}/{row.query_id}", {})[row.parent_id] = int(row.relevance)
    return {
        "ours": ours,
        "means": means,
        "evaluated": evaluated,
        "run": run_dict,
        "qrels": qrels_dict,
    }


@pytest.mark.xdist_group("ranx")  # random_results computed once, with ranx's compiled code
def test_evaluated_queries_are_the_judged_ones(random_results: dict[str, Any]) -> None:
    judged = set(random_results["qrels"])
    assert set(random_results["ours"]) == judged
    assert any(q not in judged for q in random_results["run"])  # run-only queries were ignored
    assert any(q not in random_results["run"] for q in judged)  # qrels-only queries scored 0
    zero = [q for q, docs in random_results["qrels"].items() if max(docs.values()) <= 0]
    assert zero and all(all(v == 0 for v in random_results["ours"][q].values()) for q in zero)


def ranx_per_query(random_results: dict[str, Any]) -> dict[str, dict[str, float]]:
    import ranx

    qrels_dict, run_dict = random_results["qrels"], random_results["run"]
    # Comparable run: judged queries only; a query without run rows gets one unjudged document.
    run = {q: dict(run_dict.get(q) or {"__unjudged__": 1.0}) for q in qrels_dict}
    names = {m: ("ndcg_burges" + m[4:] if m.startswith("ndcg") else m) for m in METRICS}
    ranx_run = ranx.Run(run)
    ranx.evaluate(
        ranx.Qrels(qrels_dict),
        ranx_run,
        list(names.values()),
        return_mean=False,
        save_results_in_run=True,
    )
    return {q: {m: float(ranx_run.scores[names[m]][q]) for m in METRICS} for q in qrels_dict}


def trec_per_query(random_results: dict[str, Any]) -> dict[str, dict[str, float]]:
    import pytrec_eval

    qrels_dict, run_dict = random_results["qrels"], random_results["run"]
    gains = {q: {d: 2**r - 1 for d, r in docs.items()} for q, docs in qrels_dict.items()}
    ks = ",".join(map(str, CUTOFFS))
    plain = pytrec_eval.RelevanceEvaluator(
        qrels_dict,
        {
            f"P.{ks}",
            f"recall.{ks}",
            f"map_cut.{ks}",
            f"success.{ks}",
            "map",
            "recip_rank",
            "num_rel",
            "num_rel_ret",
        },
    ).evaluate(run_dict)
    graded = pytrec_eval.RelevanceEvaluator(gains, {f"ndcg_cut.{ks}", "ndcg"}).evaluate(run_dict)
    truncated: dict[int, dict[str, Any]] = {}
    for k in CUTOFFS:  # mrr@k and hits@k: trec_eval on the run cut at k
        cut = {
            q: {d: s for d, s in docs.items() if s > 1e6 - k - 0.5} for q, docs in run_dict.items()
        }
        truncated[k] = pytrec_eval.RelevanceEvaluator(
            qrels_dict, {"recip_rank", "num_rel_ret"}
        ).evaluate(cut)
    out: dict[str, dict[str, float]] = {}
    for q in qrels_dict:
        if q not in plain:  # no run row: trec_eval -c scores it 0
            out[q] = dict.fromkeys(METRICS, 0.0)
            continue
        p, g = plain[q], graded[q]
        values = {
            "ndcg": g["ndcg"],
            "map": p["map"],
            "mrr": p["recip_rank"],
            "hits": p["num_rel_ret"],
            "hit_rate": float(p["num_rel_ret"] > 0),
            "recall": p["num_rel_ret"] / p["num_rel"] if p["num_rel"] else 0.0,
        }
        for k in CUTOFFS:
            values |= {
                f"ndcg@{k}": g[f"ndcg_cut_{k}"],
                f"recall@{k}": p[f"recall_{k}"],
                f"precision@{k}": p[f"P_{k}"],
                f"map@{k}": p[f"map_cut_{k}"],
                f"hit_rate@{k}": p[f"success_{k}"],
                f"mrr@{k}": truncated[k][q]["recip_rank"],
                f"hits@{k}": truncated[k][q]["num_rel_ret"],
            }
        out[q] = {m: float(values[m]) for m in METRICS}
    return out


@pytest.mark.xdist_group("ranx")
@pytest.mark.parametrize("oracle", [ranx_per_query, trec_per_query], ids=["ranx", "pytrec_eval"])
def test_every_metric_matches_the_oracle(oracle: Any, random_results: dict[str, Any]) -> None:
    expected = oracle(random_results)
    ours = random_results["ours"]
    assert set(expected) == set(ours)
    mismatches = [
        (q, m, ours[q][m], expected[q][m])
        for q in sorted(ours)
        for m in METRICS
        if not close(ours[q][m], expected[q][m])
    ]
    assert not mismatches, mismatches[:10]
    for case, queries in random_results["evaluated"].items():
        for metric in METRICS:
            mean = sum(expected[q][metric] for q in queries) / len(queries)
            assert close(random_results["means"][case][metric], mean), (case, metric)


def test_row_order_and_threads_change_nothing() -> None:
    for case in range(5):
        data = random_case(100 + case)
        means, per_query = evaluate(data["run"], data["qrels"], METRICS)
        shuffled = data["run"].sample(frac=1.0, random_state=case).reset_index(drop=True)
        reversed_qrels = (
            data["qrels"].iloc[::-1].copy()
        )  # a copy: DuckDB cannot scan a reversed view
        means_1, per_query_1 = evaluate(
            shuffled, reversed_qrels, METRICS, settings=EngineSettings(threads=1)
        )
        assert means == means_1
        pd.testing.assert_frame_equal(per_query, per_query_1)


# ---------------------------------------------------------------------------------------------
# SciFact: the canonical doc-level runs and the reference RRF run


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return json.loads((SCIFACT / "reference_metrics.json").read_text())


@pytest.fixture(scope="module")
def doc_runs() -> dict[str, pd.DataFrame]:
    """Per source: doc score = max item score per parent, doc order = best (lowest) item rank."""
    log = pd.read_parquet(SCIFACT / "retrieval_log.parquet")
    docs = log.groupby(["source", "query_id", "parent_id"], as_index=False).agg(
        score=("score", "max"), rank=("rank", "min")
    )
    return {
        s: frame.drop(columns="source").reset_index(drop=True)
        for s, frame in docs.groupby("source")
    }


@pytest.mark.parametrize("source", ["sparse", "dense", "summary"])
def test_scifact_sources_reproduce_the_reference(
    source: str, doc_runs: dict[str, pd.DataFrame], reference: dict[str, Any]
) -> None:
    means, per_query = evaluate(doc_runs[source], SCIFACT / "qrels.parquet", "ndcg@10,recall@100")
    expected = reference["metrics_canonical"][source]
    assert close(means["ndcg@10"], expected["ndcg@10"]), means
    assert close(means["recall@100"], expected["recall@100"]), means
    assert len(per_query) == 300
    by_query = pd.read_parquet(SCIFACT / "reference_per_query.parquet").set_index("query_id")
    joined = per_query.set_index("query_id")["ndcg@10"]
    reference_column = by_query.loc[joined.index, f"ndcg10_{source}_canonical"]
    assert all(close(a, b) for a, b in zip(joined, reference_column))


def test_scifact_rrf_reproduces_the_reference(reference: dict[str, Any]) -> None:
    means, _ = evaluate(
        SCIFACT / "reference_rrf_k60.parquet", SCIFACT / "qrels.parquet", ["ndcg@10", "recall@100"]
    )
    assert close(means["ndcg@10"], 0.6604601182827838)
    assert close(means["recall@100"], 0.9560000000000001)
    assert close(means["ndcg@10"], reference["metrics_canonical"]["rrf_k60"]["ndcg@10"])


def test_scifact_score_only_run_orders_by_score(doc_runs: dict[str, pd.DataFrame]) -> None:
    """Dense scores hardly tie, so score descending gives the rank order's numbers."""
    by_rank, _ = evaluate(doc_runs["dense"], SCIFACT / "qrels.parquet", "ndcg@10,map")
    by_score, _ = evaluate(
        doc_runs["dense"].drop(columns="rank"), SCIFACT / "qrels.parquet", "ndcg@10,map"
    )
    assert close(by_rank["ndcg@10"], by_score["ndcg@10"])


# ---------------------------------------------------------------------------------------------
# the SQL, the metric list, the Python API


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_renders_checks_and_runs(stage: str) -> None:
    import duckdb

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE eval_run AS SELECT 'q' AS query_id, 'd' AS doc_id, "
        "CAST(1 AS DOUBLE) AS score, CAST(NULL AS DOUBLE) AS rank"
    )
    con.execute(
        "CREATE TABLE eval_qrels AS SELECT 'q' AS query_id, 'd' AS doc_id, "
        "CAST(2 AS DOUBLE) AS relevance"
    )
    for order_by in ("rank", "score"):
        rendered = render_per_query(parse_metrics(METRICS), order_by, final=stage)
        check_sql(rendered, {t: schema_of(con, t) for t in ("eval_run", "eval_qrels")})
        assert con.execute(rendered.text).fetchall()


def test_metric_names_keep_their_spelling() -> None:
    parsed = parse_metrics(" NDCG@10, map ,Hit_Rate@3")
    assert [(m.key, m.name, m.k) for m in parsed] == [
        ("NDCG@10", "ndcg", 10),
        ("map", "map", None),
        ("Hit_Rate@3", "hit_rate", 3),
    ]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("ndcg@10,foo@3", "unknown metric 'foo@3'"),
        ("ndcg@10,ndgc@10", "did you mean 'ndcg@10'"),
        ("ndcg@0", "bad cutoff in 'ndcg@0'"),
        ("ndcg@", "bad cutoff"),
        ("ndcg@x", "bad cutoff"),
        ("ndcg@-3", "bad cutoff"),
        ("ndcg@010", "bad cutoff"),
        ("ndcg@1.5", "bad cutoff"),
        ("ndcg@1000000001", "bad cutoff"),
        ("ndcg@1" + "0" * 5000, "bad cutoff"),
        ("precision", "'precision' needs a cutoff"),
        ("ndcg@10,,map", "empty metric name"),
        ("map,MAP", "listed twice"),
        ("", "empty metric name"),
    ],
)
def test_bad_metric_lists(spec: str, message: str) -> None:
    with pytest.raises(MetricError, match=message.replace("(", r"\(")):
        parse_metrics(spec)


def test_dataframe_api_and_qrels_doc_id_column() -> None:
    run = pd.DataFrame(
        {"query_id": [1, 1, 1, 2], "item_id": ["a", "b", "c", "a"], "score": [0.2, 0.9, 0.9, 1.0]}
    )
    qrels = pd.DataFrame(
        {"query_id": ["1", "1", "3"], "doc_id": ["c", "a", "x"], "relevance": [2, 1, 1]}
    )
    means, per_query = evaluate(run, qrels, "mrr@10,recall@2,precision@2")
    # query 1: order b (0.9), c (0.9, tie by id), a -> first relevant at 2; query 3: no run rows
    assert list(per_query["query_id"]) == ["1", "3"]
    assert list(per_query["mrr@10"]) == [0.5, 0.0]
    assert list(per_query["recall@2"]) == [0.5, 0.0]
    assert list(per_query["n_retrieved"]) == [3, 0]
    assert means == {"mrr@10": 0.25, "recall@2": 0.25, "precision@2": 0.25}


@pytest.mark.parametrize(
    "run, qrels, message",
    [
        (
            {"query_id": ["q"], "score": [1.0]},
            None,
            "missing column 'doc_id' (or 'parent_id', 'item_id')",
        ),
        ({"query_id": ["q"], "doc_id": ["d"]}, None, "needs a rank or a score column"),
        ({"doc_id": ["d"], "score": [1.0]}, None, "missing column 'query_id'"),
        (
            {"query_id": ["q", "q", "q"], "doc_id": ["d", "e", "d"], "score": [1.0, 0.5, 0.2]},
            None,
            "(<DataFrame>, row 3, query_id='q', doc_id='d'): duplicate (query_id, doc_id), first seen at <DataFrame>, row 1",
        ),
        (
            {"query_id": ["q"], "doc_id": ["d"], "score": [float("nan")]},
            None,
            "column 'score' is null",
        ),  # pandas NaN reaches DuckDB as NULL
        (
            None,
            {"query_id": ["q"], "parent_id": ["d"]},
            "--qrels (<DataFrame>): missing column 'relevance'",
        ),
        (
            None,
            {"query_id": ["q", "q"], "parent_id": ["d", "d"], "relevance": [1, 0]},
            "duplicate (query_id, parent_id)",
        ),
    ],
)
def test_bad_inputs_name_the_problem(run: Any, qrels: Any, message: str) -> None:
    run_frame = pd.DataFrame(run or {"query_id": ["q"], "doc_id": ["d"], "score": [1.0]})
    qrels_frame = pd.DataFrame(qrels or {"query_id": ["q"], "doc_id": ["d"], "relevance": [1]})
    with pytest.raises(InputError) as caught:
        evaluate(run_frame, qrels_frame, "map")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------------------------------------
# the command line


def group() -> tuple[click.Group, list[str]]:
    """The real `duckscore` group once eval is registered; until then the same group class."""
    if "eval" in cli.commands:
        return cli, ["-q", "eval"]
    return DuckscoreGroup(name="duckscore", commands={"eval": eval_command}), ["eval"]


def invoke(*args: str) -> Result:
    command, prefix = group()
    return CliRunner().invoke(command, [*prefix, *args])


QRELS = str(SCIFACT / "qrels.parquet")
RRF = str(SCIFACT / "reference_rrf_k60.parquet")


def test_cli_json_has_exactly_the_requested_keys() -> None:
    result = invoke(
        "--run", RRF, "--qrels", QRELS, "--metrics", "ndcg@10,recall@100,MRR@10,map@5", "--json"
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\n") == 1
    means = json.loads(result.stdout)
    assert list(means) == ["ndcg@10", "recall@100", "MRR@10", "map@5"]
    assert close(means["ndcg@10"], 0.6604601182827838)
    assert close(means["recall@100"], 0.9560000000000001)


def test_cli_table_and_per_query(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "per_query.parquet"
    result = invoke("--run", RRF, "--qrels", QRELS, "--per-query", str(out))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["metric", "mean"]
    assert [line.split()[0] for line in lines[1:5]] == ["ndcg@10", "recall@100", "mrr@10", "map"]
    assert lines[1].split()[1] == "0.660460"
    assert lines[-1].startswith("300 queries evaluated (0 without run rows)")
    table = pq.read_table(out).to_pandas()
    assert list(table.columns) == [
        "query_id",
        "n_relevant",
        "n_retrieved",
        "ndcg@10",
        "recall@100",
        "mrr@10",
        "map",
    ]
    assert len(table) == 300 and close(table["ndcg@10"].mean(), 0.6604601182827838)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]


def test_cli_reads_csv_with_integer_ids(tmp_path: Path) -> None:
    run = tmp_path / "run.csv"
    pd.read_parquet(RRF).rename(columns={"parent_id": "doc_id"}).to_csv(run, index=False)
    result = invoke("--run", str(run), "--qrels", QRELS, "--json", "--metrics", "ndcg@10")
    assert result.exit_code == 0, result.stderr
    assert close(json.loads(result.stdout)["ndcg@10"], 0.6604601182827838)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--metrics", "ndcg@10,bm25@3"], "--metrics: unknown metric 'bm25@3'"),
        (["--metrics", "recall@0"], "--metrics: bad cutoff in 'recall@0'"),
        (["--qrels", RRF], "--qrels ("),
        (["--qrels", "missing.parquet"], "--qrels: no such file: missing.parquet"),
    ],
)
def test_cli_bad_options_are_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    options = {"--run": RRF, "--qrels": QRELS, **dict(zip(args[::2], args[1::2]))}
    out = tmp_path / "per_query.parquet"
    result = invoke(*[x for pair in options.items() for x in pair], "--per-query", str(out))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("duckscore: error: ")
    assert message in result.stderr
    assert result.stdout == "" and not out.exists()


@pytest.mark.parametrize(
    "frame, message",
    [
        (pd.DataFrame({"query_id": ["1"], "score": [1.0]}), "missing column 'doc_id'"),
        (
            pd.DataFrame(
                {"query_id": ["1", "1", "1"], "parent_id": ["a", "b", "a"], "rank": [1, 2, 3]}
            ),
            "--run (run.parquet, row 3, query_id='1', parent_id='a'): duplicate (query_id, parent_id), "
            "first seen at run.parquet, row 1",
        ),
    ],
)
def test_cli_bad_run_is_one_line(
    frame: pd.DataFrame, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    frame.to_parquet("run.parquet")
    result = invoke("--run", "run.parquet", "--qrels", QRELS)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("duckscore: error: ")
    assert message in result.stderr, result.stderr


def test_cli_help_documents_the_conventions() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for phrase in (
        "rank ascending",
        "score",
        "ties by document id",
        "scores 0",
        "--per-query",
        "hit_rate@k",
        "2^relevance - 1",
    ):
        assert phrase in result.stdout, phrase


def test_errors_are_duckscore_errors() -> None:
    assert issubclass(MetricError, DuckscoreError) and issubclass(InputError, DuckscoreError)
