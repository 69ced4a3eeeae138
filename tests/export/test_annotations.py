"""`duckscore export annotations --format phoenix`: the decisions of a run on trace spans as
Arize Phoenix span annotations.

The file is held to the types of Phoenix's own client (`arize-phoenix-client`: the request body
AnnotateSpansRequestBody of `POST /v1/span_annotations`, each element a SpanAnnotationData) and
sent through that client to a stand-in transport (no server): what it posts is the file. The
target span of each trace is checked against the span ids the fixtures were built with (its
root, or its first retrieval span when the export holds no root), the labels against
queries.parquet. The DataFrame recipe of docs/traces.md goes through the client's
`log_span_annotations_dataframe` to the same body; a run partitioned by `--partition-by`
exports what the whole run does.
"""

from __future__ import annotations

import collections.abc
import json
import shutil
import typing
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pandas as pd
import pytest
from click.testing import CliRunner
from phoenix.client import Client
from phoenix.client.__generated__ import v1

from duckscore.cli import cli

from ..fuse.test_traces import invoke, otlp_export, scifact_slice, spans_of

NAMES = (
    "duckscore.confidence",
    "duckscore.need_hitl",
    "duckscore.web_fallback",
    "duckscore.risk_flags",
)


def scored(spans: pd.DataFrame | str, folder: Path, *extra: str) -> Path:
    """`duckscore run` on trace spans (a Phoenix export, or OTLP JSON text) into `folder`."""
    folder.mkdir(parents=True)
    if isinstance(spans, str):
        given, log_format = folder / "traces.jsonl", "otel-genai"
        given.write_text(spans)
    else:
        given, log_format = folder / "spans.parquet", "openinference"
        spans.to_parquet(given, index=False)
    out = folder / "scored"
    done = invoke("run", "--log", str(given), "--log-format", log_format, "--out", str(out), *extra)
    assert done.exit_code == 0, done.stderr
    return out


def exported(folder: Path, out: Path) -> dict[str, Any]:
    done = invoke("export", "annotations", "--scored", str(folder), "--format", "phoenix",
                  "--out", str(out))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    body: dict[str, Any] = json.loads(out.read_text())
    return body


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    return scifact_slice()


