"""The round trip with a real Phoenix (issue 36): spans sent to a running `phoenix serve` through
OpenTelemetry's OTLP exporter, `duckscore pull` reads them back, `duckscore run` decides them,
`duckscore export annotations --to` posts the decisions, and Phoenix's own API reads them back.

The oracle is the file path: the same spans, written as Phoenix's span export by the test (never
through Phoenix), run with `--log-format openinference`. The pulled path must decide exactly as
it does, and the annotations Phoenix holds must be those `export annotations --out` writes for
it — on the span, and on the trace. Posting again updates and never adds; the window and the
project select the spans; an unreachable server, an unknown project, a window without spans and
spans Phoenix does not hold are one line, with nothing written.

One server for the module (about 12 s to start, on a fresh SQLite database), all tests on one
xdist worker.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pandas as pd
import pytest
from click.testing import Result
from phoenix.client import Client

from ..fuse.test_traces import DOCUMENTS, KIND, invoke, scifact_slice, spans_of
from ..helpers import ROOT
from ..project.test_docs import blocks, environment, matches
from .phoenix_server import PhoenixServer, free_port, running_phoenix, send_spans

pytestmark = [pytest.mark.extended, pytest.mark.xdist_group("phoenix")]

METADATA = "document.metadata"

MORNING = pd.Timestamp("2025-03-01T10:00:00Z")  # the first six traces of project rag
AFTERNOON = pd.Timestamp("2025-03-01T14:00:00Z")  # the other six
NAMES = (
    "duckscore.confidence",
    "duckscore.need_hitl",
    "duckscore.web_fallback",
    "duckscore.risk_flags",
)


def hex_id(name: str, digits: int) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:digits]


def as_sent(spans: pd.DataFrame, project: str, starts: dict[str, pd.Timestamp]) -> pd.DataFrame:
    """The fixtures' spans with OpenTelemetry's ids (hex, unique to `project`) and start times:
    a trace from its start in `starts`, its spans 10 ms apart in their order."""
    trace = {t: hex_id(f"{project}/{t}", 32) for t in spans["context.trace_id"].unique()}
    span = {s: hex_id(f"{project}/{s}", 16) for s in spans["context.span_id"]}
    sent = spans.assign(
        **{
            "context.trace_id": spans["context.trace_id"].map(trace),
            "context.span_id": spans["context.span_id"].map(span),
            "parent_id": spans["parent_id"].map(span),
        }
    )
    step = spans.groupby("context.trace_id").cumcount() * pd.Timedelta(milliseconds=10)
    sent["start_time"] = spans["context.trace_id"].map(starts) + step
    return sent


def with_a_rewrite(spans: pd.DataFrame) -> pd.DataFrame:
    """The first trace's first retriever run once more on a rewritten query, its documents in
    reverse order (a multi-query retriever: the order of its spans breaks ties)."""
    first = spans[spans[KIND] == "RETRIEVER"].iloc[0]
    again = first.copy()
    again["context.span_id"] = f"{first['context.span_id']}-rewrite"
    again[DOCUMENTS] = list(reversed(first[DOCUMENTS]))
    at = int(spans.index.get_loc(first.name)) + 1
    return pd.concat([spans.iloc[:at], again.to_frame().T, spans.iloc[at:]], ignore_index=True)


@dataclass(frozen=True)
class Sent:
    rag: pd.DataFrame  # the spans of project rag, as sent
    other: pd.DataFrame  # those of project other
    morning: set[str]  # rag's traces that started at 10:00
    afternoon: set[str]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.fixture(scope="module")
def sent(phoenix: PhoenixServer) -> Sent:
    log = scifact_slice()
    queries = sorted(log["query_id"].unique())
    spans = with_a_rewrite(spans_of(log))
    starts = {f"trace-{q}": MORNING if i < 6 else AFTERNOON for i, q in enumerate(queries)}
    rag = as_sent(spans, "rag", starts)
    other = as_sent(spans[spans["context.trace_id"].isin(list(starts)[:3])], "other", starts)
    send_spans(phoenix, "rag", rag)
    send_spans(phoenix, "other", other)
    traces = rag.groupby("context.trace_id")["start_time"].min()
    return Sent(
        rag, other, set(traces[traces < AFTERNOON].index), set(traces[traces >= AFTERNOON].index)
    )


@pytest.fixture(scope="module")
def oracle(sent: Sent, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`duckscore run` on rag's spans written straight to a file, and its annotations file."""
    folder = tmp_path_factory.mktemp("oracle")
    sent.rag.drop(columns="start_time").to_parquet(folder / "spans.parquet", index=False)
    ok(invoke("run", "--log", str(folder / "spans.parquet"), "--log-format", "openinference",
              "--out", str(folder / "scored")))  # fmt: skip
    ok(invoke("export", "annotations", "--scored", str(folder / "scored"),
              "--out", str(folder / "annotations.json")))  # fmt: skip
    return folder


