"""The trace fixtures made by the real instrumentations (issue 47): fixtures/traces, recorded by
tests/integrations/trace_apps.py with the producers of .venv-traces (LangChain, LlamaIndex,
OpenInference's and OpenLLMetry's instrumentations, the OpenTelemetry SDK) and a live Phoenix.

- The recorded files agree with each other: in every span file of an app (the SDK's OTLP JSON,
  the collector's, Phoenix's span DataFrame) the leaf retrievers' lists are the app's plain log,
  the oracle the trace readers' tests compare to; every query is one trace.
- The extended tier regenerates them (`make integrations`: .venv-traces and .venv-phoenix) into a
  temporary folder, against a Phoenix server of its own, and checks that the installed versions
  still make what was recorded: the same corpus, the same plain logs, and in every span file the
  same spans — per trace, each span's path of names from the root, its kind and its documents'
  ids in order. Span ids and times differ from run to run; trace ids do not (the script derives
  them from the app and the query).

Parsed here with pandas and json only: the test environment has no LangChain nor LlamaIndex.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ..helpers import FIXTURES, ROOT, need_tool
from .phoenix_server import running_phoenix

pytestmark = pytest.mark.xdist_group("trace_apps")

TRACES = FIXTURES / "traces"
SCRIPT = ROOT / "tests" / "integrations" / "trace_apps.py"
TRACES_ENV = ROOT / ".venv-traces" / "freeze.txt"  # `make integrations`: the installed producers
TRACES_PYTHON = ROOT / ".venv-traces" / "bin" / "python"
APPS = sorted(json.loads((TRACES / "VERSIONS.json").read_text())["apps"])
SPAN_FILES = ("otlp.jsonl", "collector.jsonl", "phoenix_spans.parquet")
RETRIEVAL_KINDS = ("RETRIEVER", "vector_db_retrieve")  # OpenInference's, OpenLLMetry's
REGENERATE_TIMEOUT = 1800  # seconds: six apps and a Phoenix server on a busy 2-core machine


# -- reading the span files as a user's code would ------------------------------------------------


def otlp_value(value: dict[str, Any]) -> Any:
    """An OTLP AnyValue (JSON encoding) as Python."""
    if "arrayValue" in value:
        return [otlp_value(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return {kv["key"]: otlp_value(kv["value"]) for kv in value["kvlistValue"].get("values", [])}
    if "intValue" in value:
        return int(value["intValue"])
    for key in ("stringValue", "doubleValue", "boolValue"):
        if key in value:
            return value[key]
    return None


def documents_of(attributes: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A span's documents: OpenInference's `retrieval.documents.<i>.<attribute>` gathered by
    index, or OpenLLMetry's `gen_ai.task.output` list; None for a span with neither."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith("retrieval.documents."):
            index, attribute = key.removeprefix("retrieval.documents.").split(".", 1)
            found.setdefault(int(index), {})[attribute] = value
    if found:
        return [found[i] for i in sorted(found)]
    output = attributes.get("gen_ai.task.output")
    if attributes.get("gen_ai.operation.name") == "vector_db_retrieve" and output:
        return [{"document.metadata": d["metadata"]} for d in json.loads(output)["documents"]]
    return None


def document_id(document: dict[str, Any]) -> str:
    """The document's id: its `document.id` (LlamaIndex), else its metadata's `id` (LangChain's
    documents have no id in the spans: the app puts the CISI id in the metadata)."""
    if document.get("document.id"):
        return str(document["document.id"])
    metadata = document["document.metadata"]
    return str((json.loads(metadata) if isinstance(metadata, str) else metadata)["id"])


def flat(attributes: dict[str, Any]) -> dict[str, Any]:
    """Phoenix's DataFrame nests the attributes it has no column for (OpenLLMetry's
    `attributes.gen_ai`: {'operation': {'name': …}, 'task': {'output': …}}): dotted keys again."""
    found: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, dict) and key != "retrieval.documents":
            found |= {f"{key}.{k}": v for k, v in flat(value).items()}
        else:
            found[key] = value
    return found


def spans_of(path: Path) -> pd.DataFrame:
    """One row per span: trace, span, parent, name, kind, start (ns), documents (a list of
    (id, score or None), None for a span without documents)."""
    rows = []
    if path.suffix == ".jsonl":
        for line in path.read_text(encoding="utf-8").splitlines():
            for resource in json.loads(line)["resourceSpans"]:
                for scope in resource.get("scopeSpans", []):
                    for span in scope.get("spans", []):
                        attributes = {a["key"]: otlp_value(a["value"])
                                      for a in span.get("attributes", [])}  # fmt: skip
                        rows.append(row(span["traceId"], span["spanId"], span.get("parentSpanId"),
                                        span["name"], attributes, int(span["startTimeUnixNano"]),
                                        documents_of(attributes)))  # fmt: skip
    else:
        frame = pd.read_parquet(path)
        for span in frame.astype(object).where(frame.notna(), None).to_dict("records"):
            attributes = flat({k.removeprefix("attributes."): v for k, v in span.items()
                               if k.startswith("attributes.") and v is not None})  # fmt: skip
            documents = attributes.pop("retrieval.documents", None)
            if documents is None:
                documents = documents_of(attributes)
            rows.append(row(span["context.trace_id"], span["context.span_id"], span["parent_id"],
                            span["name"], attributes, pd.Timestamp(span["start_time"]).value,
                            None if documents is None else [dict(d) for d in documents]))  # fmt: skip
    return pd.DataFrame(rows).sort_values(["trace", "start", "span"], ignore_index=True)


def row(trace: str, span: str, parent: str | None, name: str, attributes: dict[str, Any],
        start: int, documents: list[dict[str, Any]] | None) -> dict[str, Any]:  # fmt: skip
    # OpenLLMetry's operation first: Phoenix's DataFrame gives its root (invoke_agent) the
    # OpenInference kind AGENT, which the OTLP files do not hold
    kind = attributes.get("gen_ai.operation.name") or attributes.get("openinference.span.kind")
    listed = None
    if documents is not None:
        listed = [(document_id(d), d.get("document.score")) for d in documents]
    return {"trace": trace, "span": span, "parent": parent or None, "name": name,
            "kind": kind or "", "start": start, "documents": listed}  # fmt: skip


def parent_links(spans: pd.DataFrame) -> dict[str, str | None]:
    return {
        s: None if pd.isna(p) else p for s, p in zip(spans["span"], spans["parent"], strict=True)
    }


def structure(spans: pd.DataFrame) -> Counter[tuple[Any, ...]]:
    """Each span as (trace, its path of names from the root, kind, its documents' ids)."""
    names = dict(zip(spans["span"], spans["name"], strict=True))
    parents = parent_links(spans)
    found: Counter[tuple[Any, ...]] = Counter()
    for span in spans.itertuples():
        path = [span.name]
        parent = parents[span.span]
        while parent is not None:
            path.append(names[parent])
            parent = parents[parent]
        ids = None if span.documents is None else tuple(i for i, _ in span.documents)
        found[(span.trace, tuple(reversed(path)), span.kind, ids)] += 1
    return found


def leaf_lists(spans: pd.DataFrame) -> pd.DataFrame:
    """The plain log the spans hold: the lists of the retrieval spans with documents none of
    whose descendants is a retrieval span with documents (an ensemble's documents are its
    children's; LlamaIndex's `retrieve` has a `_retrieve` child without), a retriever that ran
    more than once in a trace made one list as docs/traces.md says. The source is the span's
    name; OpenLLMetry's `vector_db_retrieve <name>`: the name."""
    retrievals = spans[spans["kind"].isin(RETRIEVAL_KINDS) & spans["documents"].notna()]
    parents = parent_links(spans)
    inner = set()
    for span in retrievals["span"]:
        parent = parents[span]
        while parent is not None:
            inner.add(parent)
            parent = parents[parent]
    rows = []
    leaves = retrievals[~retrievals["span"].isin(inner)]
    for (trace, name), calls in leaves.groupby(["trace", "name"], sort=True):
        best: dict[str, tuple[int, float, int]] = {}
        for call, documents in enumerate(calls["documents"]):  # in the order they started
            for position, (item, score) in enumerate(documents, start=1):
                value = -float(position) if score is None else float(score)
                at, top, first = best.get(item, (position, value, call))
                better = (position, -value, call) < (at, -top, first)
                where = (position, call) if better else (at, first)
                best[item] = (where[0], max(top, value), where[1])
        ordered = sorted(best.items(), key=lambda kv: (kv[1][0], -kv[1][1], kv[1][2]))
        source = name.removeprefix("vector_db_retrieve ")
        rows += [{"query_id": trace, "source": source, "item_id": item, "parent_id": item,
                  "score": values[1], "rank": rank}
                 for rank, (item, values) in enumerate(ordered, start=1)]  # fmt: skip
    return pd.DataFrame(rows)


def sorted_log(log: pd.DataFrame) -> pd.DataFrame:
    columns = ["query_id", "source", "item_id", "parent_id", "score", "rank"]
    return (
        log[columns]
        .astype({"rank": "int64", "score": "float64"})
        .sort_values(["query_id", "source", "rank"], ignore_index=True)
    )


def span_files(folder: Path) -> list[Path]:
    return [folder / name for name in SPAN_FILES if (folder / name).is_file()]


# -- the recorded files agree with each other -----------------------------------------------------


@pytest.mark.parametrize("app", APPS)
def test_each_span_file_holds_the_apps_plain_log(app: str) -> None:
    """In every span file of the app, the leaf retrievers' lists are its plain log (scores to
    1e-9: Phoenix's DataFrame sends them as JSON of 10 decimals), and every query is one trace
    whose root's input is the query."""
    folder = TRACES / app
    plain = sorted_log(pd.read_parquet(folder / "plain_log.parquet"))
    traces = pd.read_parquet(folder / "traces.parquet")
    files = span_files(folder)
    assert {"otlp.jsonl", "phoenix_spans.parquet"} <= {f.name for f in files}
    for path in files:
        spans = spans_of(path)
        found = sorted_log(leaf_lists(spans))
        pd.testing.assert_frame_equal(found, plain, rtol=0, atol=1e-9, obj=str(path))
        roots = spans[spans["parent"].isna()]
        assert sorted(roots["trace"]) == sorted(traces["trace_id"]), path
    assert set(plain["query_id"]) == set(traces["trace_id"])
    assert len(traces) == len(pd.read_parquet(TRACES / "corpus" / "queries.parquet"))


def test_the_collector_file_is_the_sdk_file_in_another_key_order() -> None:
    for app in APPS:
        folder = TRACES / app
        if (folder / "collector.jsonl").is_file():
            sdk = spans_of(folder / "otlp.jsonl")
            collector = spans_of(folder / "collector.jsonl")
            pd.testing.assert_frame_equal(collector, sdk, obj=app)


# -- the extended tier: regenerated with the installed producers and a live Phoenix ---------------


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fixtures/traces made again by the script, into a temporary folder."""
    need_tool(TRACES_ENV)
    folder = tmp_path_factory.mktemp("traces")
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as phoenix:
        done = subprocess.run(
            [str(TRACES_PYTHON), str(SCRIPT), "--out", str(folder), "--phoenix", phoenix.url],
            capture_output=True, text=True, timeout=REGENERATE_TIMEOUT, cwd=ROOT,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return folder


@pytest.mark.extended
def test_the_script_makes_every_recorded_app_and_the_corpus(regenerated: Path) -> None:
    versions = json.loads((regenerated / "VERSIONS.json").read_text())
    assert sorted(versions["apps"]) == APPS
    for name in ("documents.parquet", "queries.parquet", "qrels.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(regenerated / "corpus" / name),
            pd.read_parquet(TRACES / "corpus" / name),
            obj=name,
        )
    for app in APPS:
        recorded = sorted(p.name for p in (TRACES / app).iterdir())
        assert sorted(p.name for p in (regenerated / app).iterdir()) == recorded, app


@pytest.mark.extended
@pytest.mark.parametrize("app", APPS)
def test_the_regenerated_app_logs_the_same_hits(regenerated: Path, app: str) -> None:
    for name in ("traces.parquet", "qrels.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(regenerated / app / name), pd.read_parquet(TRACES / app / name)
        )
    pd.testing.assert_frame_equal(
        sorted_log(pd.read_parquet(regenerated / app / "plain_log.parquet")),
        sorted_log(pd.read_parquet(TRACES / app / "plain_log.parquet")),
        rtol=1e-9,
        obj=f"{app}/plain_log.parquet",
    )


@pytest.mark.extended
@pytest.mark.parametrize("app", APPS)
def test_the_regenerated_spans_have_the_recorded_structure(regenerated: Path, app: str) -> None:
    """Per file: the same spans (per trace, path from the root, kind, document ids), and the
    regenerated files agree with the regenerated plain log, Phoenix's with the SDK's."""
    plain = sorted_log(pd.read_parquet(regenerated / app / "plain_log.parquet"))
    sdk = structure(spans_of(regenerated / app / "otlp.jsonl"))
    for path in span_files(TRACES / app):
        again = regenerated / app / path.name
        made = spans_of(again)
        assert structure(made) == structure(spans_of(path)), f"{app}/{path.name}"
        assert structure(made) == sdk, f"{app}/{path.name} against otlp.jsonl"
        pd.testing.assert_frame_equal(sorted_log(leaf_lists(made)), plain, rtol=0, atol=1e-9)
