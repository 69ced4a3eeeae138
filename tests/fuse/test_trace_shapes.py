"""Trace shapes that real instrumentations produce (issue 35 §2), for `--log-format
openinference|otel-genai`:

- documents without the optional attributes of the OpenInference conventions (document.metadata,
  document.score, document.content; spans without input.value), from Parquet and JSON Lines,
  and metadata given in several forms in one export;
- a retriever run more than once in a trace (a multi-query retriever): one list per (trace,
  retriever), each document at its best position;
- retrievals that returned nothing: the traces are queries without candidates, an export with
  no document at all is one line;
- documents without a score beside scored ones: a warning;
- documents that cannot be read: one line naming the file, the span and the attribute.

The spans are built by hand with the attribute names of `openinference-semantic-conventions` and
`opentelemetry-semantic-conventions`; each run is compared with the retrieval_log table the
spans stand for, written out row by row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result
from openinference.semconv.trace import DocumentAttributes, OpenInferenceSpanKindValues
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

from duckscore.cli import cli

from .test_traces import DOCUMENTS, KIND, OUTPUTS, QUERY, as_traces, invoke, runs_agree

ID = DocumentAttributes.DOCUMENT_ID
SCORE = DocumentAttributes.DOCUMENT_SCORE
CONTENT = DocumentAttributes.DOCUMENT_CONTENT
METADATA = DocumentAttributes.DOCUMENT_METADATA
RETRIEVER = OpenInferenceSpanKindValues.RETRIEVER.value
LOG_COLUMNS = ["query_id", "source", "item_id", "parent_id", "score", "rank", "query_text"]


def retriever(
    trace: str, span_id: str, name: str, documents: Any, query: str = "q"
) -> dict[str, Any]:
    """An OpenInference RETRIEVER span as Phoenix exports it (documents None: no attribute)."""
    span = {"context.trace_id": trace, "context.span_id": span_id, "name": name,
            "parent_id": f"{trace}-root", KIND: RETRIEVER, QUERY: query}  # fmt: skip
    return span if documents is None else span | {DOCUMENTS: documents}


def write(rows: list[dict[str, Any]], path: Path) -> Path:
    """The spans as Parquet (through pandas, as Phoenix's DataFrame is saved) or JSON Lines."""
    if path.suffix == ".parquet":
        pd.DataFrame(rows).to_parquet(path, index=False)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def run(*args: str) -> Result:
    """The CLI with its warnings (no progress lines)."""
    return CliRunner().invoke(cli, ["--no-progress", *args])


def one_line_error(done: Result) -> str:
    assert done.exit_code == 2, (done.exit_code, done.stderr, done.exception)
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr


# -- optional attributes -----------------------------------------------------------------------


def spans_without(log: pd.DataFrame, absent: set[str]) -> list[dict[str, Any]]:
    """The log as RETRIEVER spans whose documents carry only the attributes not `absent`
    (metadata, score, content; `input`: the spans have no input.value)."""
    rows = []
    for (query_id, source), hits in log.groupby(["query_id", "source"], sort=True):
        documents = []
        for hit in hits.sort_values("rank").itertuples():
            document: dict[str, Any] = {ID: hit.item_id}
            if "score" not in absent:
                document[SCORE] = hit.score
            if "content" not in absent:
                document[CONTENT] = f"passage {hit.item_id}"
            if "metadata" not in absent:
                document[METADATA] = json.dumps({"parent_id": hit.parent_id})
            documents.append(document)
        span = retriever(f"trace-{query_id}", f"trace-{query_id}-{source}", source, documents,
                         hits["query_text"].iloc[0])  # fmt: skip
        if "input" in absent:
            del span[QUERY]
        rows.append(span)
    return rows


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
@pytest.mark.parametrize(
    "absent",
    [{"metadata"}, {"metadata", "score"}, {"metadata", "content"},
     {"metadata", "score", "content", "input"}, {"score", "content", "input"}],
    ids=["no-metadata", "id-content", "id-score", "id-only", "id-metadata"],
)  # fmt: skip
def test_documents_without_optional_attributes_score_as_the_log_they_stand_for(
    log: pd.DataFrame, suffix: str, absent: set[str], tmp_path: Path
) -> None:
    """Without metadata a document is its own parent; without a score it ranks by its position
    (score -rank); without input.value the log has no query text."""
    spans = write(spans_without(log, absent), tmp_path / f"spans.{suffix}")
    expected = as_traces(log)
    if "metadata" in absent:
        expected = expected.assign(parent_id=expected["item_id"])
    if "score" in absent:
        expected = expected.assign(score=-expected["rank"].astype(float))
    if "input" in absent:
        expected = expected.drop(columns=["query_text"])
    if "content" not in absent:
        expected = expected.assign(snippet="passage " + expected["item_id"])
    expected.to_parquet(tmp_path / "log.parquet", index=False)
    runs_agree(tmp_path, spans, "openinference", ("fused.parquet", *OUTPUTS))


def test_metadata_in_several_forms_in_one_export(log: pd.DataFrame, tmp_path: Path) -> None:
    """JSON Lines whose documents give their metadata as a JSON string (the specification's
    form), as an object, as null or not at all: each document read as it is given."""
    rows, parents = spans_without(log, set()), []
    for span in rows:
        for n, document in enumerate(span[DOCUMENTS]):
            form = n % 4
            if form == 1:
                document[METADATA] = json.loads(document[METADATA]) | {"page": 3}
            elif form == 2:
                document[METADATA] = None
            elif form == 3:
                del document[METADATA]
            parents.append(
                (span["context.trace_id"], span["name"], document[ID], form in (0, 1))
            )  # fmt: skip
    spans = write(rows, tmp_path / "spans.jsonl")
    kept = pd.DataFrame(parents, columns=["query_id", "source", "item_id", "kept"])
    expected = as_traces(log).merge(kept, on=["query_id", "source", "item_id"])
    expected["parent_id"] = expected["parent_id"].where(expected["kept"], expected["item_id"])
    expected["snippet"] = "passage " + expected["item_id"]
    expected.drop(columns=["kept"]).to_parquet(tmp_path / "log.parquet", index=False)
    runs_agree(tmp_path, spans, "openinference", ("fused.parquet", *OUTPUTS))


def documents_as(shape: str, documents: list[dict[str, Any]]) -> Any:
    """A span's documents in another column shape that exports take (sql/fuse/openinference.sql's
    `documents`): the list as JSON text (once, or that text again as a JSON string), a list of
    JSON texts, a list of maps of texts, or structs whose metadata is an object."""
    if shape == "json-text":
        return json.dumps(documents)
    if shape == "json-text-twice":
        return json.dumps(json.dumps(documents))
    if shape == "json-list":
        return [json.dumps(document) for document in documents]
    if shape == "map":
        return [{key: str(value) for key, value in document.items()} for document in documents]
    return [document | {METADATA: json.loads(document[METADATA])} for document in documents]


MAPS = pa.list_(pa.map_(pa.string(), pa.string()))


@pytest.mark.parametrize(
    "shape", ["json-text", "json-text-twice", "json-list", "map", "metadata-object"]
)
def test_documents_in_each_column_shape_score_as_the_log_they_stand_for(
    log: pd.DataFrame, shape: str, tmp_path: Path
) -> None:
    """The documents column as JSON text, a list of JSON texts, a list of maps (a score given
    as text is read as the number it spells) or structs with an object for metadata reads as the
    list of structs does."""
    rows = spans_without(log, set())
    for span in rows:
        span[DOCUMENTS] = documents_as(shape, span[DOCUMENTS])
    table = pa.Table.from_pylist(rows)
    if shape == "map":
        table = table.set_column(
            table.schema.get_field_index(DOCUMENTS), DOCUMENTS,
            pa.array([span[DOCUMENTS] for span in rows], type=MAPS))  # fmt: skip
    pq.write_table(table, tmp_path / "spans.parquet")
    expected = as_traces(log).assign(snippet="passage " + log["item_id"])
    expected.to_parquet(tmp_path / "log.parquet", index=False)
    runs_agree(tmp_path, tmp_path / "spans.parquet", "openinference", ("fused.parquet", *OUTPUTS))


def test_single_precision_scores_read_as_a_log_of_them_does(
    log: pd.DataFrame, tmp_path: Path
) -> None:
    """A float32 score is the double it stands for exactly (0.1f is 0.100000001490116…), as in a
    retrieval_log whose score column is float32, not the double its shortest text spells."""
    rows = spans_without(log, set())
    table = pa.Table.from_pylist(rows)
    documents = table.schema.field(DOCUMENTS).type
    single = pa.list_(pa.struct([f if f.name != SCORE else pa.field(SCORE, pa.float32())
                                 for f in documents.value_type]))  # fmt: skip
    index = table.schema.get_field_index(DOCUMENTS)
    table = table.set_column(index, DOCUMENTS, table.column(DOCUMENTS).cast(single))
    pq.write_table(table, tmp_path / "spans.parquet")
    expected = as_traces(log).assign(
        snippet="passage " + log["item_id"], score=log["score"].astype("float32")
    )
    expected.to_parquet(tmp_path / "log.parquet", index=False)
    runs_agree(tmp_path, tmp_path / "spans.parquet", "openinference", ("fused.parquet", *OUTPUTS))


@pytest.mark.parametrize("log_format", ["openinference", "otel-genai"])
def test_the_query_analyzer_reads_the_spans_query_text(log_format: str, tmp_path: Path) -> None:
    """input.value (gen_ai.retrieval.query.text) is the log's query_text: a rule matching it
    boosts its source's weight for that trace only."""
    lists = {("t1", "bm25"): [("a", 1.0)], ("t2", "bm25"): [("b", 1.0)]}
    texts = {"t1": "does cancer spread", "t2": "other"}
    path = scored_export(log_format, lists, tmp_path / "spans")
    if log_format == "openinference":
        rows = [
            row | {QUERY: texts[row["context.trace_id"]]}
            for row in pd.read_parquet(path).to_dict("records")
        ]
        write(rows, path)
    else:
        request = json.loads(path.read_text())
        for span in request["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            for attribute in span["attributes"]:
                if attribute["key"] == gen_ai.GEN_AI_RETRIEVAL_QUERY_TEXT:
                    attribute["value"] = {"stringValue": texts[span["traceId"]]}
        path.write_text(json.dumps(request) + "\n")
    out = tmp_path / "out"
    done = invoke("fuse", "--log", str(path), "--log-format", log_format, "--out", str(out),
                  "--set-recipe", "query_analyzer.enabled=true",
                  "--set-recipe", 'query_analyzer.rules=[{match: "cancer", boost: {bm25: 2.0}}]')  # fmt: skip
    assert done.exit_code == 0, done.stderr
    fused = pd.read_parquet(out / "fused.parquet")
    weights = {row.query_id: [c["weight"] for c in row.contributions] for row in fused.itertuples()}
    assert weights == {"t1": [2.0], "t2": [1.0]}


# -- a retriever run more than once in a trace -------------------------------------------------

# (trace, span, retriever, query) -> the documents (id, score or None) in the span's order
REPEATED: dict[tuple[str, str, str, str], list[tuple[str, float | None]]] = {
    # a multi-query retriever: its two sub-queries' spans, the second finding b first
    ("t1", "s1", "dense", "q"): [("a", 0.9), ("b", 0.8), ("c", 0.7)],
    ("t1", "s2", "dense", "q rewritten"): [("b", 0.95), ("d", 0.6)],
    # one span listing a document twice
    ("t1", "s3", "bm25", "q"): [("c", 12.0), ("a", 7.0), ("c", 5.0)],
    # no scores: ties of position go by the spans' order in the export
    ("t2", "s4", "dense", "r"): [("a", None), ("b", None)],
    ("t2", "s5", "dense", "r rewritten"): [("c", None), ("d", None)],
    # a tie of position between a document without a score and one with: the scored one first
    ("t3", "s6", "dense", "u"): [("e", None)],
    ("t3", "s7", "dense", "u rewritten"): [("f", 0.5)],
}
# the retrieval_log they stand for: each document at its best position, then higher score first
MERGED = [
    ("t1", "dense", "b", 0.95, 1, "q rewritten"),
    ("t1", "dense", "a", 0.9, 2, "q"),
    ("t1", "dense", "d", 0.6, 3, "q rewritten"),
    ("t1", "dense", "c", 0.7, 4, "q"),
    ("t1", "bm25", "c", 12.0, 1, "q"),
    ("t1", "bm25", "a", 7.0, 2, "q"),
    ("t2", "dense", "a", -1.0, 1, "r"),
    ("t2", "dense", "c", -2.0, 2, "r rewritten"),
    ("t2", "dense", "b", -3.0, 3, "r"),
    ("t2", "dense", "d", -4.0, 4, "r rewritten"),
    ("t3", "dense", "f", 0.5, 1, "u rewritten"),
    ("t3", "dense", "e", -2.0, 2, "u"),
]


def repeated_openinference(path: Path) -> Path:
    rows = [
        retriever(trace, span_id, name, [
            {ID: doc, METADATA: json.dumps({"parent_id": doc})} | ({} if score is None else {SCORE: score})
            for doc, score in documents], query)
        for (trace, span_id, name, query), documents in REPEATED.items()
    ]  # fmt: skip
    return write(rows, path)


def otlp_attribute(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value}}


def otlp_retrieval(
    trace: str, span_id: str, source: str, documents: Any, query: str = "q"
) -> dict[str, Any]:
    """An OTLP JSON span of a GenAI retrieval (documents None: no attribute; a str: the JSON
    string form; else the AnyValue as given)."""
    attributes = [
        otlp_attribute(gen_ai.GEN_AI_OPERATION_NAME, gen_ai.GenAiOperationNameValues.RETRIEVAL.value),
        otlp_attribute(gen_ai.GEN_AI_DATA_SOURCE_ID, source),
        otlp_attribute(gen_ai.GEN_AI_RETRIEVAL_QUERY_TEXT, query),
    ]  # fmt: skip
    if isinstance(documents, str):
        attributes.append(otlp_attribute(gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS, documents))
    elif documents is not None:
        attributes.append({"key": gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS, "value": documents})
    return {"traceId": trace, "spanId": span_id, "parentSpanId": f"{trace}-root",
            "name": f"retrieval {source}", "attributes": attributes}  # fmt: skip


def otlp_request(spans: list[dict[str, Any]]) -> str:
    """One export request (a line of the collector's file exporter) holding the spans."""
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n"


def write_otlp(spans: list[dict[str, Any]], path: Path) -> Path:
    path.write_text(otlp_request(spans))
    return path


def repeated_otlp(path: Path) -> Path:
    spans = [
        otlp_retrieval(trace, span_id, name, json.dumps([
            {"id": doc} | ({} if score is None else {"score": score}) for doc, score in documents]), query)
        for (trace, span_id, name, query), documents in REPEATED.items()
    ]  # fmt: skip
    return write_otlp(spans, path)


@pytest.mark.parametrize(
    ("log_format", "build"),
    [("openinference", lambda tmp: repeated_openinference(tmp / "spans.parquet")),
     ("openinference", lambda tmp: repeated_openinference(tmp / "spans.jsonl")),
     ("otel-genai", lambda tmp: repeated_otlp(tmp / "traces.jsonl"))],
    ids=["openinference-parquet", "openinference-jsonl", "otel-genai"],
)  # fmt: skip
def test_a_retriever_run_more_than_once_in_a_trace_gives_one_list(
    log_format: str, build: Callable[[Path], Path], tmp_path: Path
) -> None:
    spans = build(tmp_path)
    merged = pd.DataFrame(
        MERGED, columns=["query_id", "source", "item_id", "score", "rank", "query_text"]
    )
    merged.assign(parent_id=merged["item_id"])[LOG_COLUMNS].to_parquet(
        tmp_path / "log.parquet", index=False
    )
    folder = runs_agree(tmp_path, spans, log_format, ("fused.parquet", *OUTPUTS))
    spans_written = duckdb.execute(f"SELECT span_id FROM '{folder / 'spans.parquet'}'").fetchall()
    # every span, by query, source (t1's bm25 before its dense), then span id
    assert [s for (s,) in spans_written] == ["s3", "s1", "s2", "s4", "s5", "s6", "s7"]


# -- nested retrievers ---------------------------------------------------------------------------

# (trace, span, parent, kind, name, documents): t1's fusion retriever holds its children's lists
# fused, bm25 below it through a planning span, dense directly; t2 has one retriever, not nested
# (only a span of another kind below it); in t3 two retrievers are each other's parent (a
# malformed export): both are left out; t4's fusion retriever has one below it, only through a
# span between
NESTED = [
    ("t1", "t1-root", None, "CHAIN", "answer", None),
    ("t1", "f", "t1-root", "RETRIEVER", "fusion", [("a", 0.9), ("c", 0.8), ("b", 0.7)]),
    ("t1", "m", "f", "CHAIN", "plan", None),
    ("t1", "s1", "m", "RETRIEVER", "bm25", [("a", 3.0), ("b", 2.0)]),
    ("t1", "s2", "f", "RETRIEVER", "dense", [("c", 0.9), ("a", 0.5)]),
    ("t2", "s3", "t2-root", "RETRIEVER", "bm25", [("d", 1.0), ("e", 0.5)]),
    ("t2", "e", "s3", "EMBEDDING", "embed", None),
    ("t3", "x", "y", "RETRIEVER", "bm25", [("g", 1.0)]),
    ("t3", "y", "x", "RETRIEVER", "dense", [("g", 1.0)]),
    ("t4", "g", "t4-root", "RETRIEVER", "fusion", [("h", 1.0), ("i", 0.5)]),
    ("t4", "n", "g", "CHAIN", "plan", None),
    ("t4", "s4", "n", "RETRIEVER", "bm25", [("i", 2.0), ("h", 1.0)]),
]  # fmt: skip


def nested_export(log_format: str, path: Path, parents: bool = True) -> Path:
    """NESTED as OpenInference spans (`parents` false: without the parent column) or OTLP."""
    if log_format == "otel-genai":
        spans = [
            (otlp_retrieval(trace, span_id, name, json.dumps(
                [{"id": doc, "score": score} for doc, score in documents]))
             if kind == "RETRIEVER" else {"traceId": trace, "spanId": span_id, "name": name})
            | {"parentSpanId": parent or ""}
            for trace, span_id, parent, kind, name, documents in NESTED
        ]  # fmt: skip
        return write_otlp(spans, path)
    rows = [
        {"context.trace_id": trace, "context.span_id": span_id, "name": name, KIND: kind,
         QUERY: "q", **({"parent_id": parent} if parents else {}),
         **({} if documents is None else {DOCUMENTS: [{ID: doc, SCORE: score} for doc, score in documents]})}
        for trace, span_id, parent, kind, name, documents in NESTED
    ]  # fmt: skip
    return write(rows, path)


@pytest.mark.parametrize(
    ("log_format", "name"),
    [("openinference", "spans.parquet"), ("openinference", "spans.jsonl"),
     ("otel-genai", "traces.jsonl")],
)  # fmt: skip
def test_a_retriever_above_other_retrievers_is_left_out(
    log_format: str, name: str, tmp_path: Path
) -> None:
    """Its documents are its children's, already fused: read as one more source, they would
    count twice. The children are fused as the log of them alone is, and the run says so."""
    spans = nested_export(log_format, tmp_path / name)
    rows = [(trace, source, doc, doc, score, rank, "q")
            for trace, span_id, _, kind, source, documents in NESTED
            if span_id in ("s1", "s2", "s3", "s4") for rank, (doc, score) in enumerate(documents, 1)]  # fmt: skip
    pd.DataFrame(rows, columns=LOG_COLUMNS).to_parquet(tmp_path / "log.parquet", index=False)
    folder = runs_agree(tmp_path, spans, log_format, ("fused.parquet", *OUTPUTS))
    written = duckdb.execute(f"SELECT span_id FROM '{folder / 'spans.parquet'}'").fetchall()
    assert sorted(s for (s,) in written) == ["s1", "s2", "s3", "s4"]
    done = run(
        "fuse", "--log", str(spans), "--log-format", log_format, "--out", str(tmp_path / "w")
    )
    assert done.exit_code == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"duckscore: warning: --log ({spans}): 4 retrieval spans with retrieval spans below them "
        "(nested retrievers) are left out: their documents are their children's, already fused, "
        "and the children are fused instead (docs/traces.md#nested-retrievers)"
    ]