def ok(done: Result) -> Result:
    assert done.exit_code == 0, (done.exit_code, done.stderr, done.exception)
    return done


def one_line_error(done: Result, *parts: str) -> None:
    assert done.exit_code == 2, (done.exit_code, done.stderr, done.exception)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("duckscore: error: "), (
        done.stderr
    )
    for part in parts:
        assert part in done.stderr, done.stderr


def pull(phoenix: PhoenixServer, out: Path, *extra: str, project: str = "rag") -> Result:
    return invoke("pull", "--from", phoenix.url, "--project", project, "--out", str(out), *extra)


def scored_from_phoenix(phoenix: PhoenixServer, folder: Path, suffix: str = ".parquet") -> Path:
    pulled = folder / f"pulled{suffix}"
    ok(pull(phoenix, pulled))
    ok(invoke("run", "--log", str(pulled), "--log-format", "openinference",
              "--out", str(folder / "scored")))  # fmt: skip
    return folder / "scored"


def spans_in(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()])


def table(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


# -- pull: the spans, and the decisions they make ------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_pulled_spans_decide_as_the_spans_written_to_a_file(
    phoenix: PhoenixServer, sent: Sent, oracle: Path, suffix: str, tmp_path: Path
) -> None:
    scored = scored_from_phoenix(phoenix, tmp_path, suffix)
    expected = oracle / "scored"
    assert (scored / "contract.jsonl").read_bytes() == (expected / "contract.jsonl").read_bytes()
    for name in ("queries.parquet", "parents.parquet", "fused.parquet", "spans.parquet"):
        pd.testing.assert_frame_equal(table(scored / name), table(expected / name), obj=name)
    pulled = spans_in(tmp_path / f"pulled{suffix}")
    wanted = sent.rag[(sent.rag[KIND] == "RETRIEVER") | sent.rag["parent_id"].isna()]
    assert sorted(pulled["context.span_id"]) == sorted(
        wanted["context.span_id"]
    )  # no LLM, no reranker
    assert list(pulled["context.trace_id"]) == sorted(pulled["context.trace_id"])


def test_the_documents_are_those_sent_their_metadata_json_text(
    phoenix: PhoenixServer, sent: Sent, tmp_path: Path
) -> None:
    ok(pull(phoenix, tmp_path / "pulled.parquet"))
    pulled = pd.read_parquet(tmp_path / "pulled.parquet").set_index("context.span_id")
    for span in sent.rag[sent.rag[KIND] == "RETRIEVER"].to_dict("records"):
        documents = [dict(d) for d in pulled.loc[span["context.span_id"], DOCUMENTS]]
        assert all(isinstance(d[METADATA], str) for d in documents)
        assert [d | {METADATA: json.loads(d[METADATA])} for d in documents] == [
            d | {METADATA: json.loads(d[METADATA])} for d in span[DOCUMENTS]
        ]


# -- export annotations --to: the decisions in Phoenix ------------------------------------------


def span_annotations(phoenix: PhoenixServer, span_ids: list[str]) -> list[dict[str, Any]]:
    """The span annotations Phoenix holds on `span_ids`, read through its client."""
    found = Client(base_url=phoenix.url).spans.get_span_annotations(
        span_ids=span_ids, project_identifier="rag"
    )
    return [dict(a) for a in found]


def trace_annotations(phoenix: PhoenixServer, trace_ids: list[str]) -> list[dict[str, Any]]:
    """The trace annotations Phoenix holds on `trace_ids`, read through its REST API."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"trace_ids": trace_ids, "limit": 100}
        params |= {"cursor": cursor} if cursor else {}
        response = httpx.get(f"{phoenix.url}/v1/projects/rag/trace_annotations", params=params)
        response.raise_for_status()
        body = response.json()
        found += body["data"]
        if not (cursor := body.get("next_cursor")):
            return found


def held(phoenix: PhoenixServer, oracle: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What Phoenix holds on the spans and the traces the oracle's annotations are on."""
    expected = json.loads((oracle / "annotations.json").read_text())["data"]
    spans = sorted({a["span_id"] for a in expected})
    traces = sorted({a["metadata"]["query_id"] for a in expected})
    return span_annotations(phoenix, spans), trace_annotations(phoenix, traces)


def comparable(annotation: dict[str, Any], on: str) -> tuple[Any, ...]:
    """An annotation as posted: its target, name, result (no nulls), metadata, identifier."""
    result = {k: v for k, v in annotation["result"].items() if v is not None}
    return (annotation[on], annotation["name"], annotation["annotator_kind"], json.dumps(result, sort_keys=True),
            json.dumps(annotation["metadata"], sort_keys=True), annotation["identifier"])  # fmt: skip


