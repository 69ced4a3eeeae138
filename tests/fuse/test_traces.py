"""`--log-format openinference|otel-genai`: Phoenix-style span exports and OTLP JSON of GenAI
retrieval spans fuse and score to the results of the equivalent retrieval_log table.

The spans are built here from a slice of the SciFact log with the attribute names of the
maintained `openinference-semantic-conventions` package (never typed by hand): per query one
trace with a CHAIN root, one RETRIEVER span per source (documents with id, score, content and
metadata naming the parent), a RERANKER span and an LLM span that are not retrievals. The OTLP
exports use the names of `opentelemetry-semantic-conventions` (gen_ai.*), documents as a JSON
string for one source and in the structured form for the others, beside a chat span and a root
span (its parentSpanId empty, or absent).

spans.parquet is checked against the span ids the fixtures were built with.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner, Result
from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    RerankerAttributes,
    SpanAttributes,
)
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from duckscore.cli import cli

from ..helpers import SCIFACT

QUERIES = 12
KIND = f"attributes.{SpanAttributes.OPENINFERENCE_SPAN_KIND}"
DOCUMENTS = f"attributes.{SpanAttributes.RETRIEVAL_DOCUMENTS}"
QUERY = f"attributes.{SpanAttributes.INPUT_VALUE}"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    return scifact_slice()


def scifact_slice() -> pd.DataFrame:
    """The equivalent retrieval_log: what the spans say, no more (no granularity, block type or
    chunk count: spans do not carry them)."""
    path = SCIFACT / "retrieval_log.parquet"
    return duckdb.sql(
        f"SELECT query_id, source, item_id, parent_id, score, rank, query_text FROM '{path}' "
        f"WHERE query_id IN (SELECT DISTINCT query_id FROM '{path}' ORDER BY query_id "
        f"LIMIT {QUERIES}) ORDER BY query_id, source, rank"
    ).df()


def span(
    trace: str, span_id: str, name: str, kind: OpenInferenceSpanKindValues, **attributes: Any
) -> dict[str, Any]:
    return {"context.trace_id": trace, "context.span_id": span_id, "parent_id": f"{trace}-root",
            "name": name, KIND: kind.value, **attributes}  # fmt: skip


def spans_of(
    log: pd.DataFrame, with_scores: bool = True, metadata: tuple[str, ...] = ()
) -> pd.DataFrame:
    """The log as OpenInference spans; `metadata`: columns of the log the documents' metadata
    carries besides parent_id."""
    rows: list[dict[str, Any]] = []
    for query_id, hits in log.groupby("query_id", sort=True):
        trace = f"trace-{query_id}"
        text = hits["query_text"].iloc[0]
        root = span(
            trace, f"{trace}-root", "rag", OpenInferenceSpanKindValues.CHAIN, **{QUERY: text}
        )
        rows.append(root | {"parent_id": None})
        for source, listed in hits.groupby("source", sort=True):
            documents = [
                {DocumentAttributes.DOCUMENT_ID: hit.item_id,
                 **({DocumentAttributes.DOCUMENT_SCORE: hit.score} if with_scores else {}),
                 DocumentAttributes.DOCUMENT_CONTENT: f"passage {hit.item_id}",
                 DocumentAttributes.DOCUMENT_METADATA: json.dumps(
                     {"parent_id": hit.parent_id, **{k: getattr(hit, k) for k in metadata}})}
                for hit in listed.sort_values("rank").itertuples()
            ]  # fmt: skip
            rows.append(span(trace, f"{trace}-{source}", source, OpenInferenceSpanKindValues.RETRIEVER,
                             **{QUERY: text, DOCUMENTS: documents}))  # fmt: skip
        rows.append(span(trace, f"{trace}-rerank", "rerank", OpenInferenceSpanKindValues.RERANKER,
                         **{f"attributes.{RerankerAttributes.RERANKER_MODEL_NAME}": "bge-reranker"}))  # fmt: skip
        rows.append(span(trace, f"{trace}-llm", "answer", OpenInferenceSpanKindValues.LLM))
    return pd.DataFrame(rows)


OUTPUTS = ("parent_features.parquet", "parents.parquet", "queries.parquet")


def as_traces(log: pd.DataFrame) -> pd.DataFrame:
    """The log as the spans describe it: a trace per query."""
    return log.assign(query_id="trace-" + log["query_id"])


def runs_agree(tmp_path: Path, spans: Path, log_format: str, names: tuple[str, ...]) -> Path:
    """`duckscore run` on the span export (read as `log_format`) and on tmp_path/log.parquet, the
    equivalent log: each named output equal row for row, both ways. The span run's folder."""
    from_spans, from_log = tmp_path / "from_spans", tmp_path / "from_log"
    for given, extra, out in ((spans, ["--log-format", log_format], from_spans),
                              (tmp_path / "log.parquet", [], from_log)):  # fmt: skip
        done = invoke("run", "--log", str(given), *extra, "--out", str(out))
        assert done.exit_code == 0, done.stderr
    con = duckdb.connect()
    for name in names:
        a, b = f"FROM '{from_spans / name}'", f"FROM '{from_log / name}'"
        for left, right in ((a, b), (b, a)):
            assert con.execute(f"SELECT count(*) FROM ({left} EXCEPT ALL {right})").fetchall() == [
                (0,)
            ], name
    return from_spans


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_spans_run_as_the_equivalent_log(log: pd.DataFrame, suffix: str, tmp_path: Path) -> None:
    spans = spans_of(log)
    path = tmp_path / f"spans.{suffix}"
    if suffix == "parquet":
        spans.to_parquet(path, index=False)
    else:  # by hand: pandas' JSON writer rounds floats to 10 digits
        records = [{k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}
                   for row in spans.to_dict("records")]  # fmt: skip
        path.write_text("".join(json.dumps(row) + "\n" for row in records))
    as_traces(log).to_parquet(tmp_path / "log.parquet", index=False)
    runs_agree(tmp_path, path, "openinference", OUTPUTS)
    con = duckdb.connect()
    fused = "SELECT query_id, item_id, fused_score, rank FROM '{}'"
    assert con.execute(
        f"SELECT count(*) FROM ({fused.format(tmp_path / 'from_spans' / 'fused.parquet')} "
        f"EXCEPT ALL {fused.format(tmp_path / 'from_log' / 'fused.parquet')})"
    ).fetchall() == [(0,)]
    snippets = con.execute(
        f"SELECT count(*) FROM '{tmp_path / 'from_spans' / 'fused.parquet'}' "
        "WHERE best_provenance.snippet = 'passage ' || best_provenance.original_id"
    ).fetchall()
    assert snippets[0][0] > 0
    assert not (tmp_path / "from_log" / "spans.parquet").exists()  # a plain log: as before
    manifest = json.loads((tmp_path / "from_spans" / "manifest.json").read_text())
    assert manifest["inputs"]["log"]["format"] == "openinference"
    assert manifest["outputs"]["spans.parquet"] == {"rows": len(expected_spans(spans))}
    assert "fuse/openinference.sql" in manifest["sql"]  # the SQL that made the log is recorded
    assert manifest["inputs"]["spans"]["files"][0]["path"] == str(path)