def test_without_the_parent_column_every_retriever_is_a_source(tmp_path: Path) -> None:
    """An OpenInference export without `parent_id` cannot tell a nested retriever: each is read."""
    spans = nested_export("openinference", tmp_path / "spans.parquet", parents=False)
    out = tmp_path / "out"
    done = run("fuse", "--log", str(spans), "--log-format", "openinference", "--out", str(out))
    assert done.exit_code == 0 and "nested" not in done.stderr, done.stderr
    fused = pd.read_parquet(out / "fused.parquet")
    sources = {c["source"] for cs in fused["contributions"] for c in cs}
    assert sources == {"bm25", "dense", "fusion"}
    assert sorted(fused["query_id"].unique()) == ["t1", "t2", "t3", "t4"]


@pytest.mark.parametrize("log_format", ["openinference", "otel-genai"])
def test_the_hits_kept_as_a_table_or_read_as_a_view_fuse_alike(
    log_format: str, tmp_path: Path
) -> None:
    """Without --memory-limit the readers' hits are computed once into a table; with one they
    stay a view (DuckDB does not evict a temp table): the outputs are the same."""
    spans = nested_export(
        log_format,
        tmp_path / ("spans.parquet" if log_format == "openinference" else "traces.jsonl"),
    )
    outs = []
    for limit in ([], ["--memory-limit", "1GB"]):
        out = tmp_path / f"out{len(outs)}"
        done = run(
            "-q", "fuse", *limit, "--log", str(spans), "--log-format", log_format, "--out", str(out)
        )
        assert done.exit_code == 0, done.stderr
        outs.append(out)
    for name in ("fused.parquet", "parent_features.parquet", "spans.parquet"):
        first, second = (pd.read_parquet(out / name) for out in outs)
        pd.testing.assert_frame_equal(first, second)


