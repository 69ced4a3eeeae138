"""`duckscore pull` keeps the hierarchy (issue 47 §2): the spans between a retrieval span and
its trace's root (a LangChain RunnableParallel between a custom retriever and the retrievers it
calls) are pulled with it, so that pull → run decides as Phoenix's full export of the project
does — the custom retriever left out as a nested retriever, not counted as a third source.

Phoenix is stood in for by a client of the same calls (`spans.get_spans` with its filters,
`projects.get`), holding spans in Phoenix's v1.Span shape; the live server is
tests/integrations/test_phoenix.py's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from phoenix.client.exceptions import PhoenixException

from duckscore.phoenix import pull

from .test_traces import invoke

BASE = 1_764_000_000  # seconds


def v1_span(trace: str, span_id: str, parent: str | None, name: str, kind: str, at: int,
            documents: list[tuple[str, float]] | None = None) -> dict[str, Any]:  # fmt: skip
    """A span as Phoenix's REST API gives it, `at` seconds after BASE (a document's metadata
    flattened, as Phoenix flattens it)."""
    attributes: dict[str, Any] = {"openinference.span.kind": kind, "input.value": "q"}
    for i, (doc, score) in enumerate(documents or []):
        attributes |= {f"retrieval.documents.{i}.document.id": doc,
                       f"retrieval.documents.{i}.document.score": score,
                       f"retrieval.documents.{i}.document.metadata.parent_id": doc[0]}  # fmt: skip
    time = f"2025-11-24T16:00:{at:02d}+00:00"
    return {"name": name, "context": {"trace_id": trace, "span_id": span_id}, "parent_id": parent,
            "span_kind": kind, "start_time": time, "end_time": time, "status_code": "OK",
            "attributes": attributes}  # fmt: skip


# a custom retriever (hybrid) calling two retrievers through a chain (parallel), twice
PROJECT = [
    span
    for t, at in (("t1", 0), ("t2", 20))
    for span in (
        v1_span(t, f"{t}-root", None, "rag", "CHAIN", at),
        v1_span(t, f"{t}-hybrid", f"{t}-root", "HybridRetriever", "RETRIEVER", at + 1,
                [("a1", 0.03), ("b1", 0.02), ("c1", 0.01)]),
        v1_span(t, f"{t}-parallel", f"{t}-hybrid", "RunnableParallel<bm25,tfidf>", "CHAIN", at + 2),
        v1_span(t, f"{t}-bm25", f"{t}-parallel", "BM25Retriever", "RETRIEVER", at + 3, [("a1", 3.0), ("b1", 1.0)]),
        v1_span(t, f"{t}-tfidf", f"{t}-parallel", "TFIDFRetriever", "RETRIEVER", at + 4, [("c1", 0.9), ("a1", 0.5)]),
        v1_span(t, f"{t}-llm", f"{t}-root", "answer", "LLM", at + 5),
    )
]  # fmt: skip


class Spans:
    def __init__(self, spans: list[dict[str, Any]], by_id: bool) -> None:
        self.spans, self.by_id, self.asked = spans, by_id, []

    def get_spans(self, *, project_identifier: str, limit: int, timeout: int, start_time: Any = None,
                  end_time: Any = None, span_kind: str | None = None, parent_id: str | None = None,
                  span_ids: list[str] | None = None, trace_ids: list[str] | None = None) -> list[dict[str, Any]]:  # fmt: skip
        self.asked.append({"span_ids": span_ids, "trace_ids": trace_ids})
        if span_ids is not None and not self.by_id:
            raise PhoenixException(
                "GET /v1/projects/{project}/spans span_ids requires Phoenix >= 19.6.0"
            )
        found = [
            s for s in self.spans
            if (span_kind is None or s["span_kind"] == span_kind)
            and (parent_id is None or (parent_id == "null" and s["parent_id"] is None))
            and (span_ids is None or s["context"]["span_id"] in span_ids)
            and (trace_ids is None or s["context"]["trace_id"] in trace_ids)
            and (start_time is None or s["start_time"] >= start_time.isoformat())
        ]  # fmt: skip
        return found[:limit]


class Client:
    def __init__(self, spans: list[dict[str, Any]], by_id: bool = True) -> None:
        self.spans = Spans(spans, by_id)
        self.projects = self

    def get(self, project_name: str) -> None:
        return None


def pulled(monkeypatch: pytest.MonkeyPatch, tmp: Path, client: Client, *args: str) -> Path:
    monkeypatch.setattr(pull, "phoenix_client", lambda url, option: client)
    out = tmp / "pulled.parquet"
    done = invoke(
        "pull", "--from", "http://phoenix.test", "--project", "rag", "--out", str(out), *args
    )
    assert done.exit_code == 0, done.stderr
    return out


def full_export(tmp: Path) -> Path:
    """Every span of the project, as Phoenix's span DataFrame holds them."""
    frame = pull.export_frame([dict(s) for s in PROJECT])
    frame.to_parquet(tmp / "full.parquet", index=False)
    return tmp / "full.parquet"


