"""Trace fixtures made by the real instrumentations (issue 47): small RAG retrieval apps built
with LangChain and LlamaIndex, traced the standard way, run on a corpus built from the shipped
CISI collection, their spans exported as users get them.

Run with the traces environment (`make .venv-traces/freeze.txt`, from
tests/integrations/requirements-traces.txt), from the repository's root:

    .venv-traces/bin/python tests/integrations/trace_apps.py --out fixtures/traces

It writes `corpus/` (documents, queries, judgments), `VERSIONS.json`, and one folder per app:

- `otlp.jsonl`: the spans in OTLP's JSON encoding, as the OpenTelemetry SDK's own file exporter
  writes them (`FileSpanExporter` of opentelemetry-exporter-otlp-json-file, behind a
  BatchSpanProcessor: one `{"resourceSpans": [...]}` export request per line, one line per
  batch of BATCH spans; trace and span ids in hex, enums as integers, 64-bit integers as
  strings);
- `collector.jsonl` (COLLECTOR_APPS only): the same spans as an OpenTelemetry Collector's file
  exporter writes them, the protobuf JSON mapping of the export request (`encode_spans` of
  opentelemetry-exporter-otlp-proto-common, then protobuf's `MessageToDict`), ids in hex and
  enums as integers as OTLP/JSON requires: the SDK's lines but for the order of keys;
- `phoenix_spans.parquet`: the same spans sent to a local Phoenix server over OTLP/HTTP (the
  SDK's OTLPSpanExporter), read back with Phoenix's client
  (`Client().spans.get_spans_dataframe()`) and written with `DataFrame.to_parquet`;
- `plain_log.parquet`: the oracle, the same hits as a plain retrieval_log computed from the
  lists the leaf retrievers returned inside the app (LangChain's callbacks, LlamaIndex's
  instrumentation events; never from the spans): query_id (the trace id), source (the
  retriever's name as its span names it), item_id, parent_id, score, rank;
- `traces.parquet` (trace_id, query_id: the CISI query, query_text) and `qrels.parquet` (the
  corpus judgments keyed by trace id: `query_id`, `parent_id`, `relevance`).

The apps (APPS): LangChain's EnsembleRetriever over BM25 and a TF-IDF vector store; a custom
retriever calling BM25 and TF-IDF through a RunnableParallel; MultiQueryRetriever with a fake
LLM; LlamaIndex's BM25 and vector retrievers called in turn; its QueryFusionRetriever over the
two; and the ensemble again under OpenLLMetry's instrumentation. Every query is one trace, under
a root span (a chain) whose input is the query text. No network model: fake LLMs
(FakeListLLM, MockLLM) and TF-IDF embeddings (scikit-learn) fit on the corpus.

Each app runs in its own process (an instrumentor patches the framework process-wide). Trace
ids are derived from the app and the CISI query id (sha256), so a regeneration gives the same
trace ids; span ids come from a seeded generator.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CISI = ROOT / "fixtures" / "cisi"
PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"

LAST_REQUEST = 57  # CISI's queries 1-57 are natural-language requests, 58-112 abstracts
N_QUERIES = 50  # of those, the judged ones
SUMMARY_SENTENCES = 1  # a document's text: its title and the first sentence of its abstract
SNIPPET_CHARS = 120  # that sentence cut to this many characters (the spans repeat the texts)
TOP_K = 4  # what each retriever returns (LangChain's default is 4, LlamaIndex's 2)
EMBEDDING_DIMS = 256  # the TF-IDF embedding's vocabulary (its most frequent terms)
BIAS = 0.1  # the weight of the embedding's constant dimension (the order of cosines is kept)
# spans a line of the OTLP files (OTEL_BSP_MAX_EXPORT_BATCH_SIZE; the default, 512, would put each
# app's spans on one line): a trace's spans may be on two lines, as in a long-running app's file
BATCH = 64
COLLECTOR_APPS = ("langchain_ensemble",)  # also written as a collector's file exporter writes
SOURCE_NAME = "CISI.ALL"  # the documents' metadata `source`, as a file loader sets it

APPS = {
    "langchain_ensemble": "LangChain: EnsembleRetriever over BM25Retriever and an "
    "InMemoryVectorStore retriever (TF-IDF embeddings); OpenInference instrumentation",
    "langchain_parallel": "LangChain: a custom BaseRetriever calling BM25Retriever and "
    "TFIDFRetriever through a RunnableParallel, merged by RRF; OpenInference instrumentation",
    "langchain_multiquery": "LangChain: MultiQueryRetriever (FakeListLLM writing two "
    "rephrasings, the original query included) over the vector store retriever; OpenInference",
    "llamaindex_flat": "LlamaIndex: BM25Retriever and a VectorStoreIndex retriever (TF-IDF "
    "embeddings) called in turn; OpenInference instrumentation",
    "llamaindex_fusion": "LlamaIndex: QueryFusionRetriever (reciprocal_rerank, num_queries=1, "
    "MockLLM) over the two; OpenInference instrumentation",
    "openllmetry_ensemble": "the langchain_ensemble app under OpenLLMetry's "
    "opentelemetry-instrumentation-langchain (Traceloop)",
}

# the packages that made the fixtures, recorded in VERSIONS.json
PACKAGES = (
    "langchain-core", "langchain-community", "langchain-classic", "rank-bm25",
    "openinference-instrumentation-langchain", "llama-index-core", "llama-index-retrievers-bm25",
    "bm25s", "openinference-instrumentation-llama-index", "openinference-instrumentation",
    "openinference-semantic-conventions", "opentelemetry-api", "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-json-file", "opentelemetry-exporter-otlp-json-common",
    "opentelemetry-exporter-otlp-proto-common", "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry-proto", "protobuf", "opentelemetry-instrumentation-langchain",
    "opentelemetry-semantic-conventions-ai", "scikit-learn", "arize-phoenix-client", "pandas",
    "pyarrow",
)  # fmt: skip


# -- the corpus ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    documents: list[dict[str, str]]  # id ("d28", as fixtures/cisi), text
    queries: list[dict[str, str]]  # query_id (CISI's, "28"), query_text
    qrels: list[dict[str, Any]]  # query_id, parent_id, relevance (1)


def _cisi_parser() -> Any:
    """fixtures/cisi/build_fixture.py, for its parsing and sentence splitting."""
    spec = importlib.util.spec_from_file_location("cisi_build_fixture", CISI / "build_fixture.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_corpus() -> Corpus:
    """The CISI collection's documents, each its title and the first SUMMARY_SENTENCES sentences
    of its abstract (the CISI fixture's `summary` text, shortened), and its judged
    natural-language requests: queries 1-57 (58-112 are article abstracts), of which 50 are
    judged, with their judgments."""
    cisi = _cisi_parser()
    source = CISI / "source"
    for name, digest in cisi.SOURCE_SHA256.items():
        assert cisi.sha256(source / name) == digest, f"{name}: not the shipped CISI file"
    relevant: dict[str, set[str]] = {}
    for query, doc in cisi.parse_rel(source / "CISI.REL"):
        relevant.setdefault(query, set()).add(f"d{doc}")

    documents = []
    for record in cisi.parse_smart(source / "CISI.ALL"):
        title = cisi.join_lines(record.get("T", []))
        body = cisi.join_lines(record.get("W", []))
        sentences = [] if not body or body in title else cisi.split_sentences(body)
        text = "\n".join([title, snippet(" ".join(sentences[:SUMMARY_SENTENCES]))]).strip()
        documents.append({"id": f"d{record['id']}", "text": text})
    assert len(documents) == cisi.N_DOCS

    queries = []
    for record in cisi.parse_smart(source / "CISI.QRY"):
        if int(record["id"]) <= LAST_REQUEST and record["id"] in relevant:
            text = cisi.join_lines(record.get("W", []))
            queries.append({"query_id": record["id"], "query_text": text})
    assert len(queries) == N_QUERIES, len(queries)
    assert len({q["query_text"] for q in queries}) == len(queries)  # a trace's input is its key
    qrels = [{"query_id": q["query_id"], "parent_id": d, "relevance": 1}
             for q in queries for d in sorted(relevant[q["query_id"]], key=lambda d: int(d[1:]))]  # fmt: skip
    return Corpus(documents, queries, qrels)


def snippet(text: str) -> str:
    """`text` up to SNIPPET_CHARS characters, cut after a word (with an ellipsis)."""
    if len(text) <= SNIPPET_CHARS:
        return text
    return text[: text.rindex(" ", 0, SNIPPET_CHARS)] + "\u2026"


def write_corpus(corpus: Corpus, folder: Path) -> None:
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(corpus.documents).to_parquet(folder / "documents.parquet", index=False)
    pd.DataFrame(corpus.queries).to_parquet(folder / "queries.parquet", index=False)
    pd.DataFrame(corpus.qrels).astype({"relevance": "int32"}).to_parquet(
        folder / "qrels.parquet", index=False
    )


def read_corpus(folder: Path) -> Corpus:
    import pandas as pd

    def records(name: str) -> list[dict[str, Any]]:
        return pd.read_parquet(folder / name).to_dict("records")

    return Corpus(records("documents.parquet"), records("queries.parquet"),
                  records("qrels.parquet"))  # fmt: skip


def trace_id_of(app: str, query_id: str) -> int:
    """The trace id of a query's trace in an app: 128 bits of sha256, never 0."""
    return int(hashlib.sha256(f"{app}/{query_id}".encode()).hexdigest()[:32], 16) or 1


def rephrasings(question: str) -> list[str]:
    """What the fake LLM answers MultiQueryRetriever for `question`: two rephrasings, its first
    and its last sentence (the first and second half of its words when it has one sentence)."""
    sentences = [s.strip() for s in re.split(r"(?<=[.?!])\s+", question) if s.strip()]
    if len(sentences) >= 2:
        return [sentences[0], sentences[-1]]
    words = question.split()
    half = max(1, len(words) // 2)
    return [" ".join(words[:half]), " ".join(words[half:]) or question]


# -- TF-IDF: the embedding of the vector retrievers, and LangChain's BM25 tokens ------------------


def tokens(text: str) -> list[str]:
    """The words of a text, lower-cased: what the BM25 retrievers index."""
    return re.findall(r"[a-z0-9]+", text.lower())


class Tfidf:
    """scikit-learn's TfidfVectorizer fit on the corpus, its EMBEDDING_DIMS most frequent terms,
    each vector L2-normalised: a deterministic local embedding that ranks."""

    def __init__(self, texts: Sequence[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer = TfidfVectorizer(
            stop_words="english", sublinear_tf=True, max_features=EMBEDDING_DIMS
        ).fit(texts)

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' vectors, with one more dimension of constant weight BIAS (then normalised
        again): a text of no known term is not a zero vector, which a cosine cannot take."""
        import numpy as np

        matrix = self.vectorizer.transform(list(texts)).toarray()
        matrix = np.hstack([matrix, np.full((len(matrix), 1), BIAS)])
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        return [[float(x) for x in row] for row in matrix]


# -- the oracle: the lists the leaf retrievers returned -------------------------------------------


@dataclass
class Retrieval:
    """One retriever's call: its name (as its span is named), its parent call (a run or a span
    of the framework, not of OpenTelemetry), and what it returned (item id, score or None)."""

    key: str
    name: str
    parent: str | None
    query: str
    hits: list[tuple[str, float | None]] = field(default_factory=list)


@dataclass
class Recorder:
    """The framework's own view of one query's retrievals, gathered while it runs."""

    retrievals: dict[str, Retrieval] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)  # every run or span: its parent
    order: list[str] = field(default_factory=list)  # retrievals, in the order they ended

    def leaves(self) -> list[Retrieval]:
        """The retrievals no other retrieval ran below (an ensemble's are its children's), in
        the order they ended."""
        inner: set[str] = set()
        for key in self.retrievals:
            parent = self.parents.get(key)
            while parent is not None:
                if parent in self.retrievals:
                    inner.add(parent)
                parent = self.parents.get(parent)
        return [self.retrievals[k] for k in self.order if k not in inner]


def one_list(retrievals: list[Retrieval]) -> list[tuple[str, float, int]]:
    """A retriever that ran more than once for a query (a multi-query retriever's rewrites) as
    docs/traces.md makes it one list: each document at its best position in any call, with the
    largest score any call gave it (a call without scores: -position); ordered by that position,
    then the score (higher first), then the call's order; ranked 1, 2, ... A call listing a
    document twice keeps its first."""
    best: dict[str, tuple[int, float, int]] = {}
    for call, retrieval in enumerate(retrievals):
        seen: set[str] = set()
        for position, (item, score) in enumerate(retrieval.hits, start=1):
            if item in seen:
                continue
            seen.add(item)
            value = -float(position) if score is None else score
            if item not in best:
                best[item] = (position, value, call)
            else:
                at, top, first = best[item]
                better = (position, -value, call) < (at, -top, first)
                where = (position, call) if better else (at, first)
                best[item] = (where[0], max(top, value), where[1])
    ordered = sorted(best.items(), key=lambda kv: (kv[1][0], -kv[1][1], kv[1][2]))
    return [(item, values[1], rank) for rank, (item, values) in enumerate(ordered, start=1)]


def plain_rows(trace_id: str, recorder: Recorder) -> list[dict[str, Any]]:
    """The rows of the plain retrieval_log for one trace: each leaf retriever's list (a
    retriever that ran more than once: one list)."""
    by_name: dict[str, list[Retrieval]] = {}
    for retrieval in recorder.leaves():
        by_name.setdefault(retrieval.name, []).append(retrieval)
    rows = []
    for name, retrievals in by_name.items():
        for item, score, rank in one_list(retrievals):
            rows.append({"query_id": trace_id, "source": name, "item_id": item,
                         "parent_id": item, "score": score, "rank": rank})  # fmt: skip
    return rows


# -- OpenTelemetry: the provider, the ids, the exporters ------------------------------------------


def otlp_json(request: Any) -> dict[str, Any]:
    """An ExportTraceServiceRequest in OTLP's JSON encoding, as the collector's file exporter
    writes it: the protobuf JSON mapping (lowerCamelCase names, 64-bit integers as strings,
    defaults left out) with enums as integers and trace and span ids as hex, not base64."""
    import base64

    from google.protobuf.json_format import MessageToDict

    body: dict[str, Any] = MessageToDict(request, use_integers_for_enums=True)

    def hexed(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    node[key] = base64.b64decode(value).hex()
                else:
                    hexed(value)
        elif isinstance(node, list):
            for value in node:
                hexed(value)

    hexed(body)
    return body


def collector_exporter(path: Path) -> Any:
    """A SpanExporter writing each export batch as one line of OTLP JSON, as a collector's file
    exporter does."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class OtlpJsonLines(SpanExporter):
        def __init__(self) -> None:
            self.file = path.open("a", encoding="utf-8")

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            line = json.dumps(otlp_json(encode_spans(spans)), ensure_ascii=False,
                              separators=(",", ":"))  # fmt: skip
            self.file.write(line + "\n")
            self.file.flush()
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            self.file.close()

    return OtlpJsonLines()


def tracer_provider(app: str, folder: Path, phoenix: str | None) -> tuple[Any, deque[int]]:
    """A TracerProvider exporting to `folder`/otlp.jsonl (the SDK's file exporter), for
    COLLECTOR_APPS to `folder`/collector.jsonl, and, given, to the Phoenix at `phoenix`
    (project `app`), each through a BatchSpanProcessor; and the queue of the trace ids its
    next root spans take."""
    from openinference.semconv.resource import ResourceAttributes
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    trace_ids: deque[int] = deque()
    span_ids = random.Random(app)

    class GivenTraceIds(IdGenerator):
        def generate_trace_id(self) -> int:
            return trace_ids.popleft()

        def generate_span_id(self) -> int:
            return span_ids.getrandbits(64) or 1

    resource = Resource({"service.name": f"duckscore-traces-{app}",
                         ResourceAttributes.PROJECT_NAME: app})  # fmt: skip
    provider = TracerProvider(resource=resource, id_generator=GivenTraceIds())
    batch = {"max_export_batch_size": BATCH}
    provider.add_span_processor(
        BatchSpanProcessor(FileSpanExporter(folder / "otlp.jsonl"), **batch)
    )
    if app in COLLECTOR_APPS:
        exporter = collector_exporter(folder / "collector.jsonl")
        provider.add_span_processor(BatchSpanProcessor(exporter, **batch))
    if phoenix:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{phoenix}/v1/traces")))
    return provider, trace_ids


# -- the apps --------------------------------------------------------------------------------------


def langchain_documents(corpus: Corpus) -> list[Any]:
    from langchain_core.documents import Document

    return [Document(id=d["id"], page_content=d["text"],
                     metadata={"id": d["id"], "source": SOURCE_NAME})
            for d in corpus.documents]  # fmt: skip


def langchain_recorder() -> tuple[Any, Recorder]:
    """A LangChain callback handler gathering every retriever's list into a Recorder."""
    from langchain_core.callbacks import BaseCallbackHandler

    recorder = Recorder()

    class Lists(BaseCallbackHandler):
        def _started(self, run_id: Any, parent_run_id: Any) -> None:
            recorder.parents[str(run_id)] = str(parent_run_id) if parent_run_id else None

        def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any,
                           parent_run_id: Any = None, **kwargs: Any) -> None:  # fmt: skip
            self._started(run_id, parent_run_id)

        def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any,
                         parent_run_id: Any = None, **kwargs: Any) -> None:  # fmt: skip
            self._started(run_id, parent_run_id)

        def on_retriever_start(self, serialized: Any, query: str, *, run_id: Any,
                               parent_run_id: Any = None, **kwargs: Any) -> None:  # fmt: skip
            self._started(run_id, parent_run_id)
            name = kwargs.get("name") or (serialized or {}).get("name")
            recorder.retrievals[str(run_id)] = Retrieval(
                str(run_id), name, recorder.parents[str(run_id)], query
            )

        def on_retriever_end(self, documents: Any, *, run_id: Any, **kwargs: Any) -> None:
            retrieval = recorder.retrievals[str(run_id)]
            retrieval.hits = [(d.metadata["id"], None) for d in documents]
            recorder.order.append(str(run_id))

    return Lists(), recorder