def export_order_layouts(tmp: Path, log_format: str) -> dict[str, Path]:
    """Two retrieval spans of one source in one trace, `early` before `late` in the export, laid
    out so that each key of the export order (file, then request or row in it, then span in the
    request) is the one that decides, and the next key alone would put `late` first."""
    lists = {"s9": [("z", "z"), ("b", "from-early")], "s1": [("a", "a"), ("b", "from-late")]}
    if log_format == "otel-genai":
        early, late = (otlp_retrieval("t1", span, "bm25", json.dumps(
            [{"id": doc, "score": 0.5, "parent_id": parent} for doc, parent in lists[span]]))
            for span in ("s9", "s1"))  # fmt: skip
        other = {"traceId": "t1", "spanId": "s5", "name": "rag", "attributes": []}
        layouts = {
            "file": {"1.jsonl": [[other], [early]], "2.jsonl": [[late]]},  # late: request 1
            "request": {"1.jsonl": [[other, early], [late]]},  # late: span 1 of its request
            "span": {"1.jsonl": [[early, late]]},  # late: the smaller spanId
        }  # fmt: skip
        text = {name: {file: "".join(otlp_request(spans) for spans in requests)
                       for file, requests in files.items()} for name, files in layouts.items()}  # fmt: skip
    else:
        early, late = (retriever("t1", span, "bm25", [
            {ID: doc, SCORE: 0.5, METADATA: json.dumps({"parent_id": parent})}
            for doc, parent in lists[span]]) for span in ("s9", "s1"))  # fmt: skip
        other = {"context.trace_id": "t1", "context.span_id": "s5", "name": "rag", KIND: "CHAIN"}
        layouts = {
            "file": {"1.jsonl": [other, early], "2.jsonl": [late]},  # late: row 1
            "row": {"1.jsonl": [early, late]},  # late: the smaller span_id
        }  # fmt: skip
        text = {name: {file: "".join(json.dumps(row) + "\n" for row in rows)
                       for file, rows in files.items()} for name, files in layouts.items()}  # fmt: skip
    folders = {}
    for name, files in text.items():
        folder = tmp / name
        folder.mkdir()
        for file, content in files.items():
            (folder / file).write_text(content)
        folders[name] = folder
    return folders