def test_document_metadata_gives_granularity_block_type_and_chunk_counts(tmp_path: Path) -> None:
    """Documents whose metadata carries the log's granularity, block_type and total_chunks score
    as the log with those columns (seed 000's stability reads the chunk counts)."""
    path = SCIFACT / "retrieval_log.parquet"
    full = duckdb.sql(
        f"SELECT query_id, source, item_id, parent_id, score, rank, query_text, granularity, "
        f"block_type, CAST(total_chunks AS BIGINT) AS total_chunks FROM '{path}' "
        f"WHERE query_id IN (SELECT DISTINCT query_id FROM '{path}' ORDER BY query_id "
        f"LIMIT {QUERIES}) ORDER BY query_id, source, rank"
    ).df()
    spans_of(full, metadata=("granularity", "block_type", "total_chunks")).to_parquet(
        tmp_path / "spans.parquet", index=False
    )
    as_traces(full).to_parquet(tmp_path / "log.parquet", index=False)
    from_spans = runs_agree(tmp_path, tmp_path / "spans.parquet", "openinference", OUTPUTS)
    levels = duckdb.execute(
        "SELECT count(*) FILTER (WHERE confidence_level <> 'low') "
        f"FROM '{from_spans / 'queries.parquet'}'"
    ).fetchall()
    assert levels[0][0] > 0  # with chunk counts, not every span log scores low

    bad = spans_of(full.assign(total_chunks=full["total_chunks"].astype(str).where(
        full.index != 5, "many")), metadata=("total_chunks",))  # fmt: skip
    bad.to_parquet(tmp_path / "bad.parquet", index=False)
    refused = invoke("run", "--log", str(tmp_path / "bad.parquet"), "--log-format",
                     "openinference", "--out", str(tmp_path / "bad"))  # fmt: skip
    assert refused.exit_code == 2 and "total_chunks" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def expected_spans(spans: pd.DataFrame) -> list[tuple[Any, ...]]:
    """spans.parquet as the fixture was built: each RETRIEVER span (query_id, source, trace_id,
    span_id) with its trace's root, the span whose parent_id is null (None: no such span)."""
    records = spans.to_dict("records")
    roots = {r["context.trace_id"]: r["context.span_id"] for r in records
             if "parent_id" in r and pd.isna(r["parent_id"])}  # fmt: skip
    return sorted(
        (r["context.trace_id"], r["name"], r["context.trace_id"], r["context.span_id"],
         roots.get(r["context.trace_id"]))
        for r in records if r[KIND] == OpenInferenceSpanKindValues.RETRIEVER.value
    )  # fmt: skip