def langchain_retrievers(corpus: Corpus) -> dict[str, Any]:
    from langchain_community.retrievers import BM25Retriever, TFIDFRetriever
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    documents = langchain_documents(corpus)
    tfidf = Tfidf([d["text"] for d in corpus.documents])

    class TfidfEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return tfidf(texts)

        def embed_query(self, text: str) -> list[float]:
            return tfidf([text])[0]

    store = InMemoryVectorStore(TfidfEmbeddings())
    store.add_documents(documents)
    return {
        "bm25": BM25Retriever.from_documents(documents, k=TOP_K, preprocess_func=tokens),
        "vector": store.as_retriever(search_kwargs={"k": TOP_K}),
        "tfidf": TFIDFRetriever.from_documents(
            documents, k=TOP_K, tfidf_params={"stop_words": "english", "sublinear_tf": True}
        ),
    }


def langchain_app(app: str, corpus: Corpus) -> Any:
    """The app's retriever, under a chain named `rag` whose input is the question."""
    from langchain_core.runnables import chain

    retrievers = langchain_retrievers(corpus)
    if app in ("langchain_ensemble", "openllmetry_ensemble"):
        from langchain_classic.retrievers import EnsembleRetriever

        retriever = EnsembleRetriever(
            retrievers=[retrievers["bm25"], retrievers["vector"]], weights=[0.5, 0.5], id_key="id"
        )
    elif app == "langchain_parallel":
        retriever = hybrid_retriever(retrievers["bm25"], retrievers["tfidf"])
    elif app == "langchain_multiquery":
        from langchain_classic.retrievers import MultiQueryRetriever
        from langchain_core.language_models import FakeListLLM

        def multi_query(question: str) -> Any:
            """The retriever with a fake LLM that knows the question's rephrasings (one
            FakeListLLM a question: its invocation parameters, which the spans record, hold
            its responses)."""
            llm = FakeListLLM(responses=["\n".join(rephrasings(question))])
            return MultiQueryRetriever.from_llm(
                retriever=retrievers["vector"], llm=llm, include_original=True
            )
    else:
        raise ValueError(app)

    @chain
    def rag(question: str) -> list[Any]:
        found: list[Any]
        if app == "langchain_multiquery":
            found = multi_query(question).invoke(question)
        else:
            found = retriever.invoke(question)
        return found

    return rag