def post(phoenix: PhoenixServer, scored: Path) -> Result:
    return ok(
        invoke(
            "--no-progress", "export", "annotations", "--scored", str(scored), "--to", phoenix.url
        )
    )


def test_the_decisions_are_posted_on_each_span_and_each_trace(
    phoenix: PhoenixServer, sent: Sent, oracle: Path, tmp_path: Path
) -> None:
    scored = scored_from_phoenix(phoenix, tmp_path)
    post(phoenix, scored)
    expected = json.loads((oracle / "annotations.json").read_text())["data"]
    on_spans, on_traces = held(phoenix, oracle)
    assert sorted(comparable(a, "span_id") for a in on_spans) == sorted(
        comparable(a, "span_id") for a in expected
    )
    as_traces = [{"trace_id": a["metadata"]["query_id"]} | a for a in expected]
    assert sorted(comparable(a, "trace_id") for a in on_traces) == sorted(
        comparable(a, "trace_id") for a in as_traces
    )
    decided = table(oracle / "scored" / "queries.parquet").set_index("query_id")
    confidence = {a["trace_id"]: a["result"]["label"] for a in on_traces if a["name"] == NAMES[0]}
    assert confidence == decided["confidence_level"].to_dict()
    assert len(confidence) == sent.rag["context.trace_id"].nunique() == 12
    roots = set(sent.rag.loc[sent.rag["parent_id"].isna(), "context.span_id"])
    assert {a["span_id"] for a in on_spans} == roots


def edited(scored: Path, folder: Path, trace: str) -> Path:
    """A copy of the run folder `scored` whose decision on `trace` is high, at 0.99."""
    copy = folder / "edited"
    shutil.copytree(scored, copy)
    queries = copy / "queries.parquet"
    duckdb.sql(
        f"COPY (SELECT * REPLACE ("
        f"CASE WHEN query_id = '{trace}' THEN 'high' ELSE confidence_level END AS confidence_level, "
        f"CASE WHEN query_id = '{trace}' THEN 0.99 ELSE best_overall_score END AS best_overall_score)"
        f" FROM '{scored / 'queries.parquet'}') TO '{queries}' (FORMAT parquet)"
    )
    return copy


