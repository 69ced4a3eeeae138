"""The suite's `xdist_group` marks work: tests of one group run on one worker (one JVM, one
PostgreSQL server, one SciFact calibration). pytest 9.2 silently stopped pytest-xdist's
`--dist loadgroup` from grouping (pyproject pins pytest below it): this fails if that returns."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

GROUPED = textwrap.dedent("""
    import os
    from pathlib import Path
    import pytest

    @pytest.mark.xdist_group("one")
    @pytest.mark.parametrize("i", range(4))
    def test_grouped(i):
        Path(f"ran_{i}").write_text(os.environ["PYTEST_XDIST_WORKER"])

    @pytest.mark.parametrize("i", range(4))
    def test_free(i):
        pass
""")


def test_loadgroup_sends_a_group_to_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-rA",
            "-s",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_grouped.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {path.read_text() for path in tmp_path.glob("ran_*")}
    assert len(list(tmp_path.glob("ran_*"))) == 4 and len(workers) == 1, workers
