"""Shared fixtures."""

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from .helpers import SCIFACT


def pytest_configure(config: pytest.Config) -> None:
    """The tests' cache folder (core/cache.py) is their own, empty at the start and removed at
    the end: nothing is read from or left in the user's ~/.cache."""
    os.environ["DUCKSCORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="duckscore-test-cache-")
    # ranx, an oracle, is numba code compiled at first use: 2.5 minutes of one worker on a fresh
    # machine at LLVM's -O3, 2 at -O0, the same numbers (no fastmath: IEEE arithmetic either
    # way); the variable is read when numba is imported, after this, in every worker and
    # subprocess (the benchmark runner's workers drop it: they time ranx as users run it).
    os.environ.setdefault("NUMBA_OPT", "0")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop("DUCKSCORE_CACHE_DIR", ""), ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every Spark test is the extended tier's: a JVM, and a Spark job a run, did not fit
    `make test`'s 15 minutes (docs/testing.md)."""
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.extended)


@pytest.fixture(scope="session")
def scifact_dir() -> Path:
    return SCIFACT


@contextmanager
def spark_session() -> Iterator[Any]:
    """A small local Spark (two cores, no UI, quiet), stopped afterwards."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("duckscore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("OFF")
    try:
        yield session
    finally:
        session.stop()
