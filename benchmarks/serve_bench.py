"""Issue 33: `duckscore serve` under load — a real server process on 127.0.0.1 and real HTTP
clients (httpx), each request the hits of one SciFact query (about 250 hits, JSON).

For each batching setting (issue 52 §2: `off` is `serve --max-batch 1`, each request its own
statement; `on` is serve's default, requests arriving together scored by one statement), a
server of its own, and for 1 and 16 concurrent clients (threads, each with its own connection),
every client sends --requests requests in turn, cycling through the 300 queries; prints p50 and
p99 latency, the throughput in queries per second, the server's RSS before and after and its
peak (VmRSS, VmHWM from /proc), and the ratios of `on` to `off` at each number of clients.
The floor beside it is the in-process DuckDB GROUP BY + RRF of `live_bench.py`.

    python benchmarks/serve_bench.py [--requests 200] [--clients 1,16] [--batching off,on]
        [--scoring-threads N] [--json results/serve.json]
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb
import httpx

from duckscore.core.resources import fixtures_dir


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bodies() -> list[bytes]:
    log = fixtures_dir() / "scifact" / "retrieval_log.parquet"
    frame = duckdb.sql(f"FROM read_parquet('{log}')").df()
    return [
        json.dumps({"hits": group.to_dict(orient="records")}, default=str).encode()
        for _, group in frame.groupby("query_id", sort=True)
    ]


NO_DELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
# serve's options of each batching setting
BATCHING = {"off": ["--max-batch", "1"], "on": []}


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start(port: int, options: list[str]) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "duckscore", "serve", "--port", str(port), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("duckscore serve did not answer /healthz within 60 s")


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(
    port: int, payloads: list[bytes], clients: int, requests: int, server_pid: int
) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/v1/score"

    def client(offset: int) -> list[float]:
        times = []
        # TCP_NODELAY, as most HTTP clients set it: without it the body, sent after the
        # headers, waits for the server's delayed ACK (about 40 ms on Linux) on every request
        transport = httpx.HTTPTransport(socket_options=[NO_DELAY])
        with httpx.Client(timeout=60, transport=transport) as http:
            for i in range(requests):
                body = payloads[(offset + i) % len(payloads)]
                t = time.perf_counter()
                answer = http.post(url, content=body, headers={"Content-Type": "application/json"})
                times.append((time.perf_counter() - t) * 1000)
                if answer.status_code != 200:
                    raise RuntimeError(f"status {answer.status_code}: {answer.text[:200]}")
        return times

    started, client_cpu, server_cpu = (
        time.perf_counter(),
        time.process_time(),
        cpu_seconds(server_pid),
    )
    with ThreadPoolExecutor(max_workers=clients) as pool:
        latencies = [t for times in pool.map(client, range(0, clients * 7, 7)) for t in times]
    wall = time.perf_counter() - started
    client_cpu, server_cpu = time.process_time() - client_cpu, cpu_seconds(server_pid) - server_cpu
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "clients": clients,
        "requests": len(latencies),
        "p50_ms": cuts[49],
        "p99_ms": cuts[98],
        "queries_per_second": len(latencies) / wall,
        # the clients share the machine: what each side's CPU costs a query
        "server_cpu_ms_per_query": server_cpu * 1000 / len(latencies),
        "client_cpu_ms_per_query": client_cpu * 1000 / len(latencies),
    }


def served(
    batching: str, options: list[str], payloads: list[bytes], clients: list[int], requests: int
) -> list[dict[str, Any]]:
    """The load rows of one server started with `options`, one a number of clients."""
    port = free_port()
    server = start(port, [*BATCHING[batching], *options])
    try:
        before = rss_mb(server.pid)
        rows = [
            load(port, payloads, c, requests, server.pid) | {"batching": batching} for c in clients
        ]
        after, peak = rss_mb(server.pid), peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    for row in rows:
        print(
            f"batching {batching:>3}, {row['clients']:>3} clients: {row['requests']} requests, "
            f"p50 {row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms, "
            f"{row['queries_per_second']:.0f} queries/s; CPU a query: server "
            f"{row['server_cpu_ms_per_query']:.1f} ms, clients {row['client_cpu_ms_per_query']:.1f} ms"
        )
    print(f"  server RSS {before:.0f} MB before, {after:.0f} MB after, peak {peak:.0f} MB")
    return [
        row | {"rss_mb_before": before, "rss_mb_after": after, "peak_rss_mb": peak} for row in rows
    ]


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`on` over `off` at each number of clients, for every measure."""
    measures = ("queries_per_second", "p50_ms", "p99_ms", "peak_rss_mb")
    by = {(row["batching"], row["clients"]): row for row in rows}
    found = []
    for clients in sorted({row["clients"] for row in rows}):
        off, on = by.get(("off", clients)), by.get(("on", clients))
        if off is None or on is None:
            continue
        found.append({"clients": clients} | {m: on[m] / off[m] for m in measures})
        print(
            f"on/off at {clients:>3} clients: "
            + ", ".join(f"{m} {found[-1][m]:.2f}x" for m in measures)
        )
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="per client")
    parser.add_argument("--clients", default="1,16")
    parser.add_argument("--batching", default="off,on", help="off, on or both (off,on)")
    parser.add_argument("--scoring-threads", type=int, help="serve's --scoring-threads")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    payloads = bodies()
    # the clients' process is the measuring device: its collector's full passes over what it
    # loaded to build the bodies (40-60 ms each, every client thread stopped) are not the server's
    gc.collect()
    gc.freeze()
    atexit.register(gc.unfreeze)  # (else DuckDB's bindings report what is left at the exit)
    clients = [int(c) for c in args.clients.split(",")]
    threads = ["--scoring-threads", str(args.scoring_threads)] if args.scoring_threads else []
    rows = [
        row
        for batching in args.batching.split(",")
        for row in served(batching, threads, payloads, clients, args.requests)
    ]
    results = {"load": rows, "on_over_off": ratios(rows), "cpus": os.cpu_count()}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