def hybrid_retriever(bm25: Any, tfidf: Any) -> Any:
    """A custom retriever: BM25 and TF-IDF run through a RunnableParallel, their lists merged
    by reciprocal rank (k = 60), ties by id."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableParallel

    class HybridRetriever(BaseRetriever):
        k: int = TOP_K

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            both = RunnableParallel(bm25=bm25, tfidf=tfidf)
            lists = both.invoke(query, config={"callbacks": run_manager.get_child()})
            fused: dict[str, float] = {}
            by_id: dict[str, Document] = {}
            for documents in lists.values():
                for rank, document in enumerate(documents, start=1):
                    key = document.metadata["id"]
                    fused[key] = fused.get(key, 0.0) + 1.0 / (60 + rank)
                    by_id.setdefault(key, document)
            ordered = sorted(fused, key=lambda key: (-fused[key], key))
            return [by_id[key] for key in ordered[: self.k]]

    return HybridRetriever()


def llamaindex_recorder() -> tuple[Any, Recorder]:
    """A LlamaIndex event handler gathering every retriever's list into a Recorder: its span
    ids (`BM25Retriever.retrieve-<uuid>`) name the calls, a retrieval started inside another is
    its child (the apps retrieve synchronously)."""
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events.retrieval import (
        RetrievalEndEvent,
        RetrievalStartEvent,
    )

    recorder = Recorder()
    open_calls: list[str] = []

    class Lists(BaseEventHandler):
        @classmethod
        def class_name(cls) -> str:
            return "DuckscoreLists"

        def handle(self, event: Any, **kwargs: Any) -> None:
            key = str(event.span_id)
            if isinstance(event, RetrievalStartEvent):
                parent = open_calls[-1] if open_calls else None
                recorder.parents[key] = parent
                query = event.str_or_query_bundle
                text = query if isinstance(query, str) else query.query_str
                recorder.retrievals[key] = Retrieval(
                    key, key.split("-", maxsplit=1)[0], parent, text
                )
                open_calls.append(key)
            elif isinstance(event, RetrievalEndEvent):
                assert open_calls and open_calls[-1] == key, (open_calls, key)
                open_calls.pop()
                recorder.retrievals[key].hits = [(n.node.node_id, n.score) for n in event.nodes]
                recorder.order.append(key)

    return Lists(), recorder


def llamaindex_app(app: str, corpus: Corpus, provider: Any) -> Any:
    """A function of the question running the app's retrievals under a root span `rag` (a
    chain, its input the question), with OpenInference's tracer as Phoenix's docs show."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever
    from openinference.instrumentation import OITracer, TraceConfig
    from pydantic import PrivateAttr

    tfidf = Tfidf([d["text"] for d in corpus.documents])

    class TfidfEmbedding(BaseEmbedding):
        _tfidf: Tfidf = PrivateAttr()

        def __init__(self, model: Tfidf) -> None:
            super().__init__(model_name="tfidf")
            self._tfidf = model

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._tfidf([query])[0]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._tfidf([text])[0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    nodes = [TextNode(id_=d["id"], text=d["text"], metadata={"source": SOURCE_NAME})
             for d in corpus.documents]  # fmt: skip
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=TOP_K)
    index = VectorStoreIndex(nodes, embed_model=TfidfEmbedding(tfidf))
    vector = index.as_retriever(similarity_top_k=TOP_K)
    if app == "llamaindex_flat":
        retrievers = [bm25, vector]
    elif app == "llamaindex_fusion":
        fusion = QueryFusionRetriever([bm25, vector], similarity_top_k=TOP_K, num_queries=1,
                                      mode="reciprocal_rerank", use_async=False, llm=MockLLM())  # fmt: skip
        retrievers = [fusion]
    else:
        raise ValueError(app)
    tracer = OITracer(provider.get_tracer("duckscore.trace_apps"), config=TraceConfig())

    def rag(question: str) -> list[Any]:
        with tracer.start_as_current_span("rag", openinference_span_kind="chain") as span:
            span.set_input(question)
            found = [node for retriever in retrievers for node in retriever.retrieve(question)]
            span.set_output(json.dumps([n.node.node_id for n in found]))
            return found

    return rag


