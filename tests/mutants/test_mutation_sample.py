"""CI's mutation check (extended tier): a fixed sample of the SQL templates' mutants, each run
against its template's fast tests; every one must be killed or recorded in equivalent.yaml.
`make mutants` runs a larger sample, `python -m tests.mutants.run` all of them (docs/testing.md).
No baseline run: CI has run the same tests on the unmutated templates before this tier; no
reach pass (reach.py): for one mutant a template it costs more than it saves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .run import main

PER_CAPABILITY = 1
SEED = 37
NAMED = ["fuse/fused.sql:param:1e8a0403", "fuse/components/normalizer/bounds.sql:cond:3f23ee95"]


@pytest.mark.slow
@pytest.mark.extended
def test_no_sampled_mutant_survives(tmp_path: Path) -> None:
    out = str(tmp_path / "sample")
    code = main(["--sample", str(PER_CAPABILITY), "--seed", str(SEED), "--jobs", "1",
                 "--timeout", "300", "--no-baseline", "--no-reach", "--out", out])  # fmt: skip
    results = json.loads((tmp_path / "sample" / "report.json").read_text())
    alive = [r["id"] for r in results if r["status"] in ("survived", "error")]
    assert code == 0 and not alive, (tmp_path / "sample" / "report.md").read_text()


@pytest.mark.slow
@pytest.mark.extended
def test_the_two_survivors_of_issue_37_are_killed(tmp_path: Path) -> None:
    args = [arg for name in NAMED for arg in ("--id", name)]
    code = main([*args, "--capability", "fuse", "--jobs", "1", "--no-baseline", "--no-reach",
                 "--tests", "tests/fuse/test_mutant_kills.py", "--out", str(tmp_path)])  # fmt: skip
    results = json.loads((tmp_path / "report.json").read_text())
    assert code == 0 and [r["status"] for r in results] == ["killed", "killed"]
