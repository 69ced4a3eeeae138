"""Progress and warnings are logging (core/reporting.py): the API prints nothing unless its
caller configures logging, and then hears the steps and the warnings the command line prints,
each on the logger of the module saying it; work inside silenced() says nothing, in its own
thread only.

The oracles are the data: ten SciFact queries (a day of tests/run/test_partitions.py's log),
counted by DuckDB, under thresholds no query reaches."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

import duckscore as ds
from duckscore.core.reporting import module_logger, silenced

from ..run.test_partitions import day, write_days

STRICT = ["T_low=0.99", "T_high=0.999"]  # every query low: a warning on ten queries or more


@pytest.fixture(scope="module")
def ten_queries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    logs = tmp_path_factory.mktemp("logs")
    write_days(logs, 1, 1)
    return logs / f"dt={day(1)}" / "part-0.parquet"


def test_the_api_prints_nothing_by_default(ten_queries: Path, tmp_path: Path) -> None:
    """Without the package's NullHandler, Python's last resort would print the warning."""
    code = (
        "import duckscore as ds\n"
        f"ran = ds.run({str(ten_queries)!r}, set={STRICT!r})\n"
        "print(ran.queries.filter(\"confidence_level = 'low'\").aggregate('count(*)').fetchall())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("[(10,)]\n", "")


def test_the_callers_logging_hears_the_steps_and_the_warnings(
    ten_queries: Path, caplog: pytest.LogCaptureFixture
) -> None:
    [(hits, sources)] = duckdb.sql(
        f"SELECT count(*), count(DISTINCT source) FROM read_parquet('{ten_queries}')"
    ).fetchall()
    with caplog.at_level(logging.INFO, logger="duckscore"):
        ds.run(str(ten_queries), set=STRICT)
    steps = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert steps[0].startswith("checking the log (recipe canonical_rrf, policy overall_v3+")
    assert f"{hits:,} hits from {sources} sources" in steps, steps
    assert len(warnings) == 1 and " rates all 10 queries low: " in warnings[0], warnings
    assert {r.name.split(".")[0] for r in caplog.records} == {"duckscore"}
    assert "duckscore.scoring.stages" in {
        r.name for r in caplog.records if r.levelno == logging.WARNING
    }


def test_silenced_work_says_nothing_and_other_threads_still_do(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = module_logger("duckscore.tests")
    with caplog.at_level(logging.INFO, logger="duckscore"):
        with silenced():
            logger.warning("inside")
            other = threading.Thread(target=logger.warning, args=("another thread",))
            other.start()
            other.join()
        logger.info("after")
    assert [r.getMessage() for r in caplog.records] == ["another thread", "after"]
