"""The trace fixtures the real instrumentations recorded (fixtures/traces/, made by
tests/integrations/trace_apps.py: LangChain and LlamaIndex under OpenInference, LangChain under
OpenLLMetry; their versions in VERSIONS.json) score as they are, with no hand edit.

Each recorded file — the SDK's OTLP JSON file export (`otlp.jsonl`), the collector's shape of the
same export (`collector.jsonl`) and Phoenix's own span DataFrame (`phoenix_spans.parquet`) — is
fused with the --log-format that reads it and compared with the same hits given as a plain
retrieval_log (`plain_log.parquet`, gathered inside the app from the leaf retrievers' own
results, never from the spans): nDCG@10 against the corpus judgments within 0.01, the fused
lists themselves equal, and the ensemble (the retriever whose documents are its children's)
never counted as a source. Phoenix's export of OpenLLMetry's spans holds them under nested
`gen_ai` attributes that only OTLP JSON is read for: it is refused, saying what it holds and
which format reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from ..helpers import FIXTURES
from .test_traces import invoke

TRACES = FIXTURES / "traces"
APPS = sorted(json.loads((TRACES / "VERSIONS.json").read_text())["apps"])
FORMAT = {app: "otel-genai" if app.startswith("openllmetry") else "openinference" for app in APPS}
# the retrievers whose documents are their children's, by app: never a source
ENSEMBLES = {"langchain_ensemble": "EnsembleRetriever", "openllmetry_ensemble": "EnsembleRetriever",
             "langchain_parallel": "HybridRetriever", "langchain_multiquery": "MultiQueryRetriever",
             "llamaindex_fusion": "QueryFusionRetriever.retrieve"}  # fmt: skip
RECORDED = [
    (app, name)
    for app in APPS
    for name in ("otlp.jsonl", "collector.jsonl", "phoenix_spans.parquet")
    if (TRACES / app / name).is_file()
    and (app, name) != ("openllmetry_ensemble", "phoenix_spans.parquet")
]


def loud(*args: str) -> Result:
    """The command with its warnings (invoke is -q)."""
    return CliRunner().invoke(cli, list(args))


def ndcg(fused: Path, qrels: Path) -> float:
    done = invoke(
        "eval", "--run", str(fused), "--qrels", str(qrels), "--metrics", "ndcg@10", "--json"
    )
    assert done.exit_code == 0, done.stderr
    return float(json.loads(done.stdout)["ndcg@10"])


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each app's plain log, fused once."""
    out = tmp_path_factory.mktemp("plain")
    for app in APPS:
        done = invoke(
            "fuse", "--log", str(TRACES / app / "plain_log.parquet"), "--out", str(out / app)
        )
        assert done.exit_code == 0, done.stderr
    return {app: out / app / "fused.parquet" for app in APPS}


def test_every_app_has_its_recorded_files() -> None:
    assert {"langchain_ensemble", "langchain_parallel", "langchain_multiquery", "llamaindex_flat",
            "llamaindex_fusion", "openllmetry_ensemble"} <= set(APPS)  # fmt: skip
    for app in APPS:
        assert (TRACES / app / "otlp.jsonl").is_file() and (
            TRACES / app / "plain_log.parquet"
        ).is_file()
    assert (TRACES / "langchain_ensemble" / "collector.jsonl").is_file()


@pytest.mark.parametrize(("app", "name"), RECORDED)
def test_a_recorded_export_scores_as_its_plain_log(
    app: str, name: str, plain: dict[str, Path], tmp_path: Path
) -> None:
    recorded = TRACES / app / name
    done = loud(
        "fuse", "--log", str(recorded), "--log-format", FORMAT[app], "--out", str(tmp_path / "out")
    )
    assert done.exit_code == 0, done.stderr
    fused = tmp_path / "out" / "fused.parquet"
    qrels = TRACES / app / "qrels.parquet"
    assert abs(ndcg(fused, qrels) - ndcg(plain[app], qrels)) <= 0.01
    # the same fused lists, item for item
    columns = "query_id, item_id, rank, round(fused_score, 12)"
    a, b = f"SELECT {columns} FROM '{fused}'", f"SELECT {columns} FROM '{plain[app]}'"
    for left, right in ((a, b), (b, a)):
        assert duckdb.sql(f"SELECT count(*) FROM ({left} EXCEPT ALL {right})").fetchall() == [(0,)]
    # the sources are the leaf retrievers the app ran, never the ensemble
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    expected = duckdb.sql(
        f"SELECT DISTINCT source FROM '{TRACES / app / 'plain_log.parquet'}'"
    ).fetchall()
    assert sorted(manifest["sources"]) == sorted(row[0] for row in expected)
    assert ENSEMBLES.get(app) not in manifest["sources"]
    if app in ENSEMBLES:
        assert "(nested retrievers)" in done.stderr  # said, in one warning line


