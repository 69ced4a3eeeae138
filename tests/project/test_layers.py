"""The package's architecture, read from the source (docs/design.md draws it):

- `core/` imports nothing of duckscore outside core, and never click;
- a capability imports `core/`, `common/` and only the capabilities it is declared to build on
  (DEPENDS_ON below), and from another package only public names of public modules;
- only `cli/` imports click;
- no import circle between modules, nor between packages;
- no module over MAX_LINES lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ..helpers import ROOT

PACKAGE = ROOT / "orchestrator"  # installed as `duckscore`
MAX_LINES = 500
BASE = {"core", "common"}
# package -> the packages it may import (besides itself)
DEPENDS_ON: dict[str, set[str]] = {
    "core": set(),
    "common": {"core"},
    "fusion": BASE,
    "scoring": BASE,
    "answering": BASE,
    "metrics": BASE,
    "bids": BASE,
    "instincts": BASE,
    "code": BASE,  # the entities of a Python repository (duckscore entities)
    "export": BASE,  # decisions for other tools, read from output folders
    "runner": BASE | {"fusion", "scoring"},
    "calibrate": BASE | {"fusion", "scoring", "answering", "metrics"},
    "demo": BASE | {"runner", "fusion", "scoring", "metrics", "calibrate", "bids"},
    "engines": BASE,  # the SQL transpiled (run --engine spark is run/spark.py)
    # the macro pack compiles the run graph (run/graph.py) to table macros
    "pack": BASE | {"fusion", "scoring", "runner", "instincts", "metrics", "answering"},
    "api": BASE | {"fusion", "scoring", "runner", "answering", "metrics", "pack"},
    "serve": BASE
    | {"api", "answering", "runner", "fusion", "instincts"},  # duckscore serve: the live scorer
    # over HTTP, its OpenAPI document read off the retrieval_log contract (fuse/contract.py), and
    # seed 004's instinct store (--instincts-db)
    # duckscore dbt package: the macro pack and the score templates as a dbt package
    "dbt": BASE | {"fusion", "scoring", "runner", "instincts", "answering", "pack"},
    "phoenix": BASE | {"export"},  # a running Phoenix: pull spans, post annotations
    "cli": BASE
    | {
        "fusion",
        "scoring",
        "runner",
        "answering",
        "metrics",
        "calibrate",
        "code",
        "bids",
        "instincts",
        "engines",
        "demo",
        "pack",
        "api",
        "export",
        "serve",
        "dbt",
        "phoenix",
    },
}
OUTSIDE = "<outside>."


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def modules(root: Path = PACKAGE) -> list[Path]:
    return sorted(root.rglob("*.py"))


def dotted(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[str, list[str], bool, int]]:
    """(imported module — dotted inside the package, or OUTSIDE + its name — the names taken,
    whether the import runs when the module loads, line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = dotted(path, root).split(".") if dotted(path, root) else []
    base = here if path.name == "__init__.py" else here[:-1]
    on_load = {id(node) for node in tree.body}
    type_only = {
        id(n)
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        loads = id(node) in on_load and id(node) not in type_only
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level:
                parent = base[: len(base) - (node.level - 1)]
                target = ".".join(parent + ([node.module] if node.module else []))
                found.append((target, names, loads, node.lineno))
            else:
                found.append((OUTSIDE + (node.module or ""), names, loads, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(OUTSIDE + alias.name, [], loads, node.lineno) for alias in node.names]
    return found


def layer_violations(path: Path, root: Path = PACKAGE) -> list[str]:
    package = dotted(path, root).split(".")[0]
    problems = []
    for target, names, _, line in imports(path, root):
        where = f"{path.relative_to(root)}:{line}"
        if target.startswith(OUTSIDE):
            first = target.removeprefix(OUTSIDE).split(".")[0]
            if first == "duckscore":
                problems.append(
                    f"{where}: imports duckscore absolutely; import within the package relatively"
                )
            if first == "click" and package != "cli":
                problems.append(f"{where}: only cli/ imports click")
            continue
        other = target.split(".")[0]
        if not other or other == package:
            continue
        if other not in (DEPENDS_ON.get(package, set(DEPENDS_ON)) if package else set(DEPENDS_ON)):
            problems.append(f"{where}: {package} may not import {other} ({target})")
        if any(private(part) for part in target.split(".")):
            problems.append(f"{where}: {target} is private to {other}")
        if any(private(n) for n in names):
            problems.append(f"{where}: {[n for n in names if private(n)]} are private to {target}")
    return problems


def module_circle(root: Path = PACKAGE) -> list[str] | None:
    """The first circle of imports that run when modules load, or None."""
    known = {dotted(p, root) for p in modules(root)}
    graph: dict[str, set[str]] = {}
    for path in modules(root):
        edges: set[str] = set()
        for target, names, loads, _ in imports(path, root):
            if loads and not target.startswith(OUTSIDE):
                # `from . import x` names the module x; `from .m import x` the module m
                edges |= {f"{target}.{n}" for n in names if f"{target}.{n}" in known} or (
                    {target} & known
                )
        graph[dotted(path, root)] = edges - {dotted(path, root)}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt) :] + [nxt]
            if nxt not in state and (circle := visit(nxt, trail + [nxt])):
                return circle
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (circle := visit(node, [node])):
            return circle
    return None


def test_the_declared_layers_have_no_circle_and_cover_every_package() -> None:
    order: set[str] = set()
    remaining = dict(DEPENDS_ON)
    while remaining:
        ready = {p for p, needs in remaining.items() if needs <= order}
        assert ready, f"the declared dependencies form a circle among {sorted(remaining)}"
        order |= ready
        for p in ready:
            del remaining[p]
    on_disk = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert on_disk == set(DEPENDS_ON)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path: Path) -> None:
    assert layer_violations(path) == []


def test_no_import_circle_between_modules() -> None:
    assert module_circle() is None


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})"


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    files = {
        "core/__init__.py": "",
        "core/a.py": "import click\nfrom ..fuse.b import x\n",
        "fuse/__init__.py": "",
        "fuse/b.py": "from ..score._private import y\nfrom .c import z\n",
        "fuse/c.py": "from .b import x\nfrom ..core.a import _hidden\n",
        "score/__init__.py": "",
        "score/_private.py": "y = 1\n",
        "cli/__init__.py": "",
        "cli/d.py": "import click\nfrom duckscore.core import a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = {name: layer_violations(tmp_path / name, tmp_path) for name in files}
    assert [p.split(": ", 1)[1] for p in found["core/a.py"]] == [
        "only cli/ imports click",
        "core may not import fuse (fuse.b)",
    ]
    assert any("fuse may not import score" in p for p in found["fuse/b.py"])
    assert any("score._private is private" in p for p in found["fuse/b.py"])
    assert any("['_hidden'] are private" in p for p in found["fuse/c.py"])
    assert any("imports duckscore absolutely" in p for p in found["cli/d.py"])
    circle = module_circle(tmp_path)
    assert circle is not None and {"fuse.b", "fuse.c"} <= set(circle)