def values(annotations: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(comparable(a, "span_id" if "span_id" in a else "trace_id") for a in annotations)


def test_posting_again_updates_the_annotations_and_never_adds_one(
    phoenix: PhoenixServer, sent: Sent, oracle: Path, tmp_path: Path
) -> None:
    scored = scored_from_phoenix(phoenix, tmp_path)
    post(phoenix, scored)
    first = [*held(phoenix, oracle)[0], *held(phoenix, oracle)[1]]
    assert len(first) == 2 * len(NAMES) * 12  # each per trace, on its span and on the trace
    ids = sorted(a["id"] for a in first)

    post(phoenix, scored)
    again = [*held(phoenix, oracle)[0], *held(phoenix, oracle)[1]]
    assert sorted(a["id"] for a in again) == ids and values(again) == values(first)

    trace = sorted(sent.morning)[0]
    post(phoenix, edited(scored, tmp_path, trace))
    changed = [*held(phoenix, oracle)[0], *held(phoenix, oracle)[1]]
    assert sorted(a["id"] for a in changed) == ids  # the same annotations, updated in place
    edits = [a for a in changed if a["metadata"]["query_id"] == trace and a["name"] == NAMES[0]]
    assert len(edits) == 2  # the span's and the trace's
    for annotation in edits:
        assert (annotation["result"]["label"], annotation["result"]["score"]) == ("high", 0.99)
        assert annotation["metadata"]["best_overall_score"] == 0.99
    # the trace's annotations (their metadata hold the score), on the span and the trace
    assert len(set(values(changed)) - set(values(first))) == 2 * len(NAMES)

    post(phoenix, scored)  # the run's own decisions again
    assert values([*held(phoenix, oracle)[0], *held(phoenix, oracle)[1]]) == values(first)


# -- what is pulled: the project and the window ---------------------------------------------------


def traces_in(path: Path) -> set[str]:
    return set(spans_in(path)["context.trace_id"])


def test_the_project_and_the_window_select_the_spans(
    phoenix: PhoenixServer, sent: Sent, tmp_path: Path
) -> None:
    ok(pull(phoenix, tmp_path / "other.parquet", project="other"))
    assert traces_in(tmp_path / "other.parquet") == set(sent.other["context.trace_id"])
    assert not traces_in(tmp_path / "other.parquet") & set(sent.rag["context.trace_id"])
    ok(pull(phoenix, tmp_path / "afternoon.parquet", "--start", "2025-03-01T12:00:00Z"))
    assert traces_in(tmp_path / "afternoon.parquet") == sent.afternoon
    ok(pull(phoenix, tmp_path / "morning.parquet", "--start", "2025-03-01T11:00:00+01:00",
            "--end", "2025-03-01T12:00:00"))  # fmt: skip
    assert traces_in(tmp_path / "morning.parquet") == sent.morning


# -- refusals: one line, nothing written ----------------------------------------------------------


def test_what_cannot_be_pulled_is_one_line_and_writes_nothing(
    phoenix: PhoenixServer, sent: Sent, tmp_path: Path
) -> None:
    out = tmp_path / "spans.parquet"
    nowhere = f"http://127.0.0.1:{free_port()}"
    one_line_error(
        invoke("pull", "--from", nowhere, "--out", str(out)),
        f"--from {nowhere}: cannot reach Phoenix",
    )
    one_line_error(pull(phoenix, out, project="nope"),
                   f"--from {phoenix.url}: Phoenix has no project 'nope' (its projects: default, ")  # fmt: skip
    one_line_error(pull(phoenix, out, "--start", "2030-01-01"),
                   f"--from {phoenix.url}: project 'rag' has no retrieval span (from 2030-01-01T00:00:00+00:00)")  # fmt: skip
    one_line_error(pull(phoenix, out, "--max-spans", "10"), "project 'rag' has more than 10 spans")
    one_line_error(
        pull(phoenix, out, "--start", "2025-03-02", "--end", "2025-03-01"), "is not before --end"
    )
    one_line_error(
        pull(phoenix, tmp_path / "spans.csv"), "spans are written as Parquet or JSON Lines"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_what_cannot_be_posted_is_one_line(
    phoenix: PhoenixServer, oracle: Path, tmp_path: Path
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    scored = str(oracle / "scored")
    one_line_error(invoke("export", "annotations", "--scored", scored, "--to", nowhere),
                   f"--to {nowhere}: cannot reach Phoenix")  # fmt: skip
    unknown = tmp_path / "unknown.parquet"
    spans = pd.read_parquet(oracle / "spans.parquet")
    spans.assign(**{"context.span_id": spans["context.span_id"].map(lambda s: hex_id(f"elsewhere/{s}", 16)),
                    "parent_id": spans["parent_id"].map(lambda s: s and hex_id(f"elsewhere/{s}", 16))}
                 ).to_parquet(unknown, index=False)  # fmt: skip
    ok(
        invoke(
            "run",
            "--log",
            str(unknown),
            "--log-format",
            "openinference",
            "--out",
            str(tmp_path / "elsewhere"),
        )
    )
    one_line_error(invoke("export", "annotations", "--scored", str(tmp_path / "elsewhere"), "--to", phoenix.url),
                   f"--to {phoenix.url}: Phoenix answered 404 Not Found: Spans with IDs",
                   "post the decisions to the Phoenix whose spans were scored")  # fmt: skip
    one_line_error(invoke("export", "annotations", "--scored", scored, "--to", phoenix.url,
                          "--out", str(tmp_path / "a.json")), "give one of --out FILE")  # fmt: skip
    one_line_error(invoke("export", "annotations", "--scored", scored), "give one of --out FILE")


# -- the page: docs/traces.md's live example ------------------------------------------------------


def test_the_live_examples_of_docs_traces_run(phoenix: PhoenixServer, tmp_path: Path) -> None:
    """The blocks of docs/traces.md tagged `phoenix` (tests/project/test_docs.py leaves them out:
    it has no server), run in order against this server, with PHOENIX_URL its address; a
    `text output phoenix` block is the output of the block before it, the address written
    `$PHOENIX_URL`."""
    live = [b for b in blocks((ROOT / "docs" / "traces.md").read_text()) if "phoenix" in b.tags]
    assert [b.kind for b in live] == ["python", "sh", "text", "python", "text"]
    env = environment() | {"PHOENIX_URL": phoenix.url}
    output: str | None = None
    for block in live:
        where = f"docs/traces.md:{block.line}"
        if block.kind == "text":
            assert "output" in block.tags and output is not None, where
            assert matches(block.text, output), (
                f"{where}: the shown output is not what runs:\n{output}"
            )
            output = None
            continue
        command = [sys.executable, "-c", block.text] if block.kind == "python" else [
            "bash", "-euo", "pipefail", "-c", block.text]  # fmt: skip
        done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, f"{where} failed:\n{block.text}\n{done.stderr}"
        output = done.stdout.replace(phoenix.url, "$PHOENIX_URL")
