"""The overlay a mutant runs in (overlay.py) is the checkout's duckscore with its own sql/: the
macros and the bundled data must resolve as in the checkout, else every mutant of a template that
imports a macro fails to render and counts as killed (as it did in a checkout without the
development links orchestrator/macros and orchestrator/fixtures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .overlay import ROOT, Overlay

PROBE = """
import json
from duckscore.core import resources
from duckscore.core.render import environment
environment().get_template("fuse/parent_features.sql")  # imports macros/clamp.sql
print(json.dumps({name: str(getattr(resources, name)()) for name in ("sql_dir", "macros_dir", "fixtures_dir")}))
"""


def test_the_overlay_reads_its_own_sql_and_the_checkouts_macros_and_data(tmp_path: Path) -> None:
    overlay = Overlay(tmp_path / "overlay").build()
    env = dict(os.environ, PYTHONPATH=str(overlay.folder))
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = {name: Path(path) for name, path in json.loads(done.stdout).items()}
    assert found["sql_dir"] == overlay.sql
    assert (found["macros_dir"] / "clamp.sql").resolve() == ROOT / "macros" / "clamp.sql"
    assert (found["fixtures_dir"] / "scifact").resolve() == ROOT / "fixtures" / "scifact"
