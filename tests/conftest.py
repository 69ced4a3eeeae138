"""Shared fixtures."""

from pathlib import Path

import pytest

from .helpers import SCIFACT


@pytest.fixture(scope="session")
def scifact_dir() -> Path:
    return SCIFACT