@pytest.mark.parametrize(
    ("log_format", "layout"),
    [("otel-genai", "file"), ("otel-genai", "request"), ("otel-genai", "span"),
     ("openinference", "file"), ("openinference", "row")],
)  # fmt: skip
def test_ties_between_spans_of_one_list_go_by_export_order(
    log_format: str, layout: str, tmp_path: Path
) -> None:
    """z and a share position 1 and a score: z, from the earlier span, ranks first; b is at
    position 2 in both spans and keeps the parent the earlier span gives it (docs/traces.md: a
    document's best position, then the spans' order in the export). spans.parquet is ordered by
    query, source and span id, whatever the export's order."""
    folder = export_order_layouts(tmp_path, log_format)[layout]
    out = tmp_path / "out"
    done = invoke("fuse", "--log", str(folder), "--log-format", log_format, "--out", str(out))
    assert done.exit_code == 0, done.stderr
    fused = pd.read_parquet(out / "fused.parquet").sort_values("rank")
    assert list(zip(fused["item_id"], fused["rank"], strict=True)) == [
        ("z", 1), ("a", 2), ("from-early", 3)]  # fmt: skip
    spans = duckdb.execute(f"SELECT span_id FROM '{out / 'spans.parquet'}'").fetchall()
    assert spans == [("s1",), ("s9",)]


# -- retrievals that returned nothing ----------------------------------------------------------


def empty_exports(tmp: Path) -> list[tuple[str, Path]]:
    """Exports of two traces whose retrievals all returned nothing, in each shape it takes."""
    empty = [retriever("t1", "s1", "bm25", []), retriever("t2", "s2", "dense", [])]
    without = [retriever("t1", "s1", "bm25", None), retriever("t2", "s2", "dense", None)]
    return [
        ("openinference", write(empty, tmp / "empty.parquet")),  # documents "NULL"[]
        ("openinference", write(empty, tmp / "empty.jsonl")),  # documents JSON[]
        ("openinference", write(without, tmp / "without.parquet")),  # no column of documents
        ("otel-genai", write_otlp([otlp_retrieval("t1", "s1", "bm25", "[]"),
                                   otlp_retrieval("t2", "s2", "dense", {"arrayValue": {}})],
                                  tmp / "traces.jsonl")),
    ]  # fmt: skip


