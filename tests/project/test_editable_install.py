"""`pip install -e .`, what a contributor types: the packaged recipes, policies, macros and demo
data resolve in an editable install too, in setuptools' default mode and in strict mode, from
another working directory. setuptools' editable finder maps the package `duckscore` to
`orchestrator/`, but `sql/`, `macros/` and `fixtures/` stay beside it, where a wheel nests them
inside (core/resources.py finds either).

Offline: the install is built from a copy of the checkout's build inputs with the test
environment's setuptools (no build isolation, no dependencies) into a scratch venv that sees the
test environment's packages, all but its own duckscore."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ..helpers import ROOT

pytestmark = pytest.mark.slow

BUILD_INPUTS = ("pyproject.toml", "README.md", "orchestrator", "sql", "macros", "fixtures")


def not_sources(folder: str, names: list[str]) -> set[str]:
    """Caches, and links: a working copy may link the data folders into orchestrator/, which a
    clone does not have, and the install must not depend on them."""
    return {n for n in names if n == "__pycache__" or os.path.islink(os.path.join(folder, n))}


def scratch_venv(folder: Path) -> Path:
    """A venv without pip whose only packages are the test environment's, less duckscore; its
    python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    packages = folder / "packages"
    packages.mkdir()
    for where in {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}:
        for entry in Path(where).iterdir():
            if "duckscore" not in entry.name and not (packages / entry.name).exists():
                (packages / entry.name).symlink_to(entry)
    (site / "test-packages.pth").write_text(f"{packages}\n")
    return python


@pytest.mark.parametrize("mode", [None, "strict"], ids=["default", "strict"])
def test_an_editable_install_fuses_with_a_packaged_recipe(tmp_path: Path, mode: str | None) -> None:
    source = tmp_path / "checkout"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=not_sources)
        else:
            shutil.copy2(ROOT / name, source / name)
    python = scratch_venv(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    settings = [] if mode is None else ["--config-settings", f"editable_mode={mode}"]
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--disable-pip-version-check", "--no-index", "--no-deps", "--no-build-isolation",
         *settings, "-e", str(source)],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    imported = subprocess.run(
        [str(python), "-c", "import os, duckscore; print(os.path.realpath(duckscore.__file__))"],
        capture_output=True, text=True, env=env, cwd=elsewhere,
    )  # fmt: skip
    assert imported.stdout.strip() == str(source / "orchestrator" / "__init__.py"), imported.stderr
    log = source / "fixtures" / "scifact" / "retrieval_log.parquet"
    fused = subprocess.run(
        [str(python.parent / "duckscore"), "fuse", "--log", str(log), "--recipe", "canonical_rrf",
         "--out", "out"],
        capture_output=True, text=True, env=env, cwd=elsewhere,
    )  # fmt: skip
    assert fused.returncode == 0, fused.stderr
    assert json.loads((elsewhere / "out" / "manifest.json").read_text())["recipe_id"] == (
        "canonical_rrf"
    )
