"""The issue-32 and issue-33 measurement scripts run and report what their docs say they do."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks import cross_domain, live_bench, serve_bench

pytestmark = pytest.mark.slow


def test_live_bench_reports_both_sides(tmp_path: Path) -> None:
    results = live_bench.main(
        ["--rounds", "1", "--queries", "5", "--json", str(tmp_path / "l.json")]
    )
    assert results["requests"] == 5
    assert 0 < results["floor_p50_ms"] <= results["floor_p99_ms"]
    assert 0 < results["live_p50_ms"] <= results["live_p99_ms"]
    assert results["live_p50_over_floor_p50"] == pytest.approx(
        results["live_p50_ms"] / results["floor_p50_ms"]
    )
    assert json.loads((tmp_path / "l.json").read_text()) == results


def test_cross_domain_measures_both_collections() -> None:
    printed: list[str] = []
    results = cross_domain.main(["--labels", "40", "--splits", "1"], echo=printed.append)
    defaults = {row["collection"]: row for row in results["defaults"]}
    assert defaults["scifact"]["judged"] == 300 and defaults["cisi"]["judged"] == 76
    for row in defaults.values():  # the default's best parent: as often relevant as fused top-1
        assert row["best_parent_relevant"] >= row["fused_top1_relevant"] - 0.02
    assert [row["policy"] for row in results["target"]][:3] == [
        "as shipped", "no labels, --adapt quantile", "no labels, --adapt prior"
    ]  # fmt: skip
    assert results["target"][3]["n"] == 36  # judged on the 36 judged queries not learned from
    assert "| cisi | 76 |" in printed[0]


@pytest.mark.xdist_group("serve")  # a real server process, as tests/serve starts them
def test_serve_bench_loads_a_real_server(tmp_path: Path) -> None:
    results = serve_bench.main(
        ["--requests", "3", "--clients", "1,2", "--json", str(tmp_path / "s.json")]
    )
    rows = results["load"]
    assert [(row["batching"], row["clients"]) for row in rows] == [
        ("off", 1), ("off", 2), ("on", 1), ("on", 2)
    ]  # fmt: skip
    assert [row["requests"] for row in rows] == [3, 6, 3, 6]
    for row in rows:
        assert 0 < row["p50_ms"] <= row["p99_ms"] and row["queries_per_second"] > 0
        assert 0 < row["rss_mb_after"] <= row["peak_rss_mb"]
        # each side's CPU a query: some, and at most every core busy all the load's wall time
        # (and a clock tick, 10 ms, over the load)
        most = (os.cpu_count() or 1) * 1000 / row["queries_per_second"] + 10 / row["requests"]
        assert 0 < row["server_cpu_ms_per_query"] <= most
        assert 0 < row["client_cpu_ms_per_query"] <= most
    ratio = results["on_over_off"][1]
    assert ratio["clients"] == 2
    assert ratio["queries_per_second"] == pytest.approx(
        rows[3]["queries_per_second"] / rows[1]["queries_per_second"]
    )
    assert json.loads((tmp_path / "s.json").read_text()) == results


def test_live_bench_soak_reports_each_tenth_and_recycles() -> None:
    """--soak N: a checkpoint every N/10 calls, each with its p50 and RSS; the lanes' DuckDB
    instance recycled every --recycle-calls warm calls: of 36 calls (a first, 5 in the round, 30
    in the soak) 4 take the checked path (the first, and the first after each recycle), and the
    32 warm ones give 3 recycles of 10."""
    results = live_bench.main(
        ["--rounds", "1", "--queries", "5", "--soak", "30", "--recycle-calls", "10"]
    )
    assert [point["calls"] for point in results["soak"]] == list(range(3, 31, 3))
    for point in results["soak"]:
        assert 0 < point["p50_ms"] <= point["p99_ms"] and point["rss_mb"] > 0
    assert results["soak"][-1]["recycles"] == 3


def test_live_bench_soak_on_threads_counts_every_call() -> None:
    """--soak-threads 3: the 30 calls made by three threads of one scorer are all counted, a
    checkpoint every 3 calls as with one thread."""
    results = live_bench.main(
        ["--rounds", "1", "--queries", "5", "--soak", "30", "--soak-threads", "3"]
    )
    assert results["soak_calls"] == 30 and results["soak_threads"] == 3
    assert [point["calls"] for point in results["soak"]] == list(range(3, 31, 3))


def test_live_bench_refuses_a_soak_without_threads(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        live_bench.main(["--soak", "30", "--soak-threads", "0"])
    assert stopped.value.code == 2
    assert "--soak-threads: must be 1 or more, not 0" in capsys.readouterr().err
