"""mutmut on core/'s policy validation, rendering and input checks, in a scratch project.

    .venv/bin/python -m tests.mutants.python_side FOLDER     # then: cd FOLDER && mutmut run

mutmut 3 imports the mutated code under the module path of its file, so the package folder must
be named `duckscore` (the checkout's is `orchestrator/`, installed as `duckscore`). FOLDER gets a
copy of orchestrator/ as duckscore/, the tests mutmut runs (tests/core's policy, override, check
and typed-input tests and their data files, with tests/helpers.py and tests/conftest.py), links
to sql/, macros/ and fixtures/ (also inside `mutants/`, which mutmut fills with files only) and a
pyproject.toml with the [tool.mutmut] section below.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from .overlay import PACKAGE, ROOT

MUTATE = ["policy.py", "rules.py", "trees.py", "render.py", "validate.py"]
TESTS = ["test_mutant_kills.py", "test_policy.py", "test_overrides_yaml12.py", "test_check.py",
         "test_typed_inputs.py", "test_category_inputs.py"]  # fmt: skip
DATA = ("sql", "macros", "fixtures")


def section() -> str:
    mutate = ", ".join(f'"duckscore/core/{name}"' for name in MUTATE)
    tests = ", ".join(f'"tests/core/{name}"' for name in TESTS)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["duckscore"]\n'
        f"only_mutate = [{mutate}]\n"
        f"pytest_add_cli_args_test_selection = [{tests}]\n"
        'pytest_add_cli_args = ["-m", "not slow and not extended", "-p", "no:cacheprovider", "-q"]\n'
        # forked from a server that never ran a query: a child forked from a process whose
        # DuckDB threads had started waits forever on their locks (mutmut's default, "fork")
        'process_isolation = "forkserver"\n'
        # mutmut's default (15 × the tests' time, twice) spends minutes on each endless loop
        "timeout_multiplier = 5.0\n"
    )


def build(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    ignore = shutil.ignore_patterns("__pycache__", *DATA)
    shutil.copytree(PACKAGE, folder / "duckscore", ignore=ignore)
    (folder / "tests" / "core").mkdir(parents=True)
    for name in ("__init__.py", "helpers.py", "conftest.py"):
        shutil.copy2(ROOT / "tests" / name, folder / "tests" / name)
    for source in (ROOT / "tests" / "core").iterdir():
        if source.is_file() and (source.name in TESTS or not source.name.startswith("test_")):
            shutil.copy2(source, folder / "tests" / "core" / source.name)  # data files too
    for base in (
        folder,
        folder / "duckscore",
        folder / "mutants",
        folder / "mutants" / "duckscore",
    ):
        base.mkdir(parents=True, exist_ok=True)
        for name in DATA:
            (base / name).symlink_to(ROOT / name)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (folder / "pyproject.toml").write_text(text + section(), encoding="utf-8")


if __name__ == "__main__":
    build(Path(sys.argv[1]).resolve())
    print(f"cd {sys.argv[1]} && {ROOT / '.venv' / 'bin' / 'mutmut'} run --max-children 2")
