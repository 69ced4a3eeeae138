"""The suite's `xdist_group` marks work: under `--dist loadgroup` (what `make test` runs) a
grouped test's node id carries its group, which is how pytest-xdist sends a group to one worker
(one JVM, one PostgreSQL server, one SciFact calibration). pytest 9.2 silently dropped that
suffix, and every group ran on both workers (pyproject pins pytest below 9.2): this fails if that
returns. Outside loadgroup (one process, or `make test-fast`) there is nothing to check."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("guard")
def test_a_grouped_test_knows_its_group(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run under --dist loadgroup")
    assert request.node.nodeid.endswith("@guard"), request.node.nodeid
