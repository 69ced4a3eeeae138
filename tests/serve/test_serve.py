"""`duckscore serve` (issue 33, part 2), as real server processes on 127.0.0.1: its answers are
the in-process scorer's and the batch contract.jsonl's, line for line; bad bodies are 400, bad
hits 422, big bodies 413, in one line; 16 clients at once get their own answers; SIGHUP and
POST /v1/reload swap the policy read from disk, each answer naming the version that computed
it; SIGTERM finishes the request in flight and exits 0; one JSON access-log line a request;
`--workers 2` answers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import duckscore as ds
from duckscore.answering.pipeline import score_answers
from duckscore.runner.pipeline import run

from ..helpers import FIXTURES, ROOT, SCIFACT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("serve")]

LOG = SCIFACT / "retrieval_log.parquet"
ANSWERS_DIR = FIXTURES / "answers"
HEADER = "X-Duckscore-Policy-Version"
LOG_FIELDS = {
    "time", "method", "path", "status", "latency_ms", "queries", "policy_version", "error"
}  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`python -m duckscore serve …` on a free port, its stderr in a file."""

    def __init__(self, folder: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stderr = folder / f"serve-{self.port}.err"
        with self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "duckscore", "serve", "--port", str(self.port), *args],
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=folder,
            )
        deadline = time.monotonic() + 30
        while True:
            assert self.process.poll() is None, self.stderr.read_text()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /healthz in 30 s"
            time.sleep(0.1)

    def access_log(self) -> list[dict[str, Any]]:
        lines = self.stderr.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def hits() -> pa.Table:
    return duckdb.sql(f"FROM read_parquet('{LOG}')").to_arrow_table()


@pytest.fixture(scope="module")
def queries(hits: pa.Table) -> list[str]:
    return sorted(set(hits["query_id"].to_pylist()))


def of_queries(hits: pa.Table, chosen: list[str]) -> pa.Table:
    return hits.filter(pc.is_in(hits["query_id"], pa.array(chosen)))


@pytest.fixture(scope="module")
def scorer() -> Iterator[Any]:
    with ds.scorer() as live:
        yield live


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(tmp_path_factory.mktemp("serve"), "--max-body-bytes", "5000000")
    yield started
    started.stop()


def test_the_server_keeps_a_log_of_its_own(server: Server) -> None:
    """The server's records go to its log (`LEVEL: message`, serve/server.py), which the
    command line's handler of progress lines and warnings (cli/reporting.py) leaves alone."""
    said = server.stderr.read_text(encoding="utf-8")
    assert f"INFO: listening on http://127.0.0.1:{server.port} (SIGTERM" in said, said
    assert "duckscore [" not in said and "duckscore: warning:" not in said


# the app of a worker of `serve --workers N` (uvicorn's factory), built in a process of its own
A_WORKERS_APP = (
    "import gc, logging, os, uvicorn\n"
    "from duckscore.runner.job import Job\n"
    "from duckscore.serve import server\n"
    "settings = server.ScorerSettings(Job())\n"
    "os.environ[server.SETTINGS_VARIABLE] = settings.record()\n"
    "server.app_from_environment()\n"
)


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)


def test_a_workers_errors_reach_its_log(tmp_path: Path) -> None:
    """`--workers N`: the app of each worker (uvicorn's factory, in a process of its own) logs
    as the server does."""
    code = (
        A_WORKERS_APP
        + "logging.getLogger('duckscore.serve').error('internal error on POST /v1/score: boom')\n"
    )
    done = python(code, tmp_path)
    assert (done.returncode, done.stderr) == (0, "ERROR: internal error on POST /v1/score: boom\n")


