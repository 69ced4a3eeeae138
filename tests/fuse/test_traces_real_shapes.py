"""What the traces real instrumentations write need of the readers (issue 47 §2), each with the
behaviour asked for and its refusal:

- documents without `document.id` (LangChain's OpenInference and OpenLLMetry instrumentations
  write none): an id by the documented rule — the metadata's id, doc_id, source and chunk
  index, else a hash of the content — with one warning line; `--doc-id KEY` and `--parent-id
  KEY` choose a metadata key (a key with quotes or SQL in it is a key, never SQL);
- a retriever span below which no retriever returned a document is a leaf (LlamaIndex's
  `retrieve` span above its empty `_retrieve`); every document dropped as a nested retriever's
  is refused in one line;
- OTLP JSON of OpenInference spans (the attributes flattened, `retrieval.documents.<i>.…`) reads
  as Phoenix's export of the same spans; OpenLLMetry's shapes (`vector_db_retrieve` with its
  documents in `gen_ai.task.output`, a vector database's `db.query.result` events) read as the
  log they stand for; an export without a retrieval span says what it holds;
- `run` on an export none of whose retrievals returned a document is refused unless
  `--allow-empty`;
- `--query-key`: the trace's query_id from its root span's input or an attribute.

The attribute names are those of the installed conventions (`openinference-semantic-
conventions`, `opentelemetry-semantic-conventions`) or, for OpenLLMetry, those its packages
write (opentelemetry-semantic-conventions-ai 0.5.1: `gen_ai.task.output`,
`traceloop.entity.name`, the `db.query.result` event and its `db.query.result.id`, `.score`,
`.distance`, `.metadata`, `.document`), as the recorded fixtures (fixtures/traces/) show them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from .test_trace_shapes import (
    CONTENT,
    ID,
    METADATA,
    SCORE,
    one_line_error,
    otlp_attribute,
    otlp_request,
    retriever,
    run,
    write,
    write_otlp,
)
from .test_traces import KIND, QUERY, invoke


def hits(spans: Path, log_format: str = "openinference", columns: str = "query_id, source, item_id, parent_id, rank",
         **options: Any) -> list[Any]:  # fmt: skip
    """The log the reader makes of the spans (`options`: TraceLog's doc_id, parent_id …)."""
    from duckscore.core.session import Session
    from duckscore.fusion.traces import TraceLog, as_log

    with Session() as session:
        as_log(session, TraceLog(str(spans), log_format, **options))
        return session.con.sql(f"SELECT {columns} FROM trace_hits ORDER BY ALL").fetchall()


def fused(out: Path) -> list[Any]:
    return duckdb.sql(
        f"SELECT query_id, item_id, rank FROM '{out / 'fused.parquet'}' ORDER BY query_id, rank"
    ).fetchall()


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


# -- documents without an id ---------------------------------------------------------------------

ID_LESS = [  # (document, the id the rule gives it, the rule)
    ({CONTENT: "a", METADATA: json.dumps({"id": 7, "doc_id": "x", "source": "f.txt"})}, "7", "id"),
    ({CONTENT: "b", METADATA: json.dumps({"doc_id": "d-2", "source": "f.txt", "start_index": 0})}, "d-2", "doc_id"),
    ({CONTENT: "c", METADATA: json.dumps({"source": "f.txt", "start_index": 120})}, "f.txt#120", "source"),
    ({CONTENT: "d", METADATA: json.dumps({"source": "g.txt", "chunk_index": 3, "start_index": 9})}, "g.txt#3", "source"),
    ({CONTENT: "d", METADATA: json.dumps({"source": "h.txt", "chunk_index": 0})}, "h.txt#0", "source"),
    ({CONTENT: "e", METADATA: json.dumps({"source": "g.txt", "id": ""})}, sha("e"), "content"),
    ({CONTENT: "f"}, sha("f"), "content"),
    ({ID: "given", CONTENT: "g", METADATA: json.dumps({"id": "other"})}, "given", "document.id"),
]  # fmt: skip


@pytest.mark.parametrize("suffix", ["parquet", "jsonl"])
def test_a_document_without_an_id_gets_one_by_the_first_rule_that_applies(
    suffix: str, tmp_path: Path
) -> None:
    spans = write(
        [retriever("t1", "s1", "bm25", [d for d, _, _ in ID_LESS])], tmp_path / f"s.{suffix}"
    )
    done = run(
        "fuse", "--log", str(spans), "--log-format", "openinference", "--out", str(tmp_path / "out")
    )
    assert done.exit_code == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"duckscore: warning: --log ({spans}): 7 documents without an id are given one by the "
        "first rule that applies: the metadata's id (1), the metadata's doc_id (1), the "
        "metadata's source and chunk index (3), a hash of the content (2); --doc-id KEY names a "
        "metadata key instead (docs/traces.md#documents-without-an-id)"
    ]
    expected = [("t1", "bm25", item, item, rank) for rank, (_, item, _) in enumerate(ID_LESS, 1)]
    assert hits(spans) == sorted(expected)