def run_app(app: str, corpus: Corpus, folder: Path, phoenix: str | None) -> None:
    """Run `app` on every query, traced; write its spans (otlp.jsonl, and to Phoenix), its
    plain log, its traces and its judgments to `folder`."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    for name in ("otlp.jsonl", "collector.jsonl"):  # the exporters append
        (folder / name).unlink(missing_ok=True)
    provider, trace_ids = tracer_provider(app, folder, phoenix)
    if app.startswith("llamaindex"):
        from llama_index.core.instrumentation import get_dispatcher
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        rag = llamaindex_app(app, corpus, provider)  # the index is built before instrumenting
        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
        handler, recorder = llamaindex_recorder()
        get_dispatcher().add_event_handler(handler)

        def ask(question: str) -> None:
            rag(question)
    else:
        rag = langchain_app(app, corpus)
        if app.startswith("openllmetry"):
            from opentelemetry.instrumentation.langchain import LangchainInstrumentor

            LangchainInstrumentor().instrument(tracer_provider=provider)
        else:
            from openinference.instrumentation.langchain import LangChainInstrumentor

            LangChainInstrumentor().instrument(tracer_provider=provider)
        handler, recorder = langchain_recorder()

        def ask(question: str) -> None:
            rag.invoke(question, config={"callbacks": [handler]})

    rows: list[dict[str, Any]] = []
    traces = []
    for query in corpus.queries:
        trace_id = trace_id_of(app, query["query_id"])
        trace_ids.append(trace_id)
        recorder.retrievals.clear()
        recorder.parents.clear()
        recorder.order.clear()
        ask(query["query_text"])
        assert not trace_ids, f"{app}: query {query['query_id']} started no trace"
        hex_id = format(trace_id, "032x")
        traces.append({"trace_id": hex_id} | query)
        rows += plain_rows(hex_id, recorder)
    provider.shutdown()

    plain = pd.DataFrame(rows).astype({"score": "float64", "rank": "int32"})
    plain.to_parquet(folder / "plain_log.parquet", index=False)
    traced = pd.DataFrame(traces)
    traced.to_parquet(folder / "traces.parquet", index=False)
    qrels = pd.DataFrame(corpus.qrels).merge(traced[["trace_id", "query_id"]], on="query_id")
    qrels = qrels[["trace_id", "parent_id", "relevance"]].rename(columns={"trace_id": "query_id"})
    qrels.astype({"relevance": "int32"}).to_parquet(folder / "qrels.parquet", index=False)


# -- Phoenix ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def running_phoenix(folder: Path) -> Iterator[str]:
    """`phoenix serve` of .venv-phoenix on 127.0.0.1, its database in `folder`, offline (as
    tests/integrations/phoenix_server.py starts it); its URL, and stopped at the end."""
    import httpx

    if not PHOENIX.is_file():
        raise SystemExit(f"{PHOENIX.relative_to(ROOT)} is missing: make .venv-phoenix/bin/phoenix")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHOENIX_")} | {
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(folder / "working"),
        "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{folder / 'phoenix.db'}",
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    }
    url = f"http://127.0.0.1:{port}"
    with (folder / "phoenix.log").open("wb") as log:
        process = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder)  # fmt: skip
        try:
            deadline = time.monotonic() + 180
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"phoenix serve did not start: see {folder / 'phoenix.log'}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200:
                        break
                time.sleep(0.25)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


def spans_in_otlp(path: Path) -> int:
    return sum(len(scope.get("spans", []))
               for line in path.read_text().splitlines()
               for resource in json.loads(line)["resourceSpans"]
               for scope in resource.get("scopeSpans", []))  # fmt: skip


def phoenix_export(url: str, app: str, count: int, path: Path, timeout: float = 120.0) -> None:
    """Phoenix's span DataFrame of project `app` once it holds all `count` spans, as Parquet."""
    import httpx
    from phoenix.client import Client

    client = Client(base_url=url)
    deadline = time.monotonic() + timeout
    spans = None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPStatusError):  # the project is not created yet
            spans = client.spans.get_spans_dataframe(project_identifier=app, limit=count + 1000)
            if len(spans) >= count:
                break
        time.sleep(0.5)
    stored = 0 if spans is None else len(spans)
    assert spans is not None and stored == count, f"Phoenix holds {stored} of {app}'s {count}"
    spans.to_parquet(path)