def test_an_export_whose_retrievals_all_returned_nothing_is_one_line(tmp_path: Path) -> None:
    for log_format, path in empty_exports(tmp_path):
        done = invoke("fuse", "--log", str(path), "--log-format", log_format,
                      "--out", str(tmp_path / "out"))  # fmt: skip
        message = one_line_error(done)
        assert (
            f"--log ({path}): no retrieval span returned a document (2 retrieval spans in 2 traces): nothing to fuse"
            in message
        )
        assert not (tmp_path / "out").exists()


def some_empty(tmp: Path) -> Path:
    """t1 retrieved documents; t2's retriever returned none; t3 has no retrieval (a chat)."""
    rows = [
        retriever("t1", "s1", "bm25", [{ID: "a", SCORE: 2.0, METADATA: json.dumps({"parent_id": "p"})}]),
        retriever("t2", "s2", "bm25", []),
        {"context.trace_id": "t3", "context.span_id": "s3", "name": "chat", "parent_id": None,
         KIND: OpenInferenceSpanKindValues.LLM.value},
    ]  # fmt: skip
    return write(rows, tmp / "spans.parquet")


def test_trace_queries_are_the_traces_with_a_retrieval_span(tmp_path: Path) -> None:
    """What `run` needs to give a trace whose retrievals returned nothing its decisions: the
    reader's table of queries (every trace with a retrieval span)."""
    from duckscore.core.session import Session
    from duckscore.fusion.traces import TraceLog, as_log, trace_queries

    log = TraceLog(str(some_empty(tmp_path)), "openinference")
    with Session() as session:
        assert trace_queries(session, "plain.parquet") is None  # not a trace log
        hits = as_log(session, log)
        queries = trace_queries(session, log)
        assert queries is not None and hits is not None
        assert queries.relation.fetchall() == [("t1",), ("t2",)]
        assert queries.files == session.inputs["spans"].files


def test_a_trace_whose_retrievals_returned_nothing_gets_the_empty_result_decisions(
    tmp_path: Path,
) -> None:
    """With its traces given as `--queries`, the trace whose retriever returned nothing is a
    query without candidates: low, web fallback, as `run --queries` decides for any log."""
    spans = some_empty(tmp_path)
    pd.DataFrame({"query_id": ["t1", "t2"]}).to_parquet(tmp_path / "traces.parquet", index=False)
    done = invoke("run", "--log", str(spans), "--log-format", "openinference",
                  "--queries", str(tmp_path / "traces.parquet"), "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    decided = duckdb.execute(
        "SELECT query_id, best_parent_id, confidence_level, web_fallback "
        f"FROM '{tmp_path / 'out' / 'queries.parquet'}' ORDER BY query_id"
    ).fetchall()
    assert decided == [("t1", "p", "low", True), ("t2", None, "low", True)]


def test_run_gives_every_trace_with_a_retrieval_span_its_decisions(tmp_path: Path) -> None:
    done = invoke("run", "--log", str(some_empty(tmp_path)), "--log-format", "openinference",
                  "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    decided = duckdb.execute(
        f"SELECT query_id, web_fallback FROM '{tmp_path / 'out' / 'queries.parquet'}' ORDER BY query_id"
    ).fetchall()
    assert decided == [("t1", True), ("t2", True)]


def test_run_decides_an_export_whose_retrievals_all_returned_nothing(tmp_path: Path) -> None:
    """Asked for (--allow-empty: without it, refused, test_traces_real_shapes.py)."""
    for log_format, path in empty_exports(tmp_path):
        out = tmp_path / f"out-{path.stem}-{path.suffix[1:]}"
        done = invoke("run", "--log", str(path), "--log-format", log_format, "--allow-empty",
                      "--out", str(out))  # fmt: skip
        assert done.exit_code == 0, done.stderr
        decided = duckdb.execute(
            f"SELECT query_id, best_parent_id, web_fallback FROM '{out / 'queries.parquet'}' ORDER BY query_id"
        ).fetchall()
        assert decided == [("t1", None, True), ("t2", None, True)]
        for name in ("fused.parquet", "parent_features.parquet", "parents.parquet"):
            assert duckdb.execute(f"SELECT count(*) FROM '{out / name}'").fetchall() == [(0,)]
        assert len((out / "contract.jsonl").read_text().splitlines()) == 2
        planned = json.loads((out / "manifest.json").read_text())["sources"]
        assert sorted(planned) == ["bm25", "dense"], planned


def test_an_export_without_a_retrieval_span_is_refused_by_run_too(tmp_path: Path) -> None:
    chat = retriever("t1", "s1", "bm25", [])
    chat["attributes.openinference.span.kind"] = "LLM"
    path = write([chat], tmp_path / "chat.parquet")
    done = invoke("run", "--log", str(path), "--log-format", "openinference",
                  "--out", str(tmp_path / "out"))  # fmt: skip
    message = one_line_error(done)
    assert "no retrieval span returned a document (0 retrieval spans in 0 traces)" in message
    assert not (tmp_path / "out").exists()


# -- documents without a score beside scored ones ----------------------------------------------


@pytest.mark.parametrize("log_format", ["openinference", "otel-genai"])
def test_documents_without_a_score_beside_scored_ones_are_a_warning(
    log_format: str, tmp_path: Path
) -> None:
    """Each is given the score -rank (below every score >= 0 of its list), and the run says so
    in one line, counting the lists that mix both; a list without any score (ranks only) or
    with every score is no warning, and an export without such documents warns of nothing."""
    lists = {("t1", "bm25"): [("a", 3.0), ("b", None), ("c", 1.0)],
             ("t1", "dense"): [("c", 0.9), ("a", None)],
             ("t2", "bm25"): [("d", None), ("e", None)],
             ("t2", "dense"): [("d", 0.5)]}  # fmt: skip
    attribute = "document.score" if log_format == "openinference" else "score"
    spans = scored_export(log_format, lists, tmp_path / "mixed")
    rows = [(trace, name, doc, doc, -float(rank) if s is None else s, rank, "q")
            for (trace, name), docs in lists.items() for rank, (doc, s) in enumerate(docs, 1)]  # fmt: skip
    pd.DataFrame(rows, columns=LOG_COLUMNS).to_parquet(tmp_path / "log.parquet", index=False)
    runs_agree(tmp_path, spans, log_format, ("fused.parquet", *OUTPUTS))
    done = run(
        "fuse", "--log", str(spans), "--log-format", log_format, "--out", str(tmp_path / "warned")
    )
    assert done.exit_code == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("duckscore: warning:")]
    assert warnings == [
        f"duckscore: warning: --log ({spans}): 2 documents in 2 lists have no {attribute} beside "
        "documents with one: each is given the score -rank (as in a rank-only log), below every "
        "document of its list scored above that, all of them when scores are >= 0 "
        "(docs/traces.md#documents-without-a-score)"
    ]
    scored_only = scored_export(log_format, {("t2", "dense"): [("d", 0.5)]}, tmp_path / "scored")
    out = str(tmp_path / "quiet")
    done = run("fuse", "--log", str(scored_only), "--log-format", log_format, "--out", out)
    assert done.exit_code == 0 and "warning" not in done.stderr, done.stderr


