"""What `import duckscore` gives besides the functions: the base of every error a user can fix,
`ds.DuckscoreError` (issue 47 §4: it was importable only from duckscore.core.errors)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import duckscore as ds
from duckscore.core import errors


def test_duckscore_error_is_the_package_s_own() -> None:
    from duckscore import DuckscoreError

    assert DuckscoreError is ds.DuckscoreError is errors.DuckscoreError
    assert "DuckscoreError" in ds.__all__ and set(ds.API) < set(ds.__all__)
    with pytest.raises(ds.DuckscoreError, match=r"^--log: no such file: nowhere\.parquet$"):
        ds.run("nowhere.parquet")
    with pytest.raises(ds.DuckscoreError, match=r"^unknown score policy 'canonical_rrf'"):
        ds.score("nowhere.parquet", policy="canonical_rrf")


def test_importing_it_loads_no_capability() -> None:
    """The command line starts fast: the package imports core/errors.py and nothing else."""
    code = (
        "import sys; from duckscore import DuckscoreError; "
        "print(sorted(m for m in sys.modules if m.startswith('duckscore')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['duckscore', 'duckscore.core', 'duckscore.core.errors']"
