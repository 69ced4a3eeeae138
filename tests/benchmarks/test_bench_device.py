"""benchmarks/bench.py's issue-34 additions: CPU seconds beside wall time, --repeat (round-robin,
rotated, medians, ratios as medians of per-round ratios) and the lean-SQL measuring device
(--lean-sql DIR: configs i, j, k from hand-written SQL in a folder outside the project, their
outputs compared with duckscore's). Tiny logs and SQL written into tmp_path; a few seconds."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import duckdb
import pytest

from benchmarks import bench, bench_lean

TINY = "20k"
COUNT_SQL = """-- a hand-written stand-in for the lean SQL: one statement per file
COPY (SELECT query_id, count(*) AS n FROM read_parquet('${LOG}') GROUP BY query_id)
    TO '${OUT}/x.parquet' (FORMAT parquet);
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bench-data")
    bench.ensure_log(folder, bench.parse_sizes(TINY)[0])
    return folder


def lean_folder(folder: Path, rrf_sql: str = COUNT_SQL) -> Path:
    folder.mkdir()
    (folder / "run_explain.sql").write_text(COUNT_SQL)
    (folder / "run_noexplain.sql").write_text(COUNT_SQL)
    (folder / "rrf_fused_parquet.sql").write_text(rrf_sql)
    return folder


def run_bench(data_dir: Path, out: Path, *extra: str) -> dict:
    argv = ["--sizes", TINY, "--data-dir", str(data_dir), "--out", str(out), *extra]
    assert bench.main(argv) == 0
    return json.loads(out.read_text())


def test_each_repetition_rotates_the_order_by_one() -> None:
    configs = ["floor", "duckscore", "fuse", "lean_sql"]
    assert [bench.rotated(configs, rep) for rep in range(5)] == [
        ["floor", "duckscore", "fuse", "lean_sql"],
        ["duckscore", "fuse", "lean_sql", "floor"],
        ["fuse", "lean_sql", "floor", "duckscore"],
        ["lean_sql", "floor", "duckscore", "fuse"],
        ["floor", "duckscore", "fuse", "lean_sql"],
    ]
    assert bench.rotated([], 3) == []


def runs(seconds: list[float], cpu: list[float]) -> list[bench.Repetition]:
    return [
        bench.Repetition(rep, "ok", seconds=s, cpu_seconds=c, peak_rss_bytes=100 + rep)
        for rep, (s, c) in enumerate(zip(seconds, cpu))
    ]


def test_ratios_are_medians_of_the_ratios_within_each_repetition() -> None:
    size = bench.Size("1M", 1_000_000)
    floor = bench.summarise(size, "floor", 1000, runs([1.0, 2.0, 4.0], [1.0, 1.0, 2.0]))
    duckscore = bench.summarise(size, "duckscore", 1000, runs([5.0, 4.0, 6.0], [4.0, 3.0, 5.0]))
    lean_sql = bench.summarise(
        size,
        "lean_sql",
        1000,
        [*runs([4.0, 5.0], [3.0, 3.0]), bench.Repetition(2, "failed", reason="MemoryError")],
    )
    results = [floor, duckscore, lean_sql]
    bench.add_ratios(results)
    # medians of each config's own runs
    assert (floor.seconds, duckscore.seconds, duckscore.cpu_seconds) == (2.0, 5.0, 4.0)
    assert duckscore.peak_rss_bytes == 101 and duckscore.rows_per_second == 200.0
    # b/a per round: 5/1, 4/2, 6/4 -> median 2.0 (not 5.0 / 2.0, the ratio of the medians)
    # b/i per round: 5/4, 4/5 (round 3: i failed) -> median 1.025
    assert duckscore.ratios == {"b/a": 2.0, "b/i": pytest.approx(1.025)}
    # CPU b/a per round: 4/1, 3/1, 5/2 -> 3.0; b/i: 4/3, 3/3 -> 7/6
    assert duckscore.cpu_ratios == {"b/a": 3.0, "b/i": pytest.approx(7 / 6)}
    assert lean_sql.status == "ok" and lean_sql.seconds == 4.5
    assert lean_sql.reason == "1 of 3 runs failed: MemoryError"
    table = bench.markdown_table(results, repeat=3)
    assert table.startswith("Medians of 3 runs per config")
    assert "| 1M | 1,000 | b duckscore | 5.00 | 4.00 | 200 |" in table
    assert "b/a = 2.00, b/i = 1.02 | b/a = 3.00, b/i = 1.17 |" in table
    assert "| 4.50 (2 of 3 ran) | 3.00 |" in table