def test_one_document_without_an_id_is_said_in_the_singular(tmp_path: Path) -> None:
    spans = write(
        [retriever("t1", "s1", "bm25", [{CONTENT: "x"}, {ID: "b"}])], tmp_path / "s.parquet"
    )
    done = run(
        "fuse", "--log", str(spans), "--log-format", "openinference", "--out", str(tmp_path / "out")
    )
    assert (
        "1 document without an id is given one by the first rule that applies: a hash of the content (1)"
        in done.stderr
    )


def test_a_document_with_nothing_to_give_it_an_id_is_refused(tmp_path: Path) -> None:
    """No id, no metadata key of the rule, no content: one line naming the span and document."""
    spans = write([retriever("t1", "s1", "bm25", [{CONTENT: "x"}, {METADATA: json.dumps({"source": "f"})}])],
                  tmp_path / "s.parquet")  # fmt: skip
    done = invoke(
        "fuse", "--log", str(spans), "--log-format", "openinference", "--out", str(tmp_path / "o")
    )
    assert (
        "row 1, span_id='s1'): retrieval.documents[2].document.id is missing: a document needs an id"
        in one_line_error(done)
    )


WEIRD = "we'ird\"key; DROP TABLE x --"


@pytest.mark.parametrize(
    ("option", "expected"),
    [(["--doc-id", "meta.corpus_id"], [("t1", "bm25", "c1", "p1", 1), ("t1", "bm25", "c2", "c2", 2)]),
     (["--doc-id", "/meta/corpus_id", "--parent-id", "book"], [("t1", "bm25", "c1", "b1", 1), ("t1", "bm25", "c2", "b2", 2)]),
     (["--doc-id", WEIRD, "--parent-id", WEIRD], [("t1", "bm25", "w1", "w1", 1), ("t1", "bm25", "w2", "w2", 2)]),
     (["--parent-id", "book"], [("t1", "bm25", "n1", "b1", 1), ("t1", "bm25", "n2", "b2", 2)]),
     (["--parent-id", "a/b.c~d"], [("t1", "bm25", "n1", "s1", 1), ("t1", "bm25", "n2", "n2", 2)])],
)  # fmt: skip
def test_doc_id_and_parent_id_name_a_metadata_key(
    option: list[str], expected: list[Any], tmp_path: Path
) -> None:
    """--doc-id names every document's id (its document.id or not), --parent-id its parent (a
    document without the key is its own parent); dotted keys go down into the metadata, a
    JSON pointer is taken as it is, and any text is a key: it reaches SQL as a bound literal."""
    documents = [
        {ID: "n1", CONTENT: "x", METADATA: json.dumps({"meta": {"corpus_id": "c1"}, "parent_id": "p1", "book": "b1",
                                                       WEIRD: "w1", "a/b": {"c~d": "s1"}})},
        {ID: "n2", CONTENT: "y", METADATA: json.dumps({"meta": {"corpus_id": "c2"}, "book": "b2", WEIRD: "w2"})},
    ]  # fmt: skip
    spans = write([retriever("t1", "s1", "bm25", documents)], tmp_path / "s.parquet")
    done = run(
        "fuse",
        "--log",
        str(spans),
        "--log-format",
        "openinference",
        *option,
        "--out",
        str(tmp_path / "out"),
    )
    assert done.exit_code == 0 and "without an id" not in done.stderr, done.stderr
    options = {
        flag.strip("-").replace("-", "_"): value for flag, value in zip(option[::2], option[1::2])
    }
    assert hits(spans, **options) == expected


def test_a_document_without_the_doc_id_key_is_refused(tmp_path: Path) -> None:
    documents = [{ID: "n1", METADATA: json.dumps({"corpus_id": "c1"})}, {ID: "n2", METADATA: "{}"}]
    spans = write([retriever("t1", "s1", "bm25", documents)], tmp_path / "s.jsonl")
    done = invoke("fuse", "--log", str(spans), "--log-format", "openinference", "--doc-id", "corpus_id",
                  "--out", str(tmp_path / "out"))  # fmt: skip
    assert one_line_error(done).endswith(
        "row 1, span_id='s1'): retrieval.documents[2].document.metadata.corpus_id is missing: "
        "--doc-id names each document's id\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--doc-id", "a..b"], "--doc-id 'a..b': a metadata key, its parts joined by dots (source.id), or a JSON pointer (/source/id)"),
     (["--doc-id", ""], "--doc-id '': a metadata key"),
     (["--parent-id", "x."], "--parent-id 'x.': a metadata key")],
)  # fmt: skip
def test_a_key_that_names_nothing_is_refused(args: list[str], message: str, tmp_path: Path) -> None:
    spans = write([retriever("t1", "s1", "bm25", [{ID: "a"}])], tmp_path / "s.parquet")
    done = invoke(
        "fuse",
        "--log",
        str(spans),
        "--log-format",
        "openinference",
        *args,
        "--out",
        str(tmp_path / "o"),
    )
    assert message in done.stderr and done.exit_code != 0, done.stderr


