"""benchmarks/profile_run.py prints one timed line per step of `duckscore run` and the total."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.synthetic_log import generate

ROOT = Path(__file__).resolve().parents[2]


def test_prints_each_step_with_its_share(tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    generate(str(log), 5_000)
    script = ROOT / "benchmarks" / "profile_run.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            str(log),
            "--no-explain",
            "--threads",
            "1",
            "--min-seconds",
            "0",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    header, *lines = done.stdout.splitlines()
    assert header.split() == ["wall", "share", "CPU", "step"]
    steps = [line.split("%", 1)[1].split("s  ", 1)[1] for line in lines]
    assert steps[-1] == "run (total)" and lines[-1].split()[1] == "100.0%"
    total_cpu = float(lines[-1].split()[2].rstrip("s"))
    assert total_cpu > 0
    for step in ("read and validate log", "write fused.parquet", "write contract.jsonl"):
        assert step in steps, steps
    assert any(step.startswith("create scored_parents") for step in steps)