def scored_export(
    log_format: str, lists: dict[tuple[str, str], list[tuple[str, float | None]]], folder: Path
) -> Path:
    """One retrieval span per (trace, source) list of (document, score or None)."""
    folder.mkdir()
    if log_format == "openinference":
        return write([retriever(trace, f"{trace}-{name}", name,
                                [{ID: doc} | ({} if s is None else {SCORE: s}) for doc, s in docs])
                      for (trace, name), docs in lists.items()], folder / "spans.parquet")  # fmt: skip
    return write_otlp([otlp_retrieval(trace, f"{trace}-{name}", name, json.dumps(
        [{"id": doc} | ({} if s is None else {"score": s}) for doc, s in docs]))
        for (trace, name), docs in lists.items()], folder / "traces.jsonl")  # fmt: skip


# -- documents that cannot be read -------------------------------------------------------------


def one_span(documents: Any, suffix: str = "parquet", name: Any = "bm25") -> Callable[[Path], Path]:
    return lambda tmp: write([retriever("t1", "s1", name, documents)], tmp / f"spans.{suffix}")


def duckdb_span(documents: str) -> Callable[[Path], Path]:
    """One RETRIEVER span written by DuckDB, its documents the SQL expression `documents`."""

    def build(tmp: Path) -> Path:
        path = tmp / "spans.parquet"
        duckdb.execute(
            f"COPY (SELECT 't1' AS \"context.trace_id\", 's1' AS \"context.span_id\", 'bm25' AS name, "
            f"'{RETRIEVER}' AS \"{KIND}\", {documents} AS \"{DOCUMENTS}\") TO '{path}'"
        )
        return path

    return build


def one_otlp_span(documents: Any) -> Callable[[Path], Path]:
    return lambda tmp: write_otlp(
        [otlp_retrieval("t1", "s1", "bm25", documents)], tmp / "traces.jsonl"
    )


def kv_documents(*documents: list[tuple[str | None, dict[str, Any] | None]]) -> dict[str, Any]:
    """The structured form: each document a kvlistValue of (key, AnyValue) entries (None: the
    entry has no key, or no value)."""
    return {"arrayValue": {"values": [
        {"kvlistValue": {"values": [
            ({} if key is None else {"key": key}) | ({} if value is None else {"value": value})
            for key, value in entries]}}
        for entries in documents]}}  # fmt: skip


GOOD = {ID: "a", SCORE: 1.0, METADATA: "{}"}
BAD_SPANS = [
    ("openinference", one_span([GOOD | {SCORE: "0.5"}, GOOD | {ID: "b", SCORE: "high"}]),
     "row 1, span_id='s1'): retrieval.documents[2].document.score is not a finite number: 'high'"),
    ("openinference", one_span([GOOD, GOOD | {ID: "b", SCORE: "high"}], "jsonl"),
     "row 1, span_id='s1'): retrieval.documents[2].document.score is not a finite number: 'high'"),
    # a score beyond the log's range (MAX_SCORE), either sign, is the span's fault too
    *[("openinference", one_span([GOOD, GOOD | {ID: "b", SCORE: score}], kind),
       "row 1, span_id='s1'): retrieval.documents[2].document.score is outside the log's range, "
       f"-1e+100 to 1e+100: {shown!r}")
      for score, shown, kind in ((1.5e100, "1.5e+100", "parquet"), (-1e300, "-1e+300", "jsonl"))],
    ("openinference", one_span([GOOD | {METADATA: "parent=a"}]),
     "retrieval.documents[1].document.metadata is not a JSON object: 'parent=a'"),
    ("openinference", one_span([GOOD | {METADATA: "[1, 2]"}], "jsonl"),
     "retrieval.documents[1].document.metadata is not a JSON object: '[1, 2]'"),
    ("openinference", one_span([GOOD, {SCORE: 0.5, METADATA: "{}"}], "jsonl"),
     "retrieval.documents[2].document.id is missing: a document needs an id"),
    ("openinference", one_span([{SCORE: 0.5}]),
     "retrieval.documents[1].document.id is missing: a document needs an id"),
    ("openinference", one_span([GOOD, {ID: "", SCORE: 0.5, METADATA: "{}"}]),
     "retrieval.documents[2].document.id is missing: a document needs an id"),
    # the missing id is the fault named: nothing of the bad score follows it
    ("openinference", one_span([GOOD, {SCORE: "high", METADATA: "{}"}], "jsonl"),
     "retrieval.documents[2].document.id is missing: a document needs an id"),
    ("openinference", one_span([None, GOOD], "jsonl"),
     "retrieval.documents[1] is not a document (an object with a document.id)"),
    ("openinference", one_span("oops"),
     "retrieval.documents is not a JSON list of documents: 'oops'"),
    # a RETRIEVER span's name is its source: an empty or missing one is refused, before the
    # span's documents (here one without an id, then documents that are no list)
    ("openinference", one_span([{SCORE: "high"}], name=""),
     "row 1, span_id='s1'): name is missing: a RETRIEVER span's name is its source"),
    ("openinference", one_span("oops", "jsonl", name=None),
     "row 1, span_id='s1'): name is missing: a RETRIEVER span's name is its source"),
    # a list of JSON texts: one that is not JSON, or JSON but no object, is no document
    ("openinference", one_span(["{oops", json.dumps(GOOD)]),
     "retrieval.documents[1] is not a document (an object with a document.id)"),
    ("openinference", one_span([json.dumps(GOOD), json.dumps("a")]),
     "retrieval.documents[2] is not a document (an object with a document.id)"),
    # JSON-typed metadata (a DuckDB-written Parquet) shown as written
    ("openinference", duckdb_span("[{'document.id': 'a', 'document.metadata': CAST('[1, 2]' AS JSON)}]"),
     "retrieval.documents[1].document.metadata is not a JSON object: '[1, 2]'"),
    # the log's rules for metadata columns, told of the span (not of a row of the derived log)
    ("openinference", one_span([GOOD, GOOD | {ID: "b", METADATA: '{"granularity": "chunk"}'}]),
     "retrieval.documents[2].document.metadata.granularity is not one of doc, block, file, module, entity: 'chunk'"),
    *[("openinference", one_span([GOOD | {METADATA: json.dumps({"total_chunks": n})}], "jsonl"),
       f"retrieval.documents[1].document.metadata.total_chunks is not a whole number from 0 to "
       f"2^53: {shown!r}")
      for n, shown in ((-1, "-1"), (2.5, "2.5"), ("many", "many"), (2**53 + 2, str(2**53 + 2)))],
    ("openinference", one_span([GOOD | {SCORE: {"value": 1}}]),
     "column 'attributes.retrieval.documents': its documents' document.score has type "
     'STRUCT("value" BIGINT); expected a number'),
    ("otel-genai", one_otlp_span("not json"),
     "request 1, span_id='s1'): gen_ai.retrieval.documents is not a JSON array of documents: 'not json'"),
    ("otel-genai", one_otlp_span('{"id": "a"}'),
     "gen_ai.retrieval.documents is not a JSON array of documents: '{\"id\": \"a\"}'"),
    ("otel-genai", one_otlp_span({"intValue": "3"}),
     "gen_ai.retrieval.documents is neither a JSON string nor an array: '{\"intValue\":\"3\"}'"),
    ("otel-genai", one_otlp_span(json.dumps([{"id": "a", "score": "high"}])),
     "gen_ai.retrieval.documents[1].score is not a finite number: 'high'"),
    ("otel-genai", one_otlp_span(json.dumps([{"id": "a", "score": 1e100},
                                             {"id": "b", "score": -2e100}])),
     "gen_ai.retrieval.documents[2].score is outside the log's range, -1e+100 to 1e+100: "
     "'-2e100'"),
    ("otel-genai", one_otlp_span(json.dumps([{"id": "a"}, {"score": 1}])),
     "gen_ai.retrieval.documents[2].id is missing: a document needs an id"),
    ("otel-genai", one_otlp_span(json.dumps(["a"])),
     "gen_ai.retrieval.documents[1] is not a document (an object with an id)"),
    ("otel-genai", one_otlp_span({"arrayValue": {"values": [{"stringValue": "a"}]}}),
     "gen_ai.retrieval.documents[1] is not a document (an object with an id)"),
    # a key/value list without values is an object without an id; a bool score is no number
    ("otel-genai", one_otlp_span({"arrayValue": {"values": [{"kvlistValue": {}}]}}),
     "gen_ai.retrieval.documents[1].id is missing: a document needs an id"),
    ("otel-genai", one_otlp_span(kv_documents([("id", {"stringValue": "a"}),
                                               ("score", {"boolValue": True})])),
     "gen_ai.retrieval.documents[1].score is not a finite number: 'true'"),
    # a key given twice: its first value, here none (a null id)
    ("otel-genai", one_otlp_span(kv_documents([("id", None), ("id", {"stringValue": "a"})])),
     "gen_ai.retrieval.documents[1].id is missing: a document needs an id"),
    ("otel-genai", one_otlp_span(json.dumps([{"id": "", "score": 1.0}])),
     "gen_ai.retrieval.documents[1].id is missing: a document needs an id"),
]  # fmt: skip


