"""benchmarks/bench.py on a tiny synthetic log: one entry per config, ratios from the right pairs,
the table printed, failures and skips recorded instead of stopping the run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks import bench

TINY = "20k"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated tiny log shared by the tests of this module."""
    folder = tmp_path_factory.mktemp("bench-data")
    bench.ensure_log(folder, bench.parse_sizes(TINY)[0])
    return folder


def pandas_pipeline_importable() -> bool:
    return importlib.util.find_spec("benchmarks.pandas_pipeline") is not None


def run_bench(data_dir: Path, out: Path, configs: list[str]) -> dict:
    argv = [
        "--sizes",
        TINY,
        "--configs",
        ",".join(configs),
        "--data-dir",
        str(data_dir),
        "--out",
        str(out),
    ]
    assert bench.main(argv) == 0
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.extended  # 46 s (a numba compile in the ranx config): `make test-extended`
def test_runs_every_config_once_and_reports(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configs = ["floor", "duckscore", "ranx", "fuse", "lean", "fuse_lean"] + (
        ["pandas"] if pandas_pipeline_importable() else []
    )
    report = run_bench(data_dir, tmp_path / "bench.json", configs)

    by_config = {r["config"]: r for r in report["results"]}
    assert sorted(by_config) == sorted(configs) and len(report["results"]) == len(configs)
    for result in by_config.values():
        assert result["status"] == "ok", result
        assert result["size"] == TINY and result["rows"] > 15_000
        assert result["rows_per_second"] == pytest.approx(result["rows"] / result["seconds"])
        assert result["rows_per_second"] > 0 and result["peak_rss_bytes"] > 10_000_000
        assert result["cpu_seconds"] > 0 and len(result["repetitions"]) == 1
    seconds = {config: r["seconds"] for config, r in by_config.items()}
    assert by_config["floor"]["ratios"] == {} == by_config["floor"]["cpu_ratios"]
    cpu = {config: r["cpu_seconds"] for config, r in by_config.items()}
    assert by_config["duckscore"]["cpu_ratios"] == {
        "b/a": pytest.approx(cpu["duckscore"] / cpu["floor"])
    }
    assert by_config["duckscore"]["ratios"] == {
        "b/a": pytest.approx(seconds["duckscore"] / seconds["floor"])
    }
    assert by_config["ranx"]["ratios"] == {
        "d/b": pytest.approx(seconds["ranx"] / seconds["duckscore"]),
        "d/e": pytest.approx(seconds["ranx"] / seconds["fuse"]),
        "d/g": pytest.approx(seconds["ranx"] / seconds["fuse_lean"]),
    }
    assert by_config["fuse"]["ratios"] == {"e/a": pytest.approx(seconds["fuse"] / seconds["floor"])}
    assert by_config["lean"]["ratios"] == {"f/a": pytest.approx(seconds["lean"] / seconds["floor"])}
    assert by_config["fuse_lean"]["ratios"] == {
        "g/a": pytest.approx(seconds["fuse_lean"] / seconds["floor"])
    }
    if "pandas" in by_config:
        assert by_config["pandas"]["ratios"] == {
            "c/b": pytest.approx(seconds["pandas"] / seconds["duckscore"]),
            "c/f": pytest.approx(seconds["pandas"] / seconds["lean"]),
        }

    printed = capsys.readouterr().out
    assert printed.startswith("| size | rows | config | seconds | CPU s | rows/s | peak RSS (MB) |")
    for config in configs:
        assert f"| {TINY} | " in printed and f" {bench.LETTER[config]} {config} |" in printed
    assert "b/a = " in printed and "d/b = " in printed and "d/e = " in printed
    assert report["table"] == printed.strip()
    assert report["machine"]["cores"] >= 1 and report["machine"]["versions"]["duckdb"]


def test_a_skipped_config_is_recorded(
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(bench, "pandas_pipeline_problem", lambda: "no pandas pipeline here")
    report = run_bench(data_dir, tmp_path / "bench.json", ["pandas"])
    (result,) = report["results"]
    assert result["status"] == "skipped" and result["reason"] == "no pandas pipeline here"
    assert "skipped: no pandas pipeline here" in capsys.readouterr().out


def test_ratios_pair_each_config_with_its_base() -> None:
    results = [
        bench.Result("1M", "floor", "ok", 10, seconds=2.0),
        bench.Result("1M", "duckscore", "ok", 10, seconds=6.0),
        bench.Result("1M", "pandas", "ok", 10, seconds=30.0),
        bench.Result("1M", "ranx", "failed", 10, reason="killed by SIGKILL (out of memory?)"),
        bench.Result("10M", "floor", "failed", 100, reason="MemoryError"),
        bench.Result("10M", "duckscore", "ok", 100, seconds=60.0),
    ]
    bench.add_ratios(results)
    assert [r.ratios for r in results] == [
        {},
        {"b/a": 3.0},
        {"c/b": 5.0},
        {"d/b": None},
        {},
        {"b/a": None},
    ]
    table = bench.markdown_table(results)
    assert "failed: killed by SIGKILL (out of memory?)" in table and "failed: MemoryError" in table


def test_sizes_take_k_and_m_suffixes() -> None:
    sizes = bench.parse_sizes("20k, 1M,1.5M")
    assert [(s.label, s.rows) for s in sizes] == [
        ("20k", 20_000),
        ("1M", 1_000_000),
        ("1.5M", 1_500_000),
    ]
    assert sizes[2].log_name == "log_1.5m.parquet"


def test_configs_keep_the_a_to_e_order_and_reject_unknown_names() -> None:
    assert bench.parse_configs("fuse,ranx,floor") == ["floor", "ranx", "fuse"]
    with pytest.raises(Exception, match="unknown config 'spark'"):
        bench.parse_configs("floor,spark")


def test_failure_reasons() -> None:
    assert bench.failure_reason(-9, "") == "killed by SIGKILL (out of memory?)"
    traceback = "Traceback (most recent call last):\n  ...\nMemoryError\n"
    assert bench.failure_reason(1, traceback) == "MemoryError"
    assert bench.failure_reason(3, "") == "worker exited with status 3"


def test_workers_time_ranx_as_users_run_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests compile ranx at -O0 (conftest); a benchmark worker must not inherit that."""
    monkeypatch.setenv("NUMBA_OPT", "0")
    env = bench.worker_environment(2)
    assert "NUMBA_OPT" not in env and env["OMP_NUM_THREADS"] == "2"