@pytest.mark.parametrize(
    "flag", [["--doc-id", "id"], ["--parent-id", "p"], ["--allow-empty"], ["--query-key", "input"]]
)
def test_the_trace_options_need_a_trace_format(flag: list[str], tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    pd.DataFrame({"query_id": ["q"], "source": ["s"], "item_id": ["a"], "parent_id": ["a"],
                  "score": [1.0]}).to_parquet(log)  # fmt: skip
    done = invoke("run", "--log", str(log), *flag, "--out", str(tmp_path / "o"))
    assert done.exit_code == 2 and f"{flag[0]} needs a --log-format of trace spans" in done.stderr


# -- nested retrievers: a leaf above an empty span --------------------------------------------


def llamaindex_spans(tmp: Path, child_documents: Any) -> Path:
    """LlamaIndex's shape: `BM25Retriever.retrieve` (its documents) above its own
    `BM25Retriever._retrieve` (none: the instrumentation records them on the outer span)."""
    root = {
        "context.trace_id": "t1",
        "context.span_id": "r",
        "parent_id": None,
        "name": "rag",
        KIND: "CHAIN",
    }
    outer = retriever(
        "t1", "o", "BM25Retriever.retrieve", [{ID: "a", SCORE: 2.0}, {ID: "b", SCORE: 1.0}]
    )
    inner = retriever("t1", "i", "BM25Retriever._retrieve", child_documents) | {"parent_id": "o"}
    return write([root, outer | {"parent_id": "r"}, inner], tmp / "spans.parquet")


@pytest.mark.parametrize("child", [[], None])
def test_a_retriever_whose_children_returned_nothing_is_a_leaf(child: Any, tmp_path: Path) -> None:
    spans = llamaindex_spans(tmp_path, child)
    done = run(
        "fuse", "--log", str(spans), "--log-format", "openinference", "--out", str(tmp_path / "out")
    )
    assert done.exit_code == 0 and "nested" not in done.stderr, done.stderr
    assert hits(spans) == [("t1", "BM25Retriever.retrieve", "a", "a", 1),
                                      ("t1", "BM25Retriever.retrieve", "b", "b", 2)]  # fmt: skip


def test_a_retriever_with_a_child_that_returned_documents_is_still_an_ensemble(
    tmp_path: Path,
) -> None:
    spans = llamaindex_spans(tmp_path, [{ID: "c", SCORE: 1.0}])
    done = run(
        "fuse", "--log", str(spans), "--log-format", "openinference", "--out", str(tmp_path / "out")
    )
    assert (
        "1 retrieval span with retrieval spans below it (nested retrievers) is left out"
        in done.stderr
    )
    assert hits(spans) == [("t1", "BM25Retriever._retrieve", "c", "c", 1)]


@pytest.mark.parametrize("empty", ["[]", None])
def test_an_otlp_retrieval_span_above_an_empty_one_is_a_leaf(
    empty: str | None, tmp_path: Path
) -> None:
    """The span below lists no document, or has no documents attribute at all."""

    def span(span_id: str, parent: str, documents: str | None) -> dict[str, Any]:
        attributes = [otlp_attribute("gen_ai.operation.name", "retrieval")]
        if documents is not None:
            attributes.append(otlp_attribute("gen_ai.retrieval.documents", documents))
        return {
            "traceId": "t1",
            "spanId": span_id,
            "parentSpanId": parent,
            "name": "bm25",
            "attributes": attributes,
        }

    path = write_otlp([span("o", "", json.dumps([{"id": "a", "score": 1.0}])), span("i", "o", empty)],
                      tmp_path / "otlp.jsonl")  # fmt: skip
    assert hits(path, "otel-genai") == [("t1", "bm25", "a", "a", 1)]


@pytest.mark.parametrize("command", ["fuse", "run"])
def test_a_log_whose_every_document_is_a_nested_retrievers_is_refused(
    command: str, tmp_path: Path
) -> None:
    """Two retrievers each the other's parent (a malformed export): both are left out, and no
    document is left: one line, even for run with --allow-empty."""
    spans = write([retriever("t1", "x", "bm25", [{ID: "a"}]) | {"parent_id": "y"},
                   retriever("t1", "y", "dense", [{ID: "b"}, {ID: "c"}]) | {"parent_id": "x"}],
                  tmp_path / "spans.parquet")  # fmt: skip
    extra = ["--allow-empty"] if command == "run" else []
    done = invoke(
        command,
        "--log",
        str(spans),
        "--log-format",
        "openinference",
        *extra,
        "--out",
        str(tmp_path / "o"),
    )
    assert one_line_error(done).endswith(
        f"--log ({spans}): every document is in a retrieval span with retrieval spans below it "
        "(3 documents), left out as a nested retriever's, and the spans below returned none "
        "(docs/traces.md#nested-retrievers)\n"
    )
    assert not (tmp_path / "o").exists()


# -- run on an export whose retrievals returned nothing ---------------------------------------


def test_run_refuses_an_export_whose_retrievals_all_returned_nothing_unless_asked(
    tmp_path: Path,
) -> None:
    spans = write(
        [retriever("t1", "s1", "bm25", []), retriever("t2", "s2", "bm25", [])],
        tmp_path / "s.parquet",
    )
    done = invoke(
        "run", "--log", str(spans), "--log-format", "openinference", "--out", str(tmp_path / "o")
    )
    assert one_line_error(done).endswith(
        "no retrieval span returned a document (2 retrieval spans in 2 traces): nothing to fuse; "
        "--allow-empty decides each trace as a query without candidates\n"
    )
    assert not (tmp_path / "o").exists()
    done = invoke("fuse", "--log", str(spans), "--log-format", "openinference", "--allow-empty",
                  "--out", str(tmp_path / "o"))  # fuse has nothing to fuse, asked or not  # fmt: skip
    assert one_line_error(done).endswith("nothing to fuse\n")
    done = invoke("run", "--log", str(spans), "--log-format", "openinference", "--allow-empty",
                  "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    decided = duckdb.sql(
        f"SELECT query_id, web_fallback FROM '{tmp_path / 'o' / 'queries.parquet'}' ORDER BY 1"
    )
    assert decided.fetchall() == [("t1", True), ("t2", True)]


# -- OTLP JSON of OpenInference spans --------------------------------------------------------


def flattened(span_id: str, parent: str | None, name: str, kind: str, documents: list[dict[str, Any]],
              trace: str = "t1", **extra: str) -> dict[str, Any]:  # fmt: skip
    """An OpenInference span as the OTLP exporters write it: the documents flattened into
    `retrieval.documents.<i>.document.<key>` attributes (numbers as intValue or doubleValue)."""
    attributes = [
        otlp_attribute("openinference.span.kind", kind),
        otlp_attribute("input.value", "q"),
    ]
    for i, document in enumerate(documents):
        for key, value in document.items():
            typed = ({"doubleValue": value} if isinstance(value, float) else
                     {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value})  # fmt: skip
            attributes.append({"key": f"retrieval.documents.{i}.{key}", "value": typed})
    attributes += [otlp_attribute(key, value) for key, value in extra.items()]
    span = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": "1",
        "attributes": attributes,
    }
    return span if parent is None else span | {"parentSpanId": parent}