def test_an_empty_parent_id_is_an_absent_one(tmp_path: Path) -> None:
    """In OpenInference metadata as in OTLP documents: the document is its own parent."""
    path = one_span([GOOD | {METADATA: json.dumps({"parent_id": ""})}])(tmp_path)
    out = tmp_path / "out"
    done = invoke("fuse", "--log", str(path), "--log-format", "openinference", "--out", str(out))
    assert done.exit_code == 0, done.stderr
    assert pd.read_parquet(out / "fused.parquet")["item_id"].tolist() == ["a"]


def test_odd_but_readable_structured_documents(tmp_path: Path) -> None:
    """An entry without a key is left out (no field could read it), one without a value reads
    as null (a parent_id of null: the document is its own parent), an empty parent_id is an
    absent one, and a span whose arrayValue has no values returned nothing; none of them is a
    fault."""
    spans = [
        otlp_retrieval("t1", "s1", "bm25", kv_documents(
            [("id", {"stringValue": "a"}), ("score", {"doubleValue": 2.0}),
             ("parent_id", None), (None, {"stringValue": "no key"})])),
        otlp_retrieval("t1", "s2", "dense", {"arrayValue": {}}),
        otlp_retrieval("t1", "s3", "splade", json.dumps([{"id": "c", "score": 1.0, "parent_id": ""}])),
    ]  # fmt: skip
    path = write_otlp(spans, tmp_path / "traces.jsonl")
    out = tmp_path / "out"
    done = invoke("fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(out))
    assert done.exit_code == 0, done.stderr
    fused = pd.read_parquet(out / "fused.parquet")
    assert {row.item_id: [(c["source"], c["raw_score"]) for c in row.contributions]
            for row in fused.itertuples()} == {"a": [("bm25", 2.0)], "c": [("splade", 1.0)]}  # fmt: skip


@pytest.mark.parametrize(("log_format", "build", "message"), BAD_SPANS)
def test_a_document_that_cannot_be_read_is_one_line_naming_file_span_and_attribute(
    log_format: str, build: Callable[[Path], Path], message: str, tmp_path: Path
) -> None:
    path = build(tmp_path)
    done = invoke(
        "run", "--log", str(path), "--log-format", log_format, "--out", str(tmp_path / "out")
    )
    error = one_line_error(done)
    assert error.startswith(f"duckscore: error: --log ({path}"), error
    assert error.rstrip("\n").endswith(message), error  # nothing after: no value where none is due
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("metadata", "score", "fault"),
    [
        ({"granularity": "doc"}, 1.0, "retrieval.documents[1].document.metadata.granularity is not one of block: 'doc'"),
        ({"total_chunks": 1}, 1.0, "retrieval.documents[1].document.metadata.total_chunks is not a whole number from 2 to three: '1'"),
        ({"total_chunks": 4}, 1.0, "retrieval.documents[1].document.metadata.total_chunks is not a whole number from 2 to three: '4'"),
        ({}, -10.5, "retrieval.documents[1].document.score is outside the log's range, -10.0 to 10.0: '-10.5'"),
        ({"granularity": "block", "total_chunks": 3}, -10.0, None),
    ],
)  # fmt: skip
def test_the_reader_takes_the_document_rules_from_the_log_contract(
    metadata: dict[str, Any],
    score: float,
    fault: str | None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """openinference.sql applies the score's range, granularity's choices and total_chunks'
    bounds as traces.py's LOG_RULES gives them (read off the retrieval_log contract), not copies
    of its own: other rules, other faults."""
    from duckscore.fusion import traces

    monkeypatch.setattr(
        traces,
        "LOG_RULES",
        traces.LOG_RULES | {"granularities": ("block",), "chunks_min": 2, "chunks_max": 3,
                            "chunks_max_shown": "three", "score_max": 10.0},
    )  # fmt: skip
    path = one_span([GOOD | {SCORE: score, METADATA: json.dumps(metadata)}])(tmp_path)
    done = run("fuse", "--log", str(path), "--log-format", "openinference",
               "--out", str(tmp_path / "out"))  # fmt: skip
    if fault is None:
        assert done.exit_code == 0, done.output
    else:
        assert one_line_error(done).rstrip("\n").endswith(fault)


def test_only_a_retrieval_span_needs_a_name(tmp_path: Path) -> None:
    """A RETRIEVER span's name is its source; another span's is not read: a chain span without
    one and an LLM span with an empty one are no fault."""
    chain = {"context.trace_id": "t1", "context.span_id": "s2", "name": None, KIND: "CHAIN"}
    llm = {"context.trace_id": "t1", "context.span_id": "s3", "name": "", KIND: "LLM"}
    path = write([retriever("t1", "s1", "bm25", [GOOD]), chain, llm], tmp_path / "spans.parquet")
    out = tmp_path / "out"
    done = run("fuse", "--log", str(path), "--log-format", "openinference", "--out", str(out))
    assert done.exit_code == 0, done.output
    spans = pd.read_parquet(out / "spans.parquet")
    assert list(zip(spans["span_id"], spans["source"])) == [("s1", "bm25")]
    assert list(pd.read_parquet(out / "fused.parquet")["item_id"]) == ["a"]


def without_source(span: dict[str, Any], name: str | None) -> None:
    """The span without gen_ai.data_source.id, and its name `name` (None: no name)."""
    span["attributes"] = [a for a in span["attributes"] if a["key"] != gen_ai.GEN_AI_DATA_SOURCE_ID]
    if name is None:
        del span["name"]
    else:
        span["name"] = name


def emptied_source(span: dict[str, Any]) -> None:
    for entry in span["attributes"]:
        if entry["key"] == gen_ai.GEN_AI_DATA_SOURCE_ID:
            entry["value"] = {"stringValue": ""}
    span["name"] = ""


SPAN_FAULTS = [
    ("no traceId", lambda span: span.pop("traceId"), "'s1'", "traceId is missing"),
    ("empty traceId", lambda span: span.update(traceId=""), "'s1'", "traceId is missing"),
    ("no spanId", lambda span: span.pop("spanId"), "None", "spanId is missing"),
    ("empty spanId", lambda span: span.update(spanId=""), "None", "spanId is missing"),
    ("no source", lambda span: without_source(span, None), "'s1'",
     "gen_ai.data_source.id is missing, and the span has no name"),
    ("empty source", emptied_source, "'s1'",
     "gen_ai.data_source.id is missing, and the span has no name"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "shown_id", "message"), [f[1:] for f in SPAN_FAULTS], ids=[f[0] for f in SPAN_FAULTS]
)
def test_a_span_without_an_id_or_a_source_is_one_line(
    edit: Callable[[dict[str, Any]], object], shown_id: str, message: str, tmp_path: Path
) -> None:
    """What is missing is named, and no value follows; an empty id or name is a missing one; a
    span's own fault is told before those of its documents."""
    span = otlp_retrieval("t1", "s1", "bm25", json.dumps([{"id": "a", "score": "high"}]))
    edit(span)  # the span's fault comes before its first document's
    path = write_otlp([span], tmp_path / "traces.jsonl")
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(tmp_path / "out")
    )
    assert one_line_error(done).endswith(
        f"--log ({path}, request 1, span_id={shown_id}): {message}\n"
    )


