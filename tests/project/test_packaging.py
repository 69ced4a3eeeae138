"""`pip install .` (not only -e) ships templates, macros, policies, schemas and demo data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..helpers import ROOT

# One worker builds the wheel once, from a copy of the tracked tree: a build in the checkout
# shares its build/ folder with every other build there (CI saw one vanish mid-copy).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]
# not sources; `.tmp` is DuckDB's spill folder of a run started in the checkout: tests running
# beside this one create and remove it, and copying it as it vanishes fails
NOT_SOURCES = (
    ".git",
    ".venv",
    ".venv-*",  # the integrations' tools (`make integrations`)
    "build",
    "*.egg-info",
    ".*_cache",
    ".hypothesis",
    "benchmarks",
    ".tmp",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source") / "duckscore"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES), symlinks=True)
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
               "--no-build-isolation", "-w", str(out), str(source)]  # fmt: skip
    built = subprocess.run(command, capture_output=True, text=True, cwd=out, check=False)
    assert built.returncode == 0, built.stderr
    [built] = out.glob("duckscore-*.whl")
    return built


def test_wheel_contains_the_sql_and_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "duckscore/cli/__init__.py",
        "duckscore/core/session.py",
        "duckscore/sql/score/parents.sql",
        "duckscore/sql/score/_parent_stages.sql",
        "duckscore/sql/score/policies/overall_v1.yaml",
        "duckscore/sql/score/policies/overall_v3.yaml",  # the default policy
        "duckscore/sql/calibrate/domain_thresholds.sql",
        "duckscore/macros/clamp.sql",
        "duckscore/sql/bids/policies/bid_v1.yaml",
        "duckscore/scoring/contract.schema.json",
        "duckscore/answering/contract.schema.json",
        "duckscore/bids/contract.schema.json",
        "duckscore/templates/report.html",  # the page the HTML reports extend
        "duckscore/fixtures/scifact/retrieval_log.parquet",
        "duckscore/fixtures/scifact/README.md",
        "duckscore/fixtures/cisi/retrieval_log.parquet",  # recalibrate's example, the benchmark
        "duckscore/fixtures/cisi/qrels.parquet",
        "duckscore/fixtures/bids/tender/rules.yaml",
        "duckscore/fixtures/code/retrieval_log.parquet",  # demo code's collection
        "duckscore/fixtures/code/entities.parquet",
        "duckscore/fixtures/code/gold.parquet",
    ):
        assert needed in names, needed
    templates = ROOT / "orchestrator" / "templates"  # the HTML reports' pages
    for page in templates.rglob("*.html"):
        assert f"duckscore/templates/{page.relative_to(templates).as_posix()}" in names, page
    assert not any(n.startswith(("tests/", "duckscore/tests")) for n in names)


def installed(wheel: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The wheel installed into tmp_path/site, and an empty folder to run it from."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return target, elsewhere


def test_installed_wheel_scores_from_another_directory(wheel: Path, tmp_path: Path) -> None:
    target, elsewhere = installed(wheel, tmp_path)
    script = (
        "import duckscore, pandas as pd\n"
        "from duckscore.scoring.pipeline import score\n"
        f"assert duckscore.__file__.startswith({str(target)!r}), duckscore.__file__\n"
        "frame = pd.DataFrame({'query_id': ['q', 'q'], 'parent_id': ['a', 'b'],\n"
        "    'rrf_sum': [0.1, 0.2], 'max_score': [1.0, 2.0], 'coverage': [1, 2],\n"
        "    'total_chunks': [3, 4], 'coverage_ratio': [0.5, 0.5]})\n"
        "result = score(frame, 'out', policy='overall_v1')\n"  # the seed's seven columns
        "print(result.queries, result.policy.version)\n"
        "from duckscore.common.report_html import environment\n"  # the reports' pages load
        "print(len([environment().get_template(t) for t in environment().list_templates()]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    pages = len(list((ROOT / "orchestrator" / "templates").rglob("*.html")))
    assert done.stdout.split() == ["1", "overall_v1", str(pages)]
    assert (elsewhere / "out" / "contract.jsonl").is_file()


def test_installed_wheel_runs_the_code_demo(wheel: Path, tmp_path: Path) -> None:
    """`duckscore demo code` reads the collection the package ships, from any directory."""
    target, elsewhere = installed(wheel, tmp_path)
    script = "from duckscore.cli import cli\ncli(['-q', 'demo', 'code', '--out', 'demo'])\n"
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "file       200 instances  Acc@1 0.575  Acc@3 0.770  Acc@5 0.860" in done.stdout
    assert (elsewhere / "demo" / "loc_outputs.jsonl").is_file()