def test_otlp_openinference_spans_read_as_phoenixs_export_of_them(tmp_path: Path) -> None:
    """Twelve documents (indices 10 and 11 sort after 2 as numbers), an ensemble above them,
    a root; OTLP JSON reads as the same spans written as Phoenix's export."""
    documents = [
        {ID: f"d{i}", SCORE: 12.0 - i, METADATA: json.dumps({"parent_id": f"p{i % 3}"})}
        for i in range(12)
    ]
    otlp = [flattened("r", None, "rag", "CHAIN", []), flattened("e", "r", "ensemble", "RETRIEVER", documents[:3]),
            flattened("a", "e", "bm25", "RETRIEVER", documents), flattened("b", "e", "dense", "RETRIEVER",
            [{ID: "d3", SCORE: 5}, {ID: "d1"}])]  # fmt: skip
    path = tmp_path / "otlp.jsonl"
    path.write_text(otlp_request(otlp[:2]) + otlp_request(otlp[2:]))
    rows = [{"context.trace_id": "t1", "context.span_id": "r", "parent_id": None, "name": "rag", KIND: "CHAIN"},
            retriever("t1", "e", "ensemble", documents[:3]) | {"parent_id": "r"},
            retriever("t1", "a", "bm25", documents) | {"parent_id": "e"},
            retriever("t1", "b", "dense", [{ID: "d3", SCORE: 5.0}, {ID: "d1"}]) | {"parent_id": "e"}]  # fmt: skip
    phoenix = write(rows, tmp_path / "phoenix.jsonl")
    for given, out in ((path, "a"), (phoenix, "b")):
        done = run(
            "run",
            "--log",
            str(given),
            "--log-format",
            "openinference",
            "--out",
            str(tmp_path / out),
        )
        assert (
            done.exit_code == 0 and "1 retrieval span with retrieval spans below it" in done.stderr
        )
    for name in ("fused.parquet", "parents.parquet", "queries.parquet", "spans.parquet"):
        a, b = (duckdb.sql(f"FROM '{tmp_path / side / name}'").fetchall() for side in "ab")
        assert a == b, name
    assert hits(path, "openinference", "source, item_id, rank")[:3] == [
        ("bm25", "d0", 1),
        ("bm25", "d1", 2),
        ("bm25", "d10", 11),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [(lambda span: span.pop("spanId"), "request 1, span_id=None): spanId is missing"),
     (lambda span: span.update(traceId=""), "request 1, span_id='a'): traceId is missing"),
     (lambda span: span.update(name=""), "request 1, span_id='a'): name is missing: a RETRIEVER span's name is its source"),
     (lambda span: span["attributes"].append(otlp_attribute("retrieval.documents.1.document.score", "high")),
      "request 1, span_id='a'): retrieval.documents[2].document.score is not a finite number: 'high'")],
)  # fmt: skip
def test_an_unreadable_otlp_openinference_span_is_one_line(
    change: Any, message: str, tmp_path: Path
) -> None:
    span = flattened("a", None, "bm25", "RETRIEVER", [{ID: "x"}, {ID: "y"}])
    change(span)
    path = write_otlp([span], tmp_path / "otlp.jsonl")
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "openinference", "--out", str(tmp_path / "o")
    )
    assert message in one_line_error(done)