def test_requests_of_a_large_export_are_numbered_in_file_order(tmp_path: Path) -> None:
    """Every request of 20,000 holds a bad span named after its line: the first fault is line
    1's, numbered 1, however many threads read the file (the numbering once followed the order
    in which the scan's threads finished: with 4 threads, wrong in most runs)."""
    bad = json.dumps([{"id": "a", "score": "high"}])
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(otlp_request([otlp_retrieval("t1", f"s{n}", "bm25", bad)])
                            for n in range(1, 20_001)))  # fmt: skip
    for _ in range(3):
        done = invoke("fuse", "--log", str(path), "--log-format", "otel-genai", "--threads", "8",
                      "--out", str(tmp_path / "out"))  # fmt: skip
        assert one_line_error(done).endswith(
            f"--log ({path}, request 1, span_id='s1'): gen_ai.retrieval.documents[1].score is "
            "not a finite number: 'high'\n"
        )


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    from .test_traces import scifact_slice

    return scifact_slice()


def test_a_retrieval_span_without_a_data_source_is_named_by_its_span_name(tmp_path: Path) -> None:
    """`source` is gen_ai.data_source.id, else the span's name (sql/fuse/otel_genai.sql)."""
    span = otlp_retrieval("t1", "s1", "bm25", json.dumps([{"id": "a", "score": 1.0}]))
    without_source(span, "retrieval bm25")
    path = write_otlp([span], tmp_path / "traces.jsonl")
    out = tmp_path / "out"
    done = invoke("fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(out))
    assert done.exit_code == 0, done.stderr
    (row,) = pd.read_parquet(out / "fused.parquet").itertuples()
    assert [part["source"] for part in row.contributions] == ["retrieval bm25"]


def test_the_first_fault_is_the_first_by_row_then_position(tmp_path: Path) -> None:
    """OpenInference: row 1's span has faults at positions 2 and 3, row 2's one at position 1:
    the line names row 1's position 2, not the smallest position alone nor a later one of row 1."""
    path = write([retriever("t1", "s1", "bm25", [GOOD, GOOD | {ID: "b", SCORE: "high"},
                                                 {SCORE: "0.5", METADATA: "{}"}]),
                  retriever("t1", "s2", "dense", [GOOD | {SCORE: "low"}])], tmp_path / "spans.jsonl")  # fmt: skip
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "openinference", "--out", str(tmp_path / "out")
    )
    assert one_line_error(done).endswith(
        f"--log ({path}, row 1, span_id='s1'): retrieval.documents[2].document.score is not a "
        "finite number: 'high'\n"
    )


def test_the_first_fault_is_the_first_in_file_request_span_and_position(tmp_path: Path) -> None:
    """Request 1's span s1 has a bad score at position 2, its span s2 one at position 1, and
    request 2's first span one at position 1: the line names s1, the first by (request, span,
    position), not the smallest position or span index alone."""
    bad = {"id": "x", "score": "high"}
    requests = [
        [otlp_retrieval("t1", "s1", "bm25", json.dumps([{"id": "a", "score": 1.0}, bad])),
         otlp_retrieval("t1", "s2", "dense", json.dumps([bad]))],
        [otlp_retrieval("t2", "s3", "bm25", json.dumps([bad]))],
    ]  # fmt: skip
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(otlp_request(spans) for spans in requests))
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(tmp_path / "out")
    )
    assert one_line_error(done).endswith(
        f"--log ({path}, request 1, span_id='s1'): gen_ai.retrieval.documents[2].score is not "
        "a finite number: 'high'\n"
    )