@pytest.mark.parametrize(
    ("change", "rooted"),
    [
        (lambda s: s, True),
        (lambda s: s.drop(columns=["parent_id"]), False),  # an export without parents
        (lambda s: s[s["parent_id"].notna()], False),  # the root spans left out of the export
    ],
    ids=["with-root", "no-parent-column", "root-not-exported"],
)
def test_spans_parquet_holds_the_ids_of_the_spans(
    log: pd.DataFrame, change: Any, rooted: bool, tmp_path: Path
) -> None:
    spans = change(spans_of(log))
    spans.to_parquet(tmp_path / "spans.parquet", index=False)
    done = invoke("fuse", "--log", str(tmp_path / "spans.parquet"), "--log-format", "openinference",
                  "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    written = duckdb.execute(f"FROM '{tmp_path / 'out' / 'spans.parquet'}'")
    assert [d[0] for d in written.description or ()] == [
        "query_id", "source", "trace_id", "span_id", "root_span_id"
    ]  # fmt: skip
    rows = written.fetchall()
    assert rows == expected_spans(spans)
    assert len(rows) == len(log.groupby(["query_id", "source"]))  # every retrieval span
    roots = {f"trace-{q}-root" for q in log["query_id"]} if rooted else {None}
    assert {row[4] for row in rows} == roots
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["outputs"]["spans.parquet"] == {"rows": len(rows)}
    assert "fuse/spans.sql" in manifest["sql"]
    assert (tmp_path / "out" / "sql" / "fuse_spans.sql").is_file()


def test_documents_without_scores_rank_by_their_position(log: pd.DataFrame, tmp_path: Path) -> None:
    spans_of(log, with_scores=False).to_parquet(tmp_path / "spans.parquet", index=False)
    as_traces(log).assign(score=-log["rank"].astype(float)).to_parquet(
        tmp_path / "log.parquet", index=False
    )
    for given, extra, out in ((tmp_path / "spans.parquet", ["--log-format", "openinference"], "a"),
                              (tmp_path / "log.parquet", [], "b")):  # fmt: skip
        assert (
            invoke("fuse", "--log", str(given), *extra, "--out", str(tmp_path / out)).exit_code == 0
        )
    read = "SELECT query_id, item_id, fused_score, rank FROM '{}'"
    a, b = (read.format(tmp_path / side / "fused.parquet") for side in "ab")
    assert duckdb.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b})").fetchall() == [(0,)]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.drop(columns=[KIND]), f"missing column '{KIND}'"),
        (lambda s: s.drop(columns=[DOCUMENTS]),  # no retrieval returned a document
         "no retrieval span returned a document (36 retrieval spans in 12 traces): nothing to fuse"),
        (lambda s: s.assign(**{"context.trace_id": s["context.trace_id"].where(s.index != 3)}),
         "row 4, context.span_id='trace-1-summary'): column 'context.trace_id' is null"),
    ],
)  # fmt: skip
def test_bad_spans_are_one_line(
    log: pd.DataFrame, change: Any, message: str, tmp_path: Path
) -> None:
    change(spans_of(log)).to_parquet(tmp_path / "spans.parquet", index=False)
    done = invoke("fuse", "--log", str(tmp_path / "spans.parquet"), "--log-format", "openinference",
                  "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


# -- OTLP JSON of the OpenTelemetry GenAI conventions ------------------------------------------


def any_value(value: Any) -> dict[str, Any]:
    """An OTLP AnyValue in its JSON encoding (ints as strings, as OTLP JSON writes them)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": value}


def otlp_span(trace: str, span_id: str, name: str, attributes: dict[str, Any]) -> dict[str, Any]:
    return {"traceId": trace, "spanId": span_id, "parentSpanId": f"{trace}-root", "name": name,
            "kind": 3, "startTimeUnixNano": "1764000000000000000", "endTimeUnixNano": "1764000000100000000",
            "attributes": [{"key": k, "value": v if isinstance(v, dict) else any_value(v)}
                           for k, v in attributes.items()]}  # fmt: skip


def otlp_export(log: pd.DataFrame) -> str:
    """One export request per trace (a line each), as the collector's file exporter writes them;
    documents as a JSON string for one source and in the structured form for the others."""
    lines = []
    for query_id, hits in log.groupby("query_id", sort=True):
        trace = f"trace-{query_id}"
        root = otlp_span(trace, f"{trace}-root", "rag", {})
        if len(lines) % 2:  # a root's parentSpanId: empty, or absent
            del root["parentSpanId"]
        else:
            root["parentSpanId"] = ""
        spans = [root, otlp_span(trace, f"{trace}-chat", "chat gpt", {
            gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.CHAT.value})]  # fmt: skip
        for source, listed in hits.groupby("source", sort=True):
            documents = [
                {"id": hit.item_id, "score": hit.score, "parent_id": hit.parent_id}
                for hit in listed.sort_values("rank").itertuples()
            ]
            if source == "sparse":
                encoded: Any = json.dumps(documents)
            else:
                encoded = {"arrayValue": {"values": [
                    {"kvlistValue": {"values": [{"key": k, "value": any_value(v)} for k, v in d.items()]}}
                    for d in documents]}}  # fmt: skip
            spans.append(otlp_span(trace, f"{trace}-{source}", f"retrieval {source}", {
                gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.RETRIEVAL.value,
                gen_ai.GEN_AI_DATA_SOURCE_ID: source,
                gen_ai.GEN_AI_RETRIEVAL_QUERY_TEXT: hits["query_text"].iloc[0],
                gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS: encoded}))  # fmt: skip
        request = {"resourceSpans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "rag"}}]},
            "scopeSpans": [{"scope": {"name": "rag.retrieval"}, "spans": spans}]}]}  # fmt: skip
        lines.append(json.dumps(request))
    return "\n".join(lines) + "\n"


def test_otel_genai_spans_run_as_the_equivalent_log(log: pd.DataFrame, tmp_path: Path) -> None:
    (tmp_path / "traces.jsonl").write_text(otlp_export(log))
    as_traces(log).to_parquet(tmp_path / "log.parquet", index=False)
    runs_agree(tmp_path, tmp_path / "traces.jsonl", "otel-genai", ("fused.parquet", *OUTPUTS))


def expected_otlp_spans(export: str) -> list[tuple[Any, ...]]:
    """spans.parquet as the export was built: each retrieval span with its trace's root (the
    span whose parentSpanId is empty or absent)."""
    spans = [span for line in export.splitlines() for resource in json.loads(line)["resourceSpans"]
             for scope in resource["scopeSpans"] for span in scope["spans"]]  # fmt: skip
    roots = {s["traceId"]: s["spanId"] for s in spans if not s.get("parentSpanId")}
    rows = []
    for s in spans:
        attributes = {a["key"]: a["value"].get("stringValue") for a in s["attributes"]}
        if attributes.get(gen_ai.GEN_AI_OPERATION_NAME) == "retrieval":
            source = attributes[gen_ai.GEN_AI_DATA_SOURCE_ID]
            rows.append((s["traceId"], source, s["traceId"], s["spanId"], roots.get(s["traceId"])))
    return sorted(rows)


def test_otel_genai_spans_parquet_finds_the_root(log: pd.DataFrame, tmp_path: Path) -> None:
    export = otlp_export(log)
    (tmp_path / "traces.jsonl").write_text(export)
    done = invoke("run", "--log", str(tmp_path / "traces.jsonl"), "--log-format", "otel-genai",
                  "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    rows = duckdb.execute(f"FROM '{tmp_path / 'out' / 'spans.parquet'}'").fetchall()
    assert rows == expected_otlp_spans(export)
    assert {row[4] for row in rows} == {f"trace-{q}-root" for q in log["query_id"]}


def test_a_file_that_is_not_otlp_json_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "traces.jsonl").write_text("not json\n")
    done = invoke("fuse", "--log", str(tmp_path / "traces.jsonl"), "--log-format", "otel-genai",
                  "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert "traces.jsonl): not OTLP JSON (" in done.stderr
