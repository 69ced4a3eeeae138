"""The chain fuse → parent features → score → contract is written in one place: the stages of
fusion/stages.py and scoring/stages.py, joined by runner/graph.py (docs/design.md, "The stage graph").
Read from the source: no other module renders a stage's template, and no other module names a
stage's relation in SQL text — a consumer assembling the chain by hand (a CTE of fuse_hits, a
table of scored parents) fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from .test_layers import PACKAGE, dotted, imports, modules

# the modules that declare stages, and the functions that render their templates
STAGE_MODULES = {"fusion.stages", "fusion.code_stages", "scoring.stages"}
RENDERERS = {
    "render_fused",
    "render_parent_features",
    "render_parents",
    "render_queries",
    "render_code_map",
}
TEMPLATES = {
    "fuse/ranked_log.sql",
    "fuse/fused.sql",
    "fuse/parent_features.sql",
    "fuse/spans.sql",
    "fuse/code_map.sql",
    "fuse/code_level.sql",
    "fuse/loc_outputs.sql",
    "score/parents.sql",
    "score/queries.sql",
}
# the relations the stages make, named in SQL by their module's constants only
RELATIONS = (
    "retrieval_log_ranked",
    "fuse_hits",
    "fuse_source_parents",
    "code_hits",
    "code_modules",
    "code_entities",
    "loc_lists",
    "parent_features_table",
    "scored_parents",
    "score_contract",
)
WORD = re.compile(rf"\b({'|'.join(RELATIONS)})\b")


def strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings (f-strings' parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]
    return sorted(found, key=lambda line_text: line_text[0])


def hand_assembly(path: Path, root: Path = PACKAGE) -> list[str]:
    """Where a module outside the stage modules renders a stage's template or names a stage's
    relation in a string."""
    here = dotted(path, root)
    if here in STAGE_MODULES:
        return []
    found = []
    for target, names, _, line in imports(path, root):
        if target in STAGE_MODULES and RENDERERS & set(names):
            found.append(f"{here}:{line}: imports {sorted(RENDERERS & set(names))} of {target}")
    for line, text in strings(path):
        if text in TEMPLATES:
            found.append(f"{here}:{line}: renders {text}")
        for name in WORD.findall(text):
            found.append(f"{here}:{line}: names the relation {name} ({text[:60]!r})")
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_assembles_the_chain_by_hand(path: Path) -> None:
    assert hand_assembly(path) == []


def test_the_check_finds_a_chain_assembled_by_hand(tmp_path: Path) -> None:
    files = {
        "fusion/__init__.py": "",
        "fusion/stages.py": 'FUSE_HITS = "fuse_hits"\ndef render_fused(): ...\n',
        "api/__init__.py": "",
        "api/scorer.py": (
            '"""Reads fuse_hits (a docstring may say so)."""\n'
            "from ..fusion.stages import render_fused\n"
            "def contract(hits, parents):\n"
            '    return f"WITH fuse_hits AS ({hits}), x AS (SELECT * FROM scored_parents)"\n'
            'TEMPLATE = "score/queries.sql"\n'
        ),
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert hand_assembly(tmp_path / "fusion" / "stages.py", tmp_path) == []
    found = hand_assembly(tmp_path / "api" / "scorer.py", tmp_path)
    assert [problem.split(": ", 1)[1] for problem in found] == [
        "imports ['render_fused'] of fusion.stages",
        "names the relation fuse_hits ('WITH fuse_hits AS (')",
        "names the relation scored_parents ('), x AS (SELECT * FROM scored_parents)')",
        "renders score/queries.sql",
    ]