@pytest.fixture(scope="module")
def phoenix_run(log: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scored(spans_of(log), tmp_path_factory.mktemp("phoenix") / "run")


# -- Phoenix's client types ---------------------------------------------------------------------


def departures(value: Any, hint: Any, where: str = "body") -> list[str]:
    """Where the JSON `value` departs from the type `hint` of Phoenix's client (a TypedDict, with
    its NotRequired keys; Literal; Sequence; Mapping; str, float)."""
    if hint is Any:
        return []
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        fields = typing.get_type_hints(hint, include_extras=True)
        problems = [f"{where}.{key}: not a field of {hint.__name__}" for key in value
                    if key not in fields]  # fmt: skip
        for key, field in fields.items():
            optional = typing.get_origin(field) is typing.NotRequired
            if key in value:
                inner = typing.get_args(field)[0] if optional else field
                problems += departures(value[key], inner, f"{where}.{key}")
            elif not optional:
                problems.append(f"{where}.{key}: missing")
        return problems
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if origin is collections.abc.Sequence:
        if not isinstance(value, list):
            return [f"{where}: not an array"]
        return [
            p for i, item in enumerate(value) for p in departures(item, args[0], f"{where}[{i}]")
        ]
    if origin is collections.abc.Mapping:
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        return [p for k, item in value.items() for p in departures(item, args[1], f"{where}.{k}")]
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not a number"]
    if hint is str:
        return [] if isinstance(value, str) else [f"{where}: {value!r} is not a string"]
    raise AssertionError(f"{where}: no check for {hint}")


def posted(send: Any) -> dict[str, Any]:
    """What Phoenix's client posts to /v1/span_annotations when `send(client)` runs."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        count = len(json.loads(request.content)["data"])
        return httpx.Response(200, json={"data": [{"id": str(i)} for i in range(count)]})

    transport = httpx.MockTransport(answer)
    send(Client(http_client=httpx.Client(transport=transport, base_url="http://phoenix.test")))
    assert [r.url.path for r in requests] == ["/v1/span_annotations"]
    body: dict[str, Any] = json.loads(requests[0].content)
    return body


def test_the_checks_see_a_departure() -> None:
    bad = {"data": [{"span_id": "s", "name": "n", "annotator_kind": "RULE",
                     "result": {"label": "x", "score": None}, "extra": 1}]}  # fmt: skip
    assert sorted(departures(bad, v1.AnnotateSpansRequestBody)) == [
        "body.data[0].annotator_kind: 'RULE' is not one of ('LLM', 'CODE', 'HUMAN')",
        "body.data[0].extra: not a field of SpanAnnotationData",
        "body.data[0].result.score: None is not a number",
    ]
    assert departures({"data": [{"name": "n"}]}, v1.AnnotateSpansRequestBody) == [
        "body.data[0].annotator_kind: missing",
        "body.data[0].span_id: missing",
    ]


# -- the annotations ----------------------------------------------------------------------------


def test_the_file_is_the_body_phoenix_takes(
    log: pd.DataFrame, phoenix_run: Path, tmp_path: Path
) -> None:
    body = exported(phoenix_run, tmp_path / "annotations.json")
    assert departures(body, v1.AnnotateSpansRequestBody) == []
    data = body["data"]
    assert posted(lambda c: c.spans.log_span_annotations(span_annotations=data, sync=True)) == body
    queries = duckdb.execute(f"FROM '{phoenix_run / 'queries.parquet'}' ORDER BY query_id").df()
    best = best_parents(phoenix_run)
    assert sorted(queries["query_id"]) == sorted(f"trace-{q}" for q in log["query_id"].unique())
    assert len(data) == len(NAMES) * len(queries)
    for decision, i in zip(
        queries.to_dict("records"), range(0, len(data), len(NAMES)), strict=True
    ):
        trio = data[i : i + len(NAMES)]
        parent = best[decision["query_id"]]
        assert [a["name"] for a in trio] == list(NAMES)
        assert {a["span_id"] for a in trio} == {f"{decision['query_id']}-root"}  # the fixture's
        assert {a["annotator_kind"] for a in trio} == {"CODE"}
        assert {a["identifier"] for a in trio} == {"duckscore:overall_v3"}  # the default policy
        assert [a["metadata"] for a in trio] == [{
            "query_id": decision["query_id"],
            "best_parent_id": decision["best_parent_id"],
            "best_overall_score": decision["best_overall_score"],
            "top2_ratio": None if pd.isna(decision["top2_ratio"]) else decision["top2_ratio"],
            "score_policy_version": "overall_v3",
            "strength": parent["s_strength"],
            "coverage": parent["s_coverage"],
            "stability": parent["s_stability"],
            "risk_flags": parent["flags"],
        }] * len(NAMES)  # fmt: skip
        confidence, hitl, fallback, flags = (a["result"] for a in trio)
        assert confidence["label"] == decision["confidence_level"]
        assert confidence["score"] == decision["best_overall_score"]
        assert decision["best_parent_id"] in confidence["explanation"]
        assert hitl["label"] == str(decision["need_hitl"]).lower()
        assert hitl["score"] == float(decision["need_hitl"])
        assert fallback["label"] == str(decision["web_fallback"]).lower()
        assert fallback["score"] == float(decision["web_fallback"])
        why = "low confidence and no human review" if decision["web_fallback"] else None
        assert fallback.get("explanation") == why
        assert flags["label"] == (",".join(parent["flags"]) or "none")
        assert flags["score"] == len(parent["flags"])
        assert flags["explanation"].startswith(
            f"best parent {decision['best_parent_id']}: strength"
        )
    flagged = [a for a in data if a["name"] == "duckscore.risk_flags" and a["result"]["score"]]
    assert flagged  # the slice has flagged queries: the check above saw flags, not only none


def best_parents(run: Path) -> dict[str, dict[str, Any]]:
    """Per query, from parents.parquet (not the contract the export reads): the rank-1 parent's
    sub-scores and its risk flags, with ambiguous_candidate when the rank-2 parent has it."""
    rows = duckdb.execute(
        f"SELECT query_id, rank, s_strength, s_coverage, s_stability, risk_flags, "
        f"flag_ambiguous_candidate FROM '{run / 'parents.parquet'}' WHERE rank <= 2"
    ).df()
    found: dict[str, dict[str, Any]] = {}
    for row in rows.sort_values(["query_id", "rank"]).to_dict("records"):
        if row["rank"] == 1:
            found[row["query_id"]] = row | {"flags": list(row["risk_flags"])}
        elif row["flag_ambiguous_candidate"]:
            found[row["query_id"]]["flags"].append("ambiguous_candidate")
    return found


def test_every_kind_of_decision(tmp_path: Path) -> None:
    """A folder written by hand: a high-confidence query that needs review, its best parent and
    runner-up flagged, a medium one without flags, one without candidates (listed by
    --queries); the first trace's root known, the others not."""
    folder = tmp_path / "scored"
    folder.mkdir()
    pd.DataFrame({
        "query_id": ["t1", "t2", "t3"], "best_parent_id": ["p1", "p7", None],
        "best_overall_score": [0.9, 0.55, None], "confidence_level": ["high", "medium", "low"],
        "top2_ratio": [0.95, None, None], "need_hitl": [True, False, False],
        "web_fallback": [False, False, True],
    }).to_parquet(folder / "queries.parquet", index=False)  # fmt: skip
    pd.DataFrame({
        "query_id": ["t1", "t1", "t2", "t2", "t3"], "source": ["sparse", "dense", "sparse", "dense", "dense"],
        "trace_id": ["t1", "t1", "t2", "t2", "t3"], "span_id": ["s1b", "s1a", "s2b", "s2a", "s3"],
        "root_span_id": ["r1", "r1", None, None, None],
    }).to_parquet(folder / "spans.parquet", index=False)  # fmt: skip
    top_parents = {
        "t1": [
            {
                "parent_id": "p1",
                "overall_score": 0.9,
                "strength": 0.8,
                "coverage": 0.7,
                "stability": 0.6,
                "risk_flags": ["low_coverage"],
            },
            {
                "parent_id": "p2",
                "overall_score": 0.86,
                "strength": 0.9,
                "coverage": 0.5,
                "stability": 0.5,
                "risk_flags": ["single_spike", "ambiguous_candidate"],
            },
        ],
        "t2": [
            {
                "parent_id": "p7",
                "overall_score": 0.55,
                "strength": 0.5,
                "coverage": 0.25,
                "stability": 0.125,
                "risk_flags": [],
            }
        ],
        "t3": [],
    }
    (folder / "contract.jsonl").write_text("".join(
        json.dumps({"score_policy_version": "v9", "query_id": q, "top_parents": top}) + "\n"
        for q, top in top_parents.items()))  # fmt: skip

    def annotations(span: str, query: str, results: list[dict[str, Any]], **meta: Any) -> list[Any]:
        metadata = {"query_id": query, **meta, "score_policy_version": "v9"}
        return [{"span_id": span, "name": name, "annotator_kind": "CODE", "result": result,
                 "metadata": metadata, "identifier": "duckscore:v9"}
                for name, result in zip(NAMES, results, strict=True)]  # fmt: skip

    expected = [
        *annotations("r1", "t1", [
            {"label": "high", "score": 0.9, "explanation": "best parent p1, OverallScore 0.9000"},
            {"label": "true", "score": 1.0, "explanation": "top-2 ratio (score 2 / score 1) 0.9500"},
            {"label": "false", "score": 0.0},
            {"label": "low_coverage,ambiguous_candidate", "score": 2.0,
             "explanation": "best parent p1: strength 0.8000, coverage 0.7000, stability 0.6000"}],
            best_parent_id="p1", best_overall_score=0.9, top2_ratio=0.95, strength=0.8,
            coverage=0.7, stability=0.6, risk_flags=["low_coverage", "ambiguous_candidate"]),
        *annotations("s2a", "t2", [
            {"label": "medium", "score": 0.55, "explanation": "best parent p7, OverallScore 0.5500"},
            {"label": "false", "score": 0.0},
            {"label": "false", "score": 0.0},
            {"label": "none", "score": 0.0,
             "explanation": "best parent p7: strength 0.5000, coverage 0.2500, stability 0.1250"}],
            best_parent_id="p7", best_overall_score=0.55, top2_ratio=None, strength=0.5,
            coverage=0.25, stability=0.125, risk_flags=[]),
        *annotations("s3", "t3", [
            {"label": "low", "explanation": "no candidate parent"},
            {"label": "false", "score": 0.0},
            {"label": "true", "score": 1.0, "explanation": "no candidate parent"},
            {"label": "none", "score": 0.0, "explanation": "no candidate parent"}],
            best_parent_id=None, best_overall_score=None, top2_ratio=None, strength=None,
            coverage=None, stability=None, risk_flags=[]),
    ]  # fmt: skip
    body = exported(folder, tmp_path / "a.json")
    assert body == {"data": expected}
    assert departures(body, v1.AnnotateSpansRequestBody) == []


def test_the_dataframe_recipe_posts_the_same_body(phoenix_run: Path, tmp_path: Path) -> None:
    data = exported(phoenix_run, tmp_path / "annotations.json")["data"]
    # docs/traces.md: the rows as the DataFrame log_span_annotations_dataframe takes
    frame = pd.DataFrame([{k: v for k, v in a.items() if k != "result"} | a["result"]
                          for a in data])  # fmt: skip
    frame = frame.astype(object).where(frame.notna(), None)
    sent = posted(lambda c: c.spans.log_span_annotations_dataframe(dataframe=frame, sync=True))
    assert sent == {"data": data}


@pytest.mark.parametrize(
    ("change", "target"),
    [
        (lambda s: s.drop(columns=["parent_id"]), "dense"),  # no parents: the first source
        (lambda s: s[s["parent_id"].notna()], "dense"),  # the roots left out of the export
    ],
    ids=["no-parent-column", "root-not-exported"],
)
def test_without_a_root_the_first_retrieval_span_is_annotated(
    log: pd.DataFrame, change: Any, target: str, tmp_path: Path
) -> None:
    spans = change(spans_of(log))
    first = (
        spans[spans["attributes.openinference.span.kind"] == "RETRIEVER"]
        .groupby("context.trace_id")["name"]
        .min()
    )
    assert set(first) == {target}  # SciFact's sources: dense, sparse, summary
    data = exported(scored(spans, tmp_path / "run"), tmp_path / "a.json")["data"]
    assert departures({"data": data}, v1.AnnotateSpansRequestBody) == []
    assert {a["span_id"] for a in data} == {f"{trace}-{target}" for trace in first.index}


def test_otlp_traces_are_annotated_on_their_root(log: pd.DataFrame, tmp_path: Path) -> None:
    data = exported(scored(otlp_export(log), tmp_path / "run"), tmp_path / "a.json")["data"]
    assert departures({"data": data}, v1.AnnotateSpansRequestBody) == []
    assert {a["span_id"] for a in data} == {f"trace-{q}-root" for q in log["query_id"]}


def test_a_partitioned_run_exports_the_same(
    log: pd.DataFrame, phoenix_run: Path, tmp_path: Path
) -> None:
    """`run --partition-by dt` writes queries/dt=…/part.parquet, spans/dt=…/…: read together."""
    spans = spans_of(log)
    traces = sorted(spans["context.trace_id"].unique())
    for day, half in (("a", traces[: len(traces) // 2]), ("b", traces[len(traces) // 2 :])):
        (tmp_path / "logs" / f"dt={day}").mkdir(parents=True)
        spans[spans["context.trace_id"].isin(half)].to_parquet(
            tmp_path / "logs" / f"dt={day}" / "spans.parquet", index=False
        )
    done = invoke("run", "--log", str(tmp_path / "logs"), "--log-format", "openinference",
                  "--partition-by", "dt", "--out", str(tmp_path / "parted"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert len(list((tmp_path / "parted").glob("spans/dt=*/*.parquet"))) == 2
    whole = exported(phoenix_run, tmp_path / "whole.json")
    assert exported(tmp_path / "parted", tmp_path / "parted.json") == whole


def test_queries_without_spans_are_left_out(log: pd.DataFrame, tmp_path: Path) -> None:
    listed = tmp_path / "queries.parquet"
    extra = pd.DataFrame({"query_id": [*(f"trace-{q}" for q in log["query_id"].unique()), "x"]})
    extra.to_parquet(listed, index=False)
    folder = scored(spans_of(log), tmp_path / "run", "--queries", str(listed))
    done = CliRunner().invoke(cli, ["export", "annotations", "--scored", str(folder),
                                    "--out", str(tmp_path / "a.json")])  # fmt: skip
    assert done.exit_code == 0, done.stderr
    traces = log["query_id"].nunique()
    assert done.stdout == ""  # a message, on stderr (docs/outputs.md#what-a-command-prints)
    assert done.stderr == (
        f"duckscore: wrote {len(NAMES) * traces} phoenix annotations of {traces} traces to "
        f"{tmp_path / 'a.json'}; left out 1 query without spans\n"
    )
    data = json.loads((tmp_path / "a.json").read_text())["data"]
    assert "x" not in {a["metadata"]["query_id"] for a in data}


# -- one-line errors ----------------------------------------------------------------------------


def fails(folder: Path, message: str, tmp_path: Path) -> str:
    """The one line of `export annotations` on `folder`, which starts with `message`."""
    done = invoke("export", "annotations", "--scored", str(folder),
                  "--out", str(tmp_path / "a.json"))  # fmt: skip
    assert done.exit_code == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"duckscore: error: {message}"), done.stderr
    assert not (tmp_path / "a.json").exists()
    return done.stderr


def test_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    fails(tmp_path / "nowhere", f"--scored {tmp_path / 'nowhere'}: no such folder", tmp_path)


def test_a_folder_without_queries_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    message = f"--scored {tmp_path / 'empty'}: has no queries.parquet: not an output of a run"
    fails(tmp_path / "empty", message, tmp_path)


def test_a_run_on_a_plain_log_is_one_line(log: pd.DataFrame, tmp_path: Path) -> None:
    log.to_parquet(tmp_path / "log.parquet", index=False)
    done = invoke("run", "--log", str(tmp_path / "log.parquet"), "--out", str(tmp_path / "plain"))
    assert done.exit_code == 0, done.stderr
    message = (
        f"--scored {tmp_path / 'plain'}: has no spans.parquet: it was not scored from a trace "
        "export (--log-format openinference or otel-genai)"
    )
    fails(tmp_path / "plain", message, tmp_path)


def test_a_queries_file_of_another_kind_is_one_line(phoenix_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "other"
    shutil.copytree(phoenix_run, folder)
    pd.DataFrame({"query_id": ["q"]}).to_parquet(folder / "queries.parquet", index=False)
    message = f"--scored {folder}: not the tables of a run on trace spans ("
    assert "Unknown column: best_overall_score" in fails(folder, message, tmp_path)
