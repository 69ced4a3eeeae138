"""benchmarks/api_memory.py runs ds.fuse on a log as a path and as an Arrow table, in fresh
processes, and prints the memory each added: the same fused rows both ways."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_prints_both_runs_and_the_tables_share(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "api_memory.py"), "--rows", "20k",
         "--memory-limit", "200MB", "--data", str(tmp_path)],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "20,000 log rows, DuckDB memory limit 200MB"
    path_run, table_run = lines[2].split(), lines[3].split()
    assert (path_run[0], table_run[0]) == ("path", "table")
    assert path_run[-1] == table_run[-1] and int(path_run[-1].replace(",", "")) > 0
    assert re.match(r"the Arrow table holds \d+ MB; ds.fuse on it added \d+ MB", lines[4])