def test_langchain_documents_without_an_id_take_the_metadata_id_and_say_so(tmp_path: Path) -> None:
    """LangChain's instrumentation writes no document.id: the metadata's `id` is the id, and
    the run says which rule gave it to how many documents, in one line."""
    path = TRACES / "langchain_ensemble" / "otlp.jsonl"
    done = loud(
        "fuse", "--log", str(path), "--log-format", "openinference", "--out", str(tmp_path / "out")
    )
    assert done.exit_code == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "without an id" in line]
    assert lines == [
        f"duckscore: warning: --log ({path}): 400 documents "
        "without an id are given one by the first rule that applies: the metadata's id (400); "
        "--doc-id KEY names a metadata key instead (docs/traces.md#documents-without-an-id)"
    ]


def test_phoenix_export_of_openllmetry_spans_is_refused_saying_what_it_holds(
    tmp_path: Path,
) -> None:
    path = TRACES / "openllmetry_ensemble" / "phoenix_spans.parquet"
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "openinference", "--out", str(tmp_path / "out")
    )
    assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr == (
        f"duckscore: error: --log ({path}): no retrieval span returned a document (0 retrieval "
        "spans in 0 traces): nothing to fuse; the export holds 200 spans; openinference.span.kind: "
        "AGENT 50; gen_ai.operation.name: invoke_agent 50, vector_db_retrieve 150, none of them a "
        "RETRIEVER span: --log-format otel-genai reads it as OTLP JSON (an OpenTelemetry file "
        "exporter's), not Phoenix's export\n"
    )


@pytest.mark.parametrize(
    ("app", "wrong", "reads"),
    [("langchain_ensemble", "otel-genai", "openinference.span.kind: CHAIN 50, RETRIEVER 150, none of "
      "them a span whose gen_ai.operation.name is retrieval or vector_db_retrieve, or with "
      "db.query.result events: --log-format openinference reads it"),
     ("openllmetry_ensemble", "openinference", "gen_ai.operation.name: invoke_agent 50, "
      "vector_db_retrieve 150, none of them a RETRIEVER span: --log-format otel-genai reads it")],
)  # fmt: skip
def test_the_wrong_format_names_what_was_found_and_the_right_one(
    app: str, wrong: str, reads: str, tmp_path: Path
) -> None:
    done = invoke("fuse", "--log", str(TRACES / app / "otlp.jsonl"), "--log-format", wrong,
                  "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.endswith(f"the export holds 200 spans; {reads}\n"), done.stderr
    assert not (tmp_path / "out").exists()


def test_a_trace_run_keyed_by_its_input_is_evaluated_against_the_queries_judgments(
    tmp_path: Path,
) -> None:
    """--query-key input: each trace's query_id is its root span's input, the question, so
    judgments keyed by the question text evaluate the run as those keyed by trace id do."""
    app = TRACES / "langchain_ensemble"
    done = invoke("run", "--log", str(app / "otlp.jsonl"), "--log-format", "openinference",
                  "--query-key", "input", "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    by_text = tmp_path / "qrels_by_text.parquet"
    duckdb.sql(
        f"COPY (SELECT t.query_text AS query_id, q.parent_id, q.relevance "
        f"FROM '{app / 'qrels.parquet'}' AS q JOIN '{app / 'traces.parquet'}' AS t "
        f"ON t.trace_id = q.query_id) TO '{by_text}'"
    )
    queries = duckdb.sql(
        f"SELECT query_id FROM '{tmp_path / 'out' / 'queries.parquet'}' ORDER BY 1"
    ).fetchall()
    texts = duckdb.sql(f"SELECT query_text FROM '{app / 'traces.parquet'}' ORDER BY 1").fetchall()
    assert queries == texts
    spans = duckdb.sql(
        f"SELECT DISTINCT s.query_id, t.query_text FROM '{tmp_path / 'out' / 'spans.parquet'}' AS s "
        f"JOIN '{app / 'traces.parquet'}' AS t ON t.trace_id = s.trace_id"
    ).fetchall()
    assert all(query == text for query, text in spans) and len(spans) == len(texts)
    keyed = ndcg(tmp_path / "out" / "fused.parquet", by_text)
    invoke(
        "fuse",
        "--log",
        str(app / "otlp.jsonl"),
        "--log-format",
        "openinference",
        "--out",
        str(tmp_path / "t"),
    )
    assert keyed == pytest.approx(
        ndcg(tmp_path / "t" / "fused.parquet", app / "qrels.parquet"), abs=1e-12
    )