def test_the_first_unreadable_otlp_span_is_the_first_in_its_request(tmp_path: Path) -> None:
    """Spans of one request are in the order they were exported, whatever their ids."""
    spans = [
        flattened(span_id, None, "bm25", "RETRIEVER", [{SCORE: 1.0}]) for span_id in ("z", "a")
    ]
    path = write_otlp(spans, tmp_path / "otlp.jsonl")
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "openinference", "--out", str(tmp_path / "o")
    )
    assert (
        "request 1, span_id='z'): retrieval.documents[1].document.id is missing"
        in one_line_error(done)
    )


def test_otlp_spans_with_result_events_read_as_openinference_name_the_other_format(
    tmp_path: Path,
) -> None:
    other_event = {"name": "gen_ai.choice", "attributes": []}
    database = {"traceId": "t1", "spanId": "c", "name": "chroma.query", "attributes": [],
                "events": [result_event(id="a", distance=0.1), other_event]}  # fmt: skip
    chat = {
        "traceId": "t1",
        "spanId": "l",
        "name": "chat",
        "attributes": [],
        "events": [other_event],
    }
    path = write_otlp([database, chat], tmp_path / "otlp.jsonl")
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "openinference", "--out", str(tmp_path / "o")
    )
    assert one_line_error(done).endswith(
        "the export holds 2 spans; 1 span with db.query.result events, none of them a RETRIEVER "
        "span: --log-format otel-genai reads it\n"
    )


def test_a_retriever_run_more_than_once_orders_its_calls_by_start_time(tmp_path: Path) -> None:
    """Phoenix's DataFrame lists the newest span first: the calls are ordered by their start,
    a span without one after those with one, then by the export's order. `a`, first in both
    calls, takes its parent from the call that started; `c` and `d`, second, tie on score."""
    rows = [retriever("t1", "s0", "dense", [{ID: "a", SCORE: 1.0, METADATA: json.dumps({"parent_id": "P0"})},
                                            {ID: "c", SCORE: 0.5}]) | {"start_time": None},
            retriever("t1", "s2", "dense", [{ID: "a", SCORE: 1.0, METADATA: json.dumps({"parent_id": "P2"})},
                                            {ID: "e", SCORE: 0.5}]) | {"start_time": "2025-11-24T16:00:02+00:00"},
            retriever("t1", "s1", "dense", [{ID: "a", SCORE: 1.0, METADATA: json.dumps({"parent_id": "P1"})},
                                            {ID: "d", SCORE: 0.5}]) | {"start_time": "2025-11-24T16:00:01+00:00"}]  # fmt: skip
    spans = write(rows, tmp_path / "spans.jsonl")
    assert hits(spans, columns="item_id, parent_id, rank") == [
        ("a", "P1", 1),
        ("c", "c", 4),
        ("d", "d", 2),
        ("e", "e", 3),
    ]


# -- OpenLLMetry's shapes -----------------------------------------------------------------------


def openllmetry_span(
    span_id: str, parent: str, name: str, documents: Any, **extra: Any
) -> dict[str, Any]:
    """OpenLLMetry's LangChain retriever span: `vector_db_retrieve`, its documents in
    gen_ai.task.output (and traceloop.entity.output), its query in gen_ai.task.input."""
    output = (
        documents
        if isinstance(documents, str)
        else json.dumps({"documents": documents, "count": len(documents)})
    )
    attributes = [otlp_attribute("gen_ai.operation.name", "vector_db_retrieve"),
                  otlp_attribute("traceloop.entity.name", name),
                  otlp_attribute("gen_ai.task.input", json.dumps({"query": "q1", "tags": []})),
                  otlp_attribute("gen_ai.task.output", output), otlp_attribute("traceloop.entity.output", output)]  # fmt: skip
    return {"traceId": "t1", "spanId": span_id, "parentSpanId": parent, "name": f"vector_db_retrieve {name}",
            "startTimeUnixNano": "1", "attributes": attributes, **extra}  # fmt: skip


def page(text: str, **metadata: Any) -> dict[str, Any]:
    return {"page_content": text, "metadata": metadata}


def test_openllmetry_task_output_documents_read_as_the_log_they_stand_for(tmp_path: Path) -> None:
    spans = [
        {"traceId": "t1", "spanId": "w", "name": "rag.workflow", "attributes": [
            otlp_attribute("gen_ai.operation.name", "invoke_agent"),
            otlp_attribute("gen_ai.task.input", json.dumps({"inputs": "the question"}))]},
        openllmetry_span("e", "w", "EnsembleRetriever", [page("x", id="a"), page("y", id="b")]),
        openllmetry_span("b", "e", "BM25Retriever", [page("x", id="a", parent_id="P"), page("z", source="f", start_index=4)]),
        openllmetry_span("v", "e", "VectorStoreRetriever", [page("y", id="b"), page("x", id="a")]),
    ]  # fmt: skip
    path = write_otlp(spans, tmp_path / "otlp.jsonl")
    done = run(
        "fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(tmp_path / "out")
    )
    assert done.exit_code == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"duckscore: warning: --log ({path}): 4 documents without an id are given one by the "
        "first rule that applies: the metadata's id (3), the metadata's source and chunk index "
        "(1); --doc-id KEY names a metadata key instead (docs/traces.md#documents-without-an-id)"
    )
    assert "1 retrieval span with retrieval spans below it (nested retrievers)" in done.stderr
    assert hits(path, "otel-genai", "DISTINCT query_text") == [("q1",)]
    assert hits(path, "otel-genai") == sorted([
        ("t1", "BM25Retriever", "a", "P", 1), ("t1", "BM25Retriever", "f#4", "f#4", 2),
        ("t1", "VectorStoreRetriever", "b", "b", 1), ("t1", "VectorStoreRetriever", "a", "a", 2)])  # fmt: skip