def decided(log: Path, tmp: Path, name: str) -> Path:
    done = invoke(
        "run", "--log", str(log), "--log-format", "openinference", "--out", str(tmp / name)
    )
    assert done.exit_code == 0, done.stderr
    return tmp / name


@pytest.mark.parametrize("by_id", [True, False])
def test_pull_keeps_the_spans_between_two_retrievers(
    by_id: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The chain between the custom retriever and its retrievers is pulled (by span id, or,
    from a server older than that filter, read from its trace), and pull → run decides as the
    full export does: the custom retriever is no source."""
    client = Client(PROJECT, by_id)
    spans = pulled(monkeypatch, tmp_path, client)
    names = duckdb.sql(f"SELECT DISTINCT name FROM '{spans}' ORDER BY 1").fetchall()
    assert [n for (n,) in names] == ["BM25Retriever", "HybridRetriever", "RunnableParallel<bm25,tfidf>",
                                     "TFIDFRetriever", "rag"]  # fmt: skip
    asked = [a for a in client.spans.asked if a["span_ids"] or a["trace_ids"]]
    assert asked[0]["span_ids"] == ["t1-parallel", "t2-parallel"]  # the spans between, by id
    assert [a["trace_ids"] for a in asked[1:]] == ([] if by_id else [["t1", "t2"]])
    a, b = decided(spans, tmp_path, "pulled"), decided(full_export(tmp_path), tmp_path, "full")
    for name in ("fused.parquet", "parents.parquet", "queries.parquet", "spans.parquet"):
        assert (
            duckdb.sql(f"FROM '{a / name}'").fetchall()
            == duckdb.sql(f"FROM '{b / name}'").fetchall()
        ), name
    sources = json.loads((a / "manifest.json").read_text())["sources"]
    assert sorted(sources) == ["BM25Retriever", "TFIDFRetriever"]


def test_the_spans_between_are_pulled_whenever_they_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A window that starts after the custom retriever and the chain started still pulls them
    with the retrievers it holds: they are fetched by id, not by time."""
    client = Client(PROJECT)
    spans = pulled(monkeypatch, tmp_path, client, "--start", "2025-11-24T16:00:23+00:00")
    ids = duckdb.sql(f"SELECT \"context.span_id\" FROM '{spans}' ORDER BY 1").fetchall()
    assert [i for (i,) in ids] == ["t2-bm25", "t2-hybrid", "t2-parallel", "t2-root", "t2-tfidf"]


def test_more_spans_between_than_max_spans_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(pull, "phoenix_client", lambda url, option: Client(PROJECT))
    done = invoke("pull", "--from", "http://phoenix.test", "--project", "rag", "--max-spans", "8",
                  "--out", str(tmp_path / "p.parquet"))  # fmt: skip
    assert done.exit_code == 2 and "project 'rag' has more than 8 spans" in done.stderr, done.stderr
    assert not (tmp_path / "p.parquet").exists()
