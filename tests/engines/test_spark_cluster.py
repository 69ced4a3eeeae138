"""`duckscore run --engine spark` as users who outgrow one machine run it (issue 52 §1): against
a standalone Spark cluster — a master and a worker started from the installed pyspark on this
machine — not `local[*]`; and a failure inside Spark as one line on stderr, never the JVM's
stack traces. The command runs in its own process, as a user's shell runs it (its own driver
JVM; stderr as the terminal shows it)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from ..helpers import need, need_module
from .test_spark import SCIFACT_LOG, assert_same_outputs

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REGISTERED = "Successfully registered with master"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spark_class(home: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(home / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master and one worker (2 cores, 2 GB), stopped afterwards: the master's URL."""
    need(shutil.which("java") is not None, "a JVM")
    home = Path(need_module("pyspark").__file__).parent
    folder = tmp_path_factory.mktemp("cluster")
    url = f"spark://127.0.0.1:{free_port()}"
    master = spark_class(
        home, folder / "master.log", "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1], "--webui-port", str(free_port()),
    )  # fmt: skip
    worker = spark_class(
        home, folder / "worker.log", "org.apache.spark.deploy.worker.Worker", url,
        "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
        "--webui-port", str(free_port()), "--work-dir", str(folder / "work"),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while REGISTERED not in (folder / "worker.log").read_text(errors="replace"):
            assert time.monotonic() < deadline, (folder / "worker.log").read_text()
            assert master.poll() is None and worker.poll() is None, "the cluster stopped"
            time.sleep(0.5)
        yield url
    finally:
        for process in (worker, master):
            process.terminate()
            process.wait(timeout=60)


def duckscore(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_PYTHON")}
    return subprocess.run(
        [sys.executable, "-m", "duckscore", *args],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip


def test_the_defaults_on_a_standalone_cluster_equal_the_duckdb_engine(
    cluster: str, tmp_path: Path
) -> None:
    """The bundled log's first 60 queries, the default recipe and policy, the CLI's 8 shards,
    on the cluster."""
    log = tmp_path / "log.parquet"
    duckdb.sql(
        f"COPY (FROM '{SCIFACT_LOG}' WHERE query_id IN (SELECT DISTINCT query_id "
        f"FROM '{SCIFACT_LOG}' ORDER BY query_id LIMIT 60)) TO '{log}'"
    )
    common = ["run", "--log", str(log)]
    done = duckscore(*common, "--out", str(tmp_path / "duck"))
    assert done.returncode == 0, done.stderr
    done = duckscore(
        *common, "--engine", "spark", "--spark-master", cluster, "--out", str(tmp_path / "spark")
    )
    assert done.returncode == 0, done.stderr
    assert "\tat " not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert_same_outputs(tmp_path / "duck", tmp_path / "spark")


def test_a_failure_inside_spark_is_one_line_naming_the_stage(tmp_path: Path) -> None:
    """A log Spark cannot read: the last line of stderr says which stage failed and why; no
    Java stack trace, no Python traceback, no output folder."""
    log = tmp_path / "log.parquet"
    log.write_bytes(b"not a parquet file, though named one" * 20)
    done = duckscore("run", "--engine", "spark", "--log", str(log), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("duckscore: error: Spark failed reading the log: "), done.stderr
    assert "is not a Parquet file" in last
    assert "\tat " not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