def test_openllmetry_entity_output_reads_without_the_task_output(tmp_path: Path) -> None:
    """Older OpenLLMetry versions write the documents in traceloop.entity.output alone."""
    span = openllmetry_span("b", "", "BM25Retriever", [page("x", id="a"), page("y", id="b")])
    span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.task.output"]
    path = write_otlp([span], tmp_path / "otlp.jsonl")
    assert hits(path, "otel-genai") == [
        ("t1", "BM25Retriever", "a", "a", 1),
        ("t1", "BM25Retriever", "b", "b", 2),
    ]


def test_openllmetry_task_output_that_is_no_list_of_documents_is_one_line(tmp_path: Path) -> None:
    for output, message in (("not json", "gen_ai.task.output is not JSON with a list of documents: 'not json'"),
                            (json.dumps({"documents": ["Document(...)"]}),
                             "gen_ai.task.output[1] is not a document (an object with an id)")):  # fmt: skip
        path = write_otlp(
            [openllmetry_span("b", "", "BM25Retriever", output)], tmp_path / "otlp.jsonl"
        )
        done = invoke(
            "fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(tmp_path / "o")
        )
        assert message in one_line_error(done)


def test_openllmetry_document_without_the_doc_id_key_is_one_line(tmp_path: Path) -> None:
    pages = [page("x", chunk="c1"), page("y", id="b")]
    path = write_otlp([openllmetry_span("b", "", "BM25Retriever", pages)], tmp_path / "otlp.jsonl")
    done = invoke("fuse", "--log", str(path), "--log-format", "otel-genai", "--doc-id", "chunk",
                  "--out", str(tmp_path / "o"))  # fmt: skip
    assert one_line_error(done).endswith(
        "span_id='b'): gen_ai.task.output[2].metadata.chunk is missing: --doc-id names each "
        "document's id\n"
    )


def result_event(**attributes: Any) -> dict[str, Any]:
    """A vector database instrumentation's `db.query.result` event (OpenLLMetry's chroma,
    pinecone, qdrant …): one a document."""
    typed = {
        k: {"doubleValue": v} if isinstance(v, float) else {"stringValue": v}
        for k, v in attributes.items()
    }
    return {"timeUnixNano": "1", "name": "db.query.result",
            "attributes": [{"key": f"db.query.result.{k}", "value": v} for k, v in typed.items()]}  # fmt: skip


def test_vector_database_result_events_are_a_retrieval(tmp_path: Path) -> None:
    """Each event a document: its id, its score, else minus its distance (smaller is nearer),
    its metadata when it is JSON (Python's text of a dict is none), its content."""
    chroma = {"traceId": "t1", "spanId": "c", "name": "chroma.query", "startTimeUnixNano": "1",
              "attributes": [otlp_attribute("db.system", "chroma")],
              "events": [result_event(id="a", distance=0.5, metadata=json.dumps({"parent_id": "P"}), document="x"),
                         result_event(id="b", distance=0.2, metadata="{'parent_id': 'Q'}"),
                         {"name": "db.query.embeddings", "attributes": []}]}  # fmt: skip
    pinecone = {"traceId": "t1", "spanId": "p", "name": "pinecone.query", "startTimeUnixNano": "1",
                "attributes": [], "events": [result_event(id="b", score=0.9), result_event(document="only text")]}  # fmt: skip
    path = write_otlp([chroma, pinecone], tmp_path / "otlp.jsonl")
    done = run(
        "fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(tmp_path / "out")
    )
    assert done.exit_code == 0, done.stderr
    rows = hits(path, "otel-genai", "source, item_id, parent_id, rank, score")
    assert rows == sorted([("chroma.query", "a", "P", 1, -0.5), ("chroma.query", "b", "b", 2, -0.2),
                           ("pinecone.query", "b", "b", 1, 0.9), ("pinecone.query", sha("only text"), sha("only text"), 2, -2.0)])  # fmt: skip
    bad = dict(chroma, events=[result_event(id="a", distance="far")])
    path = write_otlp([bad], tmp_path / "bad.jsonl")
    done = invoke(
        "fuse", "--log", str(path), "--log-format", "otel-genai", "--out", str(tmp_path / "o")
    )
    assert "db.query.result[1].distance is not a finite number: 'far'" in one_line_error(done)


# -- --query-key --------------------------------------------------------------------------------