def test_what_a_server_holds_at_its_start_is_out_of_the_collectors_passes(
    tmp_path: Path,
) -> None:
    """One process and each of N workers freeze what they hold once the app is built (the
    modules, the policy, the scorer: serve/server.py, _settled), so the collector's full passes
    under load scan only what came after: without it they took ~40 ms each (docs/live.md)."""
    code = (
        A_WORKERS_APP + "print(gc.get_freeze_count() > 10000)\n"
        "gc.unfreeze()\n"
        "class Served:\n"
        "    def __init__(self, config): pass\n"
        "    async def serve(self, sockets): print(gc.get_freeze_count() > 10000)\n"
        "uvicorn.Server = Served\n"
        "server.serve(settings, '127.0.0.1', 0)\n"
    )
    done = python(code, tmp_path)
    assert (done.returncode, done.stdout) == (0, "True\nTrue\n"), done.stderr


def post(url: str, payload: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/score", json=payload, timeout=60, **kwargs)


def test_healthz_and_policy_name_the_loaded_policy(server: Server, scorer: Any) -> None:
    health = httpx.get(f"{server.url}/healthz")
    assert health.json() == {"status": "ok", "policy_version": scorer.policy.version}
    assert health.headers[HEADER] == scorer.policy.version
    assert httpx.get(f"{server.url}/v1/policy").json() == {
        "policy_version": scorer.policy.version,
        "parameters_sha256": scorer.policy.parameters_sha256,
        "recipe_id": scorer.recipe.version,
        "recipe_parameters_sha256": scorer.recipe.policy.parameters_sha256,
        "per_query": True,
        "cross_query": [],
    }
    schema = httpx.get(f"{server.url}/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    assert {"/v1/score", "/v1/answers", "/v1/policy", "/v1/reload", "/healthz"} <= set(
        schema["paths"]
    )
    line = schema["components"]["schemas"]["ContractLine"]
    assert "best_parent_id" in line["required"]


def test_the_policy_says_why_requests_may_not_share_a_statement() -> None:
    """GET /v1/policy's `per_query` and `cross_query` of a job that is not per query: OpenSearch's
    arithmetic mean counting the empty lists of the sources it discovers in the log."""
    from duckscore.serve.app import policy_record

    with ds.scorer(recipe="opensearch_hybrid", allow_recipe_mismatch=True) as live:
        record = policy_record(live)
    assert record["per_query"] is False
    assert record["cross_query"] == [
        "opensearch_hybrid: fusion.count_empty_sources counts the empty list of every source "
        "the log names (discover_sources)"
    ]


def test_fifty_queries_are_the_scorer_and_the_batch_contract(
    server: Server, scorer: Any, hits: pa.Table, queries: list[str], tmp_path: Path
) -> None:
    chosen = of_queries(hits, queries[100:150])
    answer = post(server.url, {"hits": chosen.to_pylist()})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["policy_version"] == answer.headers[HEADER] == scorer.policy.version
    assert body["recipe_id"] == scorer.recipe.version
    assert body["contract"] == scorer.score(chosen).contract
    run(chosen, tmp_path / "batch")
    batch = (tmp_path / "batch" / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    assert body["contract"] == [json.loads(line) for line in batch]
    assert [line["query_id"] for line in body["contract"]] == queries[100:150]


@pytest.mark.extended  # 27 s: make test's 15 minutes (docs/testing.md)
def test_all_of_scifact_in_one_request_and_one_query_a_request(
    hits: pa.Table, queries: list[str], tmp_path: Path
) -> None:
    """Parity for all 300 queries over HTTP: in one request (about 12 MB of JSON, under a raised
    body limit), and one query per request (each after the first on the server's warm lane)."""
    run(LOG, tmp_path / "batch")
    lines = (tmp_path / "batch" / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    batch = [json.loads(line) for line in lines]
    big = Server(tmp_path, "--max-body-bytes", "50000000")
    try:
        whole = post(big.url, {"hits": hits.to_pylist()})
        assert whole.status_code == 200, whole.text
        assert whole.json()["contract"] == batch
        with httpx.Client(timeout=60) as http:
            one_by_one = [
                http.post(f"{big.url}/v1/score", json={"hits": of_queries(hits, [q]).to_pylist()})
                for q in queries
            ]
    finally:
        big.stop()
    assert [answer.json()["contract"] for answer in one_by_one] == [[line] for line in batch]


@pytest.mark.parametrize("with_events", [False, True])
def test_answers_are_the_batch_contract(server: Server, tmp_path: Path, with_events: bool) -> None:
    """POST /v1/answers with the bundled answers' tables gives `duckscore answers`' lines."""
    names = ("answers", "citations", "chunks", *(("events",) if with_events else ()))
    read = duckdb.connect()
    tables = {n: read.sql(f"FROM read_csv('{ANSWERS_DIR / f'{n}.csv'}')").df() for n in names}
    score_answers(
        *(ANSWERS_DIR / f"{n}.csv" for n in ("answers", "citations", "chunks")),
        tmp_path / "batch",
        events=ANSWERS_DIR / "events.csv" if with_events else None,
    )
    batch = [json.loads(line) for line in (tmp_path / "batch" / "contract.jsonl").open()]
    payload = {
        n: json.loads(t.to_json(orient="records", date_format="iso")) for n, t in tables.items()
    }
    answer = httpx.post(f"{server.url}/v1/answers", json=payload, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"contract": batch, "policy_version": "answer_v1"}
    assert answer.headers[HEADER] == "answer_v1"
    missing = httpx.post(f"{server.url}/v1/answers", json={"answers": []}, timeout=60)
    assert missing.status_code == 400 and '"citations"' in missing.json()["error"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"hits": [', "the body is not JSON"),
        (b"\xff\xfe", "the body is not JSON"),
        (b'{"hits": 3}', '"hits" must be a list of objects, not an integer'),
        (b'{"rows": []}', 'with "hits"'),
        (
            b'{"hits": [{"query_id": "1"}, [2]]}',
            '"hits" must be a list of objects: row 2 is a list',
        ),
    ],
)
def test_a_body_that_is_not_hits_is_400(server: Server, content: bytes, message: str) -> None:
    answer = httpx.post(f"{server.url}/v1/score", content=content)
    assert answer.status_code == 400
    assert message in answer.json()["error"]
    assert "\n" not in answer.json()["error"]


@pytest.mark.parametrize("bad", [None, "NaN"])
def test_hits_that_fail_the_log_checks_are_422_in_one_line(
    server: Server, hits: pa.Table, bad: Any
) -> None:
    rows = of_queries(hits, ["1"]).to_pylist()
    rows[3]["score"] = None
    content = json.dumps({"hits": rows})
    if bad == "NaN":
        content = content.replace("null", "NaN", 1).replace('"score": null', '"score": NaN')
    answer = httpx.post(f"{server.url}/v1/score", content=content.encode())
    assert answer.status_code == 422
    error = answer.json()["error"]
    kind = "is null" if bad is None else "is NaN or infinite"
    assert error.startswith("hits (<Table>, row 4, query_id='1'")
    assert error.endswith(f"column 'score' {kind}")
    assert "Traceback" not in answer.text


def test_no_hits_and_hits_of_mixed_types_are_422(server: Server) -> None:
    """Hits whose column mixes JSON types are refused in one line naming the column and the
    row, in the answer and in the access log (issue 47: it named neither)."""
    assert post(server.url, {"hits": []}).status_code == 422
    before = len(server.access_log())
    mixed = [
        {"query_id": "1", "source": "a", "item_id": "x", "parent_id": "p", "score": 1.0},
        {"query_id": 2, "source": "a", "item_id": "y", "parent_id": "p", "score": 1.0},
    ]
    answer = post(server.url, {"hits": mixed})
    assert answer.status_code == 422
    expected = (
        "hits (row 2, query_id='2', source='a', item_id='y'): column 'query_id' is an integer, "
        "where row 1's is text: give every row's query_id as text, or every row's as an integer"
    )
    assert answer.json() == {"error": expected}
    mixed[1] |= {"query_id": "1", "score": "0.5"}
    answer = post(server.url, {"hits": mixed})
    assert answer.status_code == 422
    assert answer.json()["error"] == (
        "hits (row 2, query_id='1', source='a', item_id='y'): column 'score' is text, not a "
        'number: "0.5"'
    )
    # JSON's escapes can write a lone surrogate, which is no Unicode text
    answer = httpx.post(f"{server.url}/v1/score", content=json.dumps({"hits": mixed}).replace(
        '"y"', '"\\ud800"').encode())  # fmt: skip
    assert answer.status_code == 422
    assert answer.json()["error"] == (
        "hits (row 2, query_id='1', source='a', item_id='\\ud800'): column 'item_id' is not "
        'Unicode text (a lone surrogate): "\\ud800"'
    )
    deadline = time.monotonic() + 5
    while len(errors := [line["error"] for line in server.access_log()[before:]]) < 3:
        assert time.monotonic() < deadline, "no access-log lines for the refusals"
        time.sleep(0.05)
    assert expected in errors


def test_a_busy_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for workers in ("1", "2"):
            done = subprocess.run(
                [sys.executable, "-m", "duckscore", "serve", "--port", str(port),
                 "--workers", workers],
                capture_output=True, text=True, timeout=60, cwd=tmp_path,
            )  # fmt: skip
            assert done.returncode == 2
            assert done.stderr == (
                f"duckscore: error: --host/--port 127.0.0.1:{port}: the address is already in "
                "use (another server listens there: stop it, or choose another --port)\n"
            )


def test_a_body_over_max_body_bytes_is_413(server: Server) -> None:
    # by its Content-Length: refused before the body is read
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n{"
        )
        answer = b""
        while b'"}' not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413")
    assert answer.endswith(b'{"error":"the body is over 5000000 bytes (--max-body-bytes)"}')


def test_a_streamed_body_is_counted(tmp_path: Path) -> None:
    small = Server(tmp_path, "--max-body-bytes", "100000")
    try:

        def chunks() -> Iterator[bytes]:  # chunked: no Content-Length to trust
            yield b'{"hits": ['
            for _ in range(30):
                yield b'{"query_id": "1", "source": "a", "item_id": "x", "score": 1.0},' * 100

        answer = httpx.post(f"{small.url}/v1/score", content=chunks(), timeout=30)
        assert answer.status_code == 413
        assert answer.json() == {"error": "the body is over 100000 bytes (--max-body-bytes)"}
        assert httpx.get(f"{small.url}/healthz").status_code == 200
    finally:
        small.stop()


def test_sixteen_clients_at_once_get_their_own_answers(
    server: Server, scorer: Any, hits: pa.Table, queries: list[str]
) -> None:
    requests = [queries[i * 3 : i * 3 + 2] for i in range(80)]  # 16 threads x 5 requests
    bodies = [{"hits": of_queries(hits, chosen).to_pylist()} for chosen in requests]
    expected = [scorer.score(of_queries(hits, chosen)).contract for chosen in requests]

    def client(start: int) -> list[tuple[int, Any]]:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            out = []
            for i in range(start, start + 5):
                answer = http.post("/v1/score", json=bodies[i])
                out.append((answer.status_code, answer.json()["contract"]))
            return out

    with ThreadPoolExecutor(16) as pool:
        got = [r for part in pool.map(client, range(0, 80, 5)) for r in part]
    assert [status for status, _ in got] == [200] * 80
    assert [contract for _, contract in got] == expected


def test_bad_requests_among_many_at_once_get_their_own_422(
    server: Server, scorer: Any, hits: pa.Table, queries: list[str]
) -> None:
    """Requests arriving together are scored in one statement (micro-batching, on by default):
    every fifth of 64 has a null score, and gets the one line it gets alone; the others their
    lines."""
    bodies, expected = [], []
    for i in range(64):
        rows = of_queries(hits, [queries[i]]).to_pylist()
        if i % 5 == 2:
            rows[1]["score"] = None
            error = f"hits (<Table>, row 2, query_id='{queries[i]}'"
            expected.append((422, error))
        else:
            expected.append((200, scorer.score(of_queries(hits, [queries[i]])).contract))
        bodies.append({"hits": rows})

    def client(start: int) -> list[tuple[int, Any]]:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            answers = [http.post("/v1/score", json=bodies[i]) for i in range(start, start + 4)]
        return [
            (a.status_code, a.json()["contract"] if a.status_code == 200 else a.json()["error"])
            for a in answers
        ]

    with ThreadPoolExecutor(16) as pool:
        got = [r for part in pool.map(client, range(0, 64, 4)) for r in part]
    for (status, answer), (wanted, expect) in zip(got, expected, strict=True):
        assert status == wanted
        if status == 422:
            assert answer.startswith(expect) and answer.endswith("column 'score' is null")
        else:
            assert answer == expect


def test_every_request_is_one_json_access_log_line(server: Server, hits: pa.Table) -> None:
    # the server is shared by the module, and a request's line is written after its answer is
    # sent: wait for this test's two lines among those written since it began
    before = len(server.access_log())
    post(server.url, {"hits": of_queries(hits, ["1", "3"]).to_pylist()})
    httpx.post(f"{server.url}/v1/score", content=b"{")

    def this_tests_lines() -> list[dict[str, Any]]:
        new = server.access_log()[before:]
        return [line for line in new if line["queries"] == 2 or line["status"] == 400]

    deadline = time.monotonic() + 5
    while len(this_tests_lines()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(set(line) == LOG_FIELDS for line in server.access_log())
    scored, refused = sorted(this_tests_lines(), key=lambda line: line["status"])
    assert (scored["method"], scored["path"], scored["status"]) == ("POST", "/v1/score", 200)
    assert scored["queries"] == 2 and scored["policy_version"] == "overall_v3"
    assert scored["latency_ms"] > 0 and scored["time"].startswith("20")
    assert (refused["status"], refused["queries"]) == (400, None)
    assert scored["error"] is None and refused["error"].startswith("the body is not JSON: ")
    assert "uvicorn.access" not in server.stderr.read_text() and '"GET /' not in (
        server.stderr.read_text()
    )


def edit(policy: Path, version: str, t_high: float) -> None:
    text = policy.read_text(encoding="utf-8")
    lines = [
        f"score_policy_version: {version}"
        if line.startswith("score_policy_version:")
        else f"  T_high: {t_high}"
        if line.strip().startswith("T_high:")
        else line
        for line in text.splitlines()
    ]
    policy.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_sighup_and_post_reload_swap_the_policy_read_from_disk(
    tmp_path: Path, hits: pa.Table
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        (ROOT / "sql/score/policies/overall_v1.yaml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    served = Server(tmp_path, "--policy", str(policy))
    body = {"hits": of_queries(hits, ["1", "3", "5"]).to_pylist()}
    t_high = {"overall_v1": 0.68, "overall_v1_hup": 0.7, "overall_v1_post": 0.72}
    seen: list[str] = []
    stop = threading.Event()

    def keep_asking() -> None:
        with httpx.Client(base_url=served.url, timeout=30) as http:
            while not stop.is_set():
                answer = http.post("/v1/score", json=body)
                assert answer.status_code == 200
                version = answer.json()["policy_version"]
                assert answer.headers[HEADER] == version
                for line in answer.json()["contract"]:  # computed by that version, whole
                    assert line["score_policy_version"] == version
                    assert line["thresholds_used"]["T_high"] == t_high[version]
                seen.append(version)

    try:
        first = httpx.get(f"{served.url}/v1/policy").json()
        assert first["policy_version"] == "overall_v1"
        with ThreadPoolExecutor(2) as pool:
            asking = [pool.submit(keep_asking) for _ in range(2)]
            time.sleep(0.3)
            edit(policy, "overall_v1_hup", 0.7)
            served.process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while httpx.get(f"{served.url}/v1/policy").json()["policy_version"] != (
                "overall_v1_hup"
            ):
                assert time.monotonic() < deadline, "SIGHUP did not reload in 10 s"
                time.sleep(0.05)
            while "overall_v1_hup" not in seen:  # an answer of the reloaded policy
                assert time.monotonic() < deadline + 10, "no answer of the reloaded policy"
                time.sleep(0.05)
            edit(policy, "overall_v1_post", 0.72)
            reloaded = httpx.post(f"{served.url}/v1/reload", timeout=30)
            while seen[-1] != "overall_v1_post":
                assert time.monotonic() < deadline + 20, "no answer of the reloaded policy"
                time.sleep(0.05)
            stop.set()
            for future in asking:
                future.result()
        assert reloaded.status_code == 200
        assert reloaded.json()["policy_version"] == reloaded.headers[HEADER] == "overall_v1_post"
        assert reloaded.json()["parameters_sha256"] != first["parameters_sha256"]
        assert seen[0] == "overall_v1" and seen[-1] == "overall_v1_post"
        assert set(seen) == set(t_high)
        # a policy that no longer loads is refused in one line; the loaded one stays
        policy.write_text("score_policy_version: [broken\n", encoding="utf-8")
        refused = httpx.post(f"{served.url}/v1/reload", timeout=30)
        assert refused.status_code == 422 and "\n" not in refused.json()["error"]
        assert refused.headers[HEADER] == "overall_v1_post"
        assert post(served.url, body).json()["policy_version"] == "overall_v1_post"
    finally:
        stop.set()
        served.stop()


def test_sigterm_finishes_the_request_in_flight_and_exits_0(
    tmp_path: Path, hits: pa.Table, scorer: Any
) -> None:
    served = Server(tmp_path, "--max-body-bytes", "100000000")
    try:
        payload = json.dumps({"hits": hits.to_pylist()}).encode()
        half = len(payload) // 2
        headers_sent, signalled = threading.Event(), threading.Event()

        def body() -> Iterator[bytes]:
            yield payload[:half]
            headers_sent.set()
            signalled.wait(10)
            yield payload[half:]

        answers: list[httpx.Response] = []
        client = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{served.url}/v1/score", content=body(), timeout=60)
            )
        )
        client.start()
        assert headers_sent.wait(10)
        time.sleep(0.3)  # the server has read the request's head: the request is in flight
        served.process.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        signalled.set()
        client.join(30)
        assert answers and answers[0].status_code == 200
        assert len(answers[0].json()["contract"]) == 300
        assert served.process.wait(10) == 0
        with pytest.raises(httpx.TransportError):  # and it is gone
            httpx.get(f"{served.url}/healthz", timeout=2)
    finally:
        served.stop()


def test_two_workers_start_and_answer(tmp_path: Path, hits: pa.Table, scorer: Any) -> None:
    served = Server(tmp_path, "--workers", "2")
    try:
        chosen = of_queries(hits, ["1", "3"])
        with httpx.Client(base_url=served.url, timeout=30) as http:
            for _ in range(4):
                answer = http.post("/v1/score", json={"hits": chosen.to_pylist()})
                assert answer.status_code == 200
                assert answer.json()["contract"] == scorer.score(chosen).contract
        pids = {line.split("[")[1].split("]")[0] for line in served.stderr.read_text().splitlines()
                if "Started server process" in line}  # fmt: skip
        assert len(pids) >= 2
    finally:
        served.stop()


def test_without_the_extra_serve_fails_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "uvicorn.py").write_text("raise ImportError('no uvicorn')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(blocker), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "duckscore", "serve"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert done.stderr == (
        "duckscore: error: duckscore serve needs the serve extra: pip install 'duckscore[serve]'\n"
    )


def test_any_other_failure_is_500_without_a_traceback() -> None:
    import asyncio
    from types import SimpleNamespace

    from duckscore.serve.app import create_app

    class Broken:
        policy = recipe = SimpleNamespace(version="v0", parameters_sha256="0" * 64)
        per_query = True

        def score(self, hits: Any) -> Any:
            raise RuntimeError("secret detail")

        def close(self) -> None:
            pass

    async def ask() -> httpx.Response:
        app = create_app(Broken, access_log=False)  # type: ignore[arg-type]
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
                return await client.post("/v1/score", json={"hits": [{"query_id": "1"}]})
        finally:
            app.state.batcher.close()

    answer = asyncio.run(ask())
    assert answer.status_code == 500
    assert answer.json() == {"error": "internal error"}
    assert "secret" not in answer.text and "Traceback" not in answer.text


def test_a_reload_does_not_close_a_scorer_under_a_statement_whose_client_went_away(
    hits: pa.Table,
) -> None:
    """A request holds its Scorer until it is scored, not until its client's request ends: a
    client that goes away while its hits are scored, then a reload, leave the old Scorer open
    until the statement is done."""
    import asyncio
    import contextlib

    from duckscore.api.scorer import Scorer
    from duckscore.runner.job import Job
    from duckscore.serve.app import create_app

    started, go = threading.Event(), threading.Event()
    events: list[str] = []

    class Slow(Scorer):
        def score(self, hits: Any, *, tables: bool = False) -> Any:
            started.set()
            go.wait(30)
            events.append("scored")
            return super().score(hits, tables=tables)

        def close(self) -> None:
            events.append("closed")
            super().close()

    rows = of_queries(hits, ["1"]).to_pylist()

    async def main() -> None:
        app = create_app(lambda: Slow(Job()), access_log=False, scoring_threads=1)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            request = asyncio.create_task(client.post("/v1/score", json={"hits": rows}))
            assert await asyncio.to_thread(started.wait, 30)
            request.cancel()  # the client goes away
            with contextlib.suppress(asyncio.CancelledError):
                await request
            await asyncio.to_thread(app.state.service.reload)
            assert events == []  # the old Scorer still scores: not closed
            go.set()
        await asyncio.to_thread(app.state.batcher.close)  # the statement ends
        app.state.service.close()

    asyncio.run(main())
    assert events == ["scored", "closed", "closed"]  # the old one, then the reloaded one


@pytest.mark.parametrize(("given", "expected"), [(None, [2, 4, 2]), (3, [3, 3, 3])])
def test_a_reload_to_a_job_batched_otherwise_changes_the_scoring_and_reading_threads(
    monkeypatch: pytest.MonkeyPatch, given: int | None, expected: list[int]
) -> None:
    """On 4 CPUs, a per-query job scores on 2 threads (one for two CPUs: batching), a job that
    is not per query on 4 (a request a statement): a reload from one to the other follows,
    unless --scoring-threads fixed the number; the threads reading the requests follow too, and
    a request after each reload is answered."""
    import asyncio

    from duckscore.api.scorer import Scorer
    from duckscore.runner.job import Job
    from duckscore.serve.app import create_app

    monkeypatch.setattr("duckscore.serve.app.os.cpu_count", lambda: 4)
    jobs = iter([Job(), Job(recipe="opensearch_hybrid", allow_recipe_mismatch=True), Job()])
    hits = [
        {"query_id": "q1", "source": "bm25", "item_id": "d1#0", "parent_id": "d1", "score": 12.5},
        {"query_id": "q1", "source": "dense", "item_id": "d1#1", "parent_id": "d1", "score": 0.8},
    ]

    async def main() -> list[int]:
        app = create_app(lambda: Scorer(next(jobs)), access_log=False, scoring_threads=given)
        seen = [app.state.batcher.workers]
        assert app.state.read_pool.workers == seen[0]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            for _ in range(2):
                reloaded = await client.post("/v1/reload")
                assert reloaded.status_code == 200
                seen.append(app.state.batcher.workers)
                assert app.state.read_pool.workers == seen[-1]
                scored = await client.post("/v1/score", json={"hits": hits})
                assert scored.status_code == 200, scored.text
        await asyncio.to_thread(app.state.batcher.close)
        app.state.read_pool.close()
        app.state.service.close()
        return seen

    assert asyncio.run(main()) == expected