# -- the command -----------------------------------------------------------------------------------


def versions() -> dict[str, Any]:
    found = {}
    for name in PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    phoenix = None
    if PHOENIX.is_file():
        done = subprocess.run([str(PHOENIX.parent / "python"), "-c",
                               "import importlib.metadata as m; print(m.version('arize-phoenix'))"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        phoenix = done.stdout.strip() or None
    return {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "packages": found,
        "phoenix_server": {"arize-phoenix": phoenix},
        "command": "make .venv-traces/freeze.txt .venv-phoenix/bin/phoenix && "
        ".venv-traces/bin/python tests/integrations/trace_apps.py --out fixtures/traces",
    }


def record(out: Path, apps: Sequence[str], phoenix: str) -> None:
    """The corpus, then each app in a process of its own, then Phoenix's exports."""
    corpus = build_corpus()
    write_corpus(corpus, out / "corpus")
    with contextlib.ExitStack() as stack:
        url = None
        if phoenix == "start":
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="phoenix-")))
            url = stack.enter_context(running_phoenix(folder))
        elif phoenix != "none":
            url = phoenix.rstrip("/")
        for app in apps:
            began = time.monotonic()
            command = [sys.executable, __file__, "app", app, "--out", str(out)]
            subprocess.run(command + (["--phoenix", url] if url else []), check=True)
            print(f"{app}: {time.monotonic() - began:.1f} s", flush=True)
        if url:
            for app in apps:
                count = spans_in_otlp(out / app / "otlp.jsonl")
                phoenix_export(url, app, count, out / app / "phoenix_spans.parquet")
    written = versions() | {"apps": {app: APPS[app] for app in apps}}
    (out / "VERSIONS.json").write_text(json.dumps(written, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "fixtures" / "traces")
    parser.add_argument("--apps", nargs="+", choices=list(APPS), default=list(APPS))
    parser.add_argument("--phoenix", default="start",
                        help="'start' (a server from .venv-phoenix), a server's URL, or 'none'")  # fmt: skip
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("app", help="run one app (record runs each in a process of its own)")
    one.add_argument("app", choices=list(APPS))
    one.add_argument("--out", type=Path, required=True)
    one.add_argument("--phoenix", default=None)
    args = parser.parse_args(argv)
    if args.command == "app":
        run_app(args.app, read_corpus(args.out / "corpus"), args.out / args.app, args.phoenix)
    else:
        record(args.out, args.apps, args.phoenix)


if __name__ == "__main__":
    main()