def keyed_export(tmp: Path) -> Path:
    """Three traces: t1 and t3 ask one question (session s1, metadata query q1), t2 another."""
    rows = []
    for trace, session, question in (
        ("t1", "s1", "what?"),
        ("t2", "s2", "why?"),
        ("t3", "s1", "what?"),
    ):
        rows.append({"context.trace_id": trace, "context.span_id": f"{trace}-r", "parent_id": None, "name": "rag",
                     KIND: "CHAIN", QUERY: question, "attributes.session.id": session,
                     "attributes.metadata": json.dumps({"query": {"id": f"q-{session}"}})})  # fmt: skip
        documents = [{ID: f"{trace}-a", SCORE: 2.0}, {ID: "shared", SCORE: 1.0}]
        rows.append(
            retriever(trace, f"{trace}-s", "bm25", documents, query=f"rewritten {question}")
            | {"parent_id": f"{trace}-r"}
        )
    return write(rows, tmp / "spans.parquet")


@pytest.mark.parametrize(
    ("key", "queries"),
    [("trace", ["t1", "t2", "t3"]), ("input", ["what?", "why?"]), ("session.id", ["s1", "s2"]),
     ("metadata.query.id", ["q-s1", "q-s2"])],
)  # fmt: skip
def test_query_key_names_each_traces_query(key: str, queries: list[str], tmp_path: Path) -> None:
    """Traces of one key are one query: their retrievers' spans one list each (a retriever run
    more than once), spans.parquet keeps every trace's span under it."""
    done = invoke("run", "--log", str(keyed_export(tmp_path)), "--log-format", "openinference",
                  "--query-key", key, "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    got = duckdb.sql(
        f"SELECT query_id FROM '{tmp_path / 'out' / 'queries.parquet'}' ORDER BY 1"
    ).fetchall()
    assert [q for (q,) in got] == queries
    spans = duckdb.sql(
        f"SELECT query_id, trace_id FROM '{tmp_path / 'out' / 'spans.parquet'}' ORDER BY 2"
    ).fetchall()
    assert [q for q, _ in spans] == (
        [queries[0], queries[1], queries[0]] if len(queries) == 2 else queries
    )
    if len(queries) == 2:  # t1's and t3's lists merged: each document once, at its best position
        assert fused(tmp_path / "out")[:3] == [
            (queries[0], "t1-a", 1),
            (queries[0], "t3-a", 2),
            (queries[0], "shared", 3),
        ]


def test_query_key_from_otlp_attributes(tmp_path: Path) -> None:
    spans = [flattened("r", None, "rag", "CHAIN", [], trace=t, metadata=json.dumps({"query_id": q}))
             | {"attributes": [otlp_attribute("openinference.span.kind", "CHAIN"), otlp_attribute("input.value", f"Q {q}"),
                               otlp_attribute("metadata", json.dumps({"query_id": q}))]}
             for t, q in (("t1", "q7"), ("t2", "q8"))]  # fmt: skip
    spans += [
        flattened(f"{t}-s", "r", "bm25", "RETRIEVER", [{ID: "a"}], trace=t) for t in ("t1", "t2")
    ]
    path = write_otlp(spans, tmp_path / "otlp.jsonl")
    for key, expected in (("metadata.query_id", ["q7", "q8"]), ("input", ["Q q7", "Q q8"])):
        done = invoke("run", "--log", str(path), "--log-format", "openinference", "--query-key", key,
                      "--out", str(tmp_path / key))  # fmt: skip
        assert done.exit_code == 0, done.stderr
        got = duckdb.sql(
            f"SELECT query_id FROM '{tmp_path / key / 'queries.parquet'}' ORDER BY 1"
        ).fetchall()
        assert [q for (q,) in got] == expected


SESSION_KEY_MISSING = (
    "session.id is missing in the trace (--query-key names each trace's query): 't2'\n"
)


def session_key_refusal(path: Path, log_format: str, tmp_path: Path) -> str:
    """The one line `run --query-key session.id` refuses the export with."""
    done = invoke("run", "--log", str(path), "--log-format", log_format, "--query-key", "session.id",
                  "--out", str(tmp_path / "o"))  # fmt: skip
    return one_line_error(done)


def test_a_trace_without_its_query_key_is_refused(tmp_path: Path) -> None:
    rows = [retriever("t1", "s1", "bm25", [{ID: "a"}]) | {"attributes.session.id": "s1"},
            retriever("t2", "s2", "bm25", [{ID: "b"}]) | {"attributes.session.id": None}]  # fmt: skip
    path = write(rows, tmp_path / "spans.parquet")
    assert session_key_refusal(path, "openinference", tmp_path).endswith(
        f"row 2, span_id='s2'): {SESSION_KEY_MISSING}"
    )
    done = invoke("run", "--log", str(path), "--log-format", "openinference", "--query-key", "user.id",
                  "--out", str(tmp_path / "o"))  # fmt: skip
    assert one_line_error(done).endswith(
        "--query-key user.id: the export has no attribute user.id\n"
    )