def test_a_failed_config_has_no_ratio_and_no_cpu() -> None:
    size = bench.Size("1M", 1_000_000)
    floor = bench.summarise(size, "floor", 10, [bench.Repetition(0, "failed", reason="boom")])
    duckscore = bench.summarise(size, "duckscore", 10, runs([3.0], [2.0]))
    bench.add_ratios([floor, duckscore])
    assert floor.status == "failed" and floor.reason == "boom" and floor.cpu_seconds is None
    assert duckscore.ratios == {"b/a": None} and duckscore.cpu_ratios == {"b/a": None}


def test_the_floor_reports_cpu_seconds_for_every_repetition(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_bench(data_dir, tmp_path / "bench.json", "--configs", "floor", "--repeat", "2")
    (result,) = report["results"]
    assert result["status"] == "ok" and 0 < result["cpu_seconds"] < 60
    assert [run["rep"] for run in result["repetitions"]] == [0, 1]
    assert all(run["cpu_seconds"] > 0 for run in result["repetitions"])
    assert result["seconds"] == pytest.approx(
        statistics.median(run["seconds"] for run in result["repetitions"])
    )
    assert report["settings"]["repeat"] == 2 and report["settings"]["lean_sql"] is None
    printed = capsys.readouterr().out
    assert (
        "| size | rows | config | seconds | CPU s | rows/s | peak RSS (MB) | time ratio" in printed
    )


def test_lean_sql_configs_run_from_the_given_folder(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = lean_folder(tmp_path / "lean sql")  # a space in the path: it is quoted
    configs = "floor,lean_sql,lean_sql_noexplain,lean_rrf"
    report = run_bench(
        data_dir, tmp_path / "bench.json", "--configs", configs, "--lean-sql", str(folder)
    )
    by_config = {r["config"]: r for r in report["results"]}
    assert list(by_config) == ["floor", "lean_sql", "lean_sql_noexplain", "lean_rrf"]
    for config in ("lean_sql", "lean_sql_noexplain", "lean_rrf"):
        result = by_config[config]
        assert result["status"] == "ok", result
        assert result["cpu_seconds"] > 0 and result["peak_rss_bytes"] > 10_000_000
        assert result["outputs"]["statements"] == 1 and result["outputs"]["output_bytes"] > 0
    printed = capsys.readouterr().out
    for line in ("i lean_sql |", "j lean_sql_noexplain |", "k lean_rrf |"):
        assert line in printed
    assert report["settings"]["lean_sql"] == str(folder)
    assert "lean_sql_outputs" not in report["checks"]  # no duckscore config beside them


def test_lean_outputs_are_compared_and_a_difference_is_a_warning(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong_fused = COUNT_SQL.replace("${OUT}/x.parquet", "${OUT}/fused.parquet")
    folder = lean_folder(tmp_path / "lean", rrf_sql=wrong_fused)
    report = run_bench(
        data_dir,
        tmp_path / "bench.json",
        "--configs",
        "fuse_lean,lean_rrf",
        "--lean-sql",
        str(folder),
    )
    by_config = {r["config"]: r for r in report["results"]}
    assert {r["status"] for r in by_config.values()} == {"ok"}
    assert set(by_config["fuse_lean"]["ratios"]) == {"g/k"}
    assert set(by_config["fuse_lean"]["cpu_ratios"]) == {"g/k"}
    (check,) = report["checks"]["lean_sql_outputs"]
    assert (check["duckscore"], check["lean"], check["rep"], check["ok"]) == (
        "fuse_lean",
        "lean_rrf",
        0,
        False,
    )
    assert check["files"]["fused.parquet"]["reason"] == "schemas differ"
    captured = capsys.readouterr()
    assert "20k g fuse_lean vs k lean_rrf: outputs DIFFER: fused.parquet: schemas differ" in (
        captured.out
    )
    assert "WARNING: 20k g fuse_lean vs k lean_rrf" in captured.err


def test_a_lean_config_without_lean_sql_is_refused(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--sizes", TINY, "--configs", "floor,lean_sql", "--data-dir", str(data_dir)]
    assert bench.main([*argv, "--out", str(tmp_path / "bench.json")]) == 2
    error = capsys.readouterr().err
    assert (
        error
        == "bench.py: error: config i lean_sql needs --lean-sql DIR (a folder of hand-written SQL)\n"
    )
    assert not (tmp_path / "bench.json").exists()
    missing = [*argv, "--lean-sql", str(tmp_path), "--out", str(tmp_path / "bench.json")]
    assert bench.main(missing) == 2
    assert capsys.readouterr().err.strip().endswith(f"{tmp_path}: missing run_explain.sql")


def test_the_lean_configs_join_the_default_only_with_lean_sql(tmp_path: Path) -> None:
    assert bench.chosen_configs(bench.parse_args([])) == (list(bench.BASE_CONFIGS), None)
    folder = lean_folder(tmp_path / "lean")
    with_lean = bench.parse_args(["--lean-sql", str(folder)])
    assert bench.chosen_configs(with_lean) == (list(bench.CONFIGS), None)
    assert bench.LETTER["lean_sql"] == "i" and bench.LETTER["lean_rrf"] == "k"


def test_lean_statements_substitute_paths_and_threads(tmp_path: Path) -> None:
    sql = tmp_path / "run.sql"
    sql.write_text(
        "-- a comment line\n"
        "SET preserve_insertion_order = false;\n\n"
        "CREATE TABLE t AS\n"
        "SELECT * FROM read_parquet('${LOG}');  \n"
        "-- @if SELECT count(*) > 0 FROM t\n"
        "SET threads = 1;\n"
        "COPY t TO '${OUT}/t.parquet';\n"
        "SET threads = 2;\n"
    )
    statements = bench_lean.lean_statements(sql, Path("/d/it's.parquet"), Path("/o"), threads=3)
    assert statements == [
        (None, "SET preserve_insertion_order = false;"),
        (None, "CREATE TABLE t AS\nSELECT * FROM read_parquet('/d/it''s.parquet');"),
        ("SELECT count(*) > 0 FROM t", "SET threads = 1;"),
        (None, "COPY t TO '/o/t.parquet';"),
        (None, "SET threads = 3;"),
    ]


def test_compare_outputs_parquet_by_except_all_and_the_contract_by_sha256(
    tmp_path: Path,
) -> None:
    ours, lean = tmp_path / "ours", tmp_path / "lean"
    ours.mkdir(), lean.mkdir()
    connection = duckdb.connect()
    for folder, last in ((ours, 3), (lean, 3)):
        connection.execute(
            f"COPY (SELECT range AS q FROM range({last})) TO '{folder}/fused.parquet' (FORMAT parquet)"
        )
        (folder / "contract.jsonl").write_text('{"q": 1}\n')
    same = bench_lean.compare_outputs(ours, lean, threads=1)
    assert same["ok"] and list(same["files"]) == ["fused.parquet", "contract.jsonl"]
    assert bench_lean.describe_comparison(same) == "outputs equal (fused.parquet, contract.jsonl)"

    connection.execute(
        f"COPY (SELECT range AS q FROM range(1, 5)) TO '{lean}/fused.parquet' (FORMAT parquet)"
    )
    (lean / "contract.jsonl").write_text('{"q": 2}\n')
    different = bench_lean.compare_outputs(ours, lean, threads=1)
    fused = different["files"]["fused.parquet"]
    assert not different["ok"]
    assert (fused["only_in_duckscore"], fused["only_in_lean"]) == (1, 2)
    assert different["files"]["contract.jsonl"] == {"ok": False, "sha256_equal": False}
    assert bench_lean.describe_comparison(different) == (
        "outputs DIFFER: fused.parquet: only in duckscore 1, only in lean 2; "
        "contract.jsonl: sha256 differs"
    )
