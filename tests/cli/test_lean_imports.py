"""Commands run once a step (a pipeline's, a hook's on every event) do not import pandas, whose
import is 0.3–0.5 s of each process: `instincts ingest` took 1.09 s with it, 0.52 without."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import SCIFACT

CALL = (
    "import sys\n"
    "from duckscore.cli.app import cli\n"
    "for args in sys.argv[1:]:\n"
    "    try:\n"
    "        cli(args.split(), standalone_mode=False)\n"
    "    except SystemExit as stop:\n"
    "        assert not stop.code, stop.code\n"
    "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))\n"
)


def imported(tmp_path: Path, *commands: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", CALL, *commands],
        capture_output=True, text=True, check=True, cwd=tmp_path,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_fuse_imports_neither_pandas_nor_numpy(tmp_path: Path) -> None:
    assert imported(tmp_path, f"-q fuse --log {SCIFACT / 'retrieval_log.parquet'} --out o") == "[]"


@pytest.mark.slow
def test_the_instinct_stores_steps_do_not_import_pandas(tmp_path: Path) -> None:
    (tmp_path / "events.csv").write_text(
        "event_id,instinct_id,event_type,occurred_at\n"
        "e1,11111111-1111-4111-8111-111111111111,applied_successfully,2026-03-02 10:00:00\n",
        encoding="utf-8",
    )
    (tmp_path / "instincts.csv").write_text(
        "id,trigger_text,action_text,domain,user_id\n"
        "11111111-1111-4111-8111-111111111111,a,b,sql,aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa\n",
        encoding="utf-8",
    )
    steps = (
        "-q instincts init --db s.duckdb",
        "-q instincts ingest --db s.duckdb --instincts instincts.csv --events events.csv"
        " --now 2026-03-05",
        "-q instincts recompute --db s.duckdb --now 2026-03-05",
        "-q instincts decay --db s.duckdb --now 2026-03-20",
    )
    assert "pandas" not in imported(tmp_path, *steps)