def test_a_trace_without_its_query_key_is_told_before_its_documents_fault(tmp_path: Path) -> None:
    rows = [retriever("t1", "s1", "bm25", [{ID: "a", SCORE: 1.0}]) | {"attributes.session.id": "s1"},
            retriever("t2", "s2", "bm25", [{ID: None, SCORE: 1.0}]) | {"attributes.session.id": None}]  # fmt: skip
    path = write(rows, tmp_path / "spans.parquet")
    assert session_key_refusal(path, "openinference", tmp_path).endswith(
        f"row 2, span_id='s2'): {SESSION_KEY_MISSING}"
    )


def test_an_otlp_trace_without_its_query_key_is_refused(tmp_path: Path) -> None:
    spans = [openllmetry_span("b", "", "BM25Retriever", [page("x", id="a")])]
    spans[0]["attributes"].append(otlp_attribute("session.id", "s1"))
    spans.append(
        openllmetry_span("c", "", "BM25Retriever", [page("y", id="b")]) | {"traceId": "t2"}
    )
    path = write_otlp(spans, tmp_path / "otlp.jsonl")
    assert session_key_refusal(path, "otel-genai", tmp_path).endswith(
        f"request 1, span_id='c'): {SESSION_KEY_MISSING}"
    )


def test_a_trace_without_its_query_key_is_told_before_its_documents_faults(
    tmp_path: Path,
) -> None:
    """Both faults are the same span's: the trace's (no position) comes first."""

    def span(trace: str, documents: list[dict[str, Any]], *keys: str) -> dict[str, Any]:
        attributes = [otlp_attribute("gen_ai.operation.name", "retrieval"),
                      otlp_attribute("gen_ai.retrieval.documents", json.dumps(documents)),
                      *(otlp_attribute("session.id", key) for key in keys)]  # fmt: skip
        return {"traceId": trace, "spanId": f"s{trace}", "name": "bm25", "attributes": attributes}

    spans = [span("t1", [{"id": "a", "score": 1.0}], "s1"),
             span("t2", [{"id": "b", "score": "high"}, {"id": "c", "score": "low"}])]  # fmt: skip
    path = write_otlp(spans, tmp_path / "otlp.jsonl")
    assert session_key_refusal(path, "otel-genai", tmp_path).endswith(
        f"request 1, span_id='st2'): {SESSION_KEY_MISSING}"
    )


def test_otlp_calls_of_one_retriever_are_ordered_by_their_start(tmp_path: Path) -> None:
    """As in Phoenix's export: a span without startTimeUnixNano after those with one."""

    def call(span_id: str, start: str | None, documents: list[dict[str, Any]]) -> dict[str, Any]:
        span = openllmetry_span(span_id, "", "BM25Retriever", documents)
        if start is None:
            del span["startTimeUnixNano"]
            return span
        return span | {"startTimeUnixNano": start}

    spans = [call("s0", None, [page("x", id="a", parent_id="P0"), page("x", id="c")]),
             call("s2", "2000", [page("x", id="a", parent_id="P2"), page("x", id="e")]),
             call("s1", "1000", [page("x", id="a", parent_id="P1"), page("x", id="d")])]  # fmt: skip
    path = write_otlp(spans, tmp_path / "otlp.jsonl")
    expected = [("a", "P1", 1), ("c", "c", 4), ("d", "d", 2), ("e", "e", 3)]
    assert hits(path, "otel-genai", "item_id, parent_id, rank") == expected


def test_openllmetry_query_key_input_is_the_workflows_input(tmp_path: Path) -> None:
    spans = [{"traceId": "t1", "spanId": "w", "name": "rag.workflow", "attributes": [
                 otlp_attribute("gen_ai.task.input", json.dumps({"inputs": "the question"}))]},
             openllmetry_span("b", "w", "BM25Retriever", [page("x", id="a")])]  # fmt: skip
    path = write_otlp(spans, tmp_path / "otlp.jsonl")
    done = invoke("run", "--log", str(path), "--log-format", "otel-genai", "--query-key", "input",
                  "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert duckdb.sql(
        f"SELECT query_id FROM '{tmp_path / 'o' / 'queries.parquet'}'"
    ).fetchall() == [("the question",)]


# -- a reused --out ---------------------------------------------------------------------------


def test_a_reused_out_keeps_no_spans_parquet_of_an_earlier_trace_run(tmp_path: Path) -> None:
    """The help says the folder is replaced whole: a run on a plain log into the folder of a
    run on spans leaves no spans.parquet (export annotations would read the stale one)."""
    spans = write([retriever("t1", "s1", "bm25", [{ID: "a", SCORE: 1.0}])], tmp_path / "s.parquet")
    out = tmp_path / "out"
    assert (
        invoke(
            "run", "--log", str(spans), "--log-format", "openinference", "--out", str(out)
        ).exit_code
        == 0
    )
    assert (out / "spans.parquet").is_file()
    log = tmp_path / "log.parquet"
    pd.DataFrame({"query_id": ["q"], "source": ["s"], "item_id": ["a"], "parent_id": ["a"],
                  "score": [1.0]}).to_parquet(log)  # fmt: skip
    (out / "notes.txt").write_text("mine")
    assert invoke("run", "--log", str(log), "--out", str(out)).exit_code == 0
    assert (out / "notes.txt").read_text() == "mine"  # a user's own file stays
    assert not (out / "spans.parquet").exists()
