"""Seed 003 §7.2: a summary document of a module — a file-level hit naming its `module_path` —
maps to that module at the module level and to the module's own entity (its top-level class or
function) at the entity level; without a module_path a file-level hit is its file at every level,
as before. Lists worked out by hand (RRF, k = 60, a max aligner) from tables.py's entities."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .tables import fused_code, hits
from .test_mapper_refusals import refused

BLOCKS = [
    ("q1", "s1", "pkg/a.py:8:12", 9.0),  # Shape.area, module Shape
    ("q1", "s1", "pkg/c.py:6:15", 8.0),  # f
    ("q1", "s1", "pkg/c.py:11:20", 7.0),  # g
]
# the summary source: (item_id, file, module_path or None, score)
SUMMARIES = [
    ("sum/g", "pkg/c.py", "pkg/c.py:g", 3.0),
    ("sum/helper", "pkg/b.py", "pkg/b.py:helper", 2.0),
    ("pkg/c.py", "pkg/c.py", None, 1.0),  # a summary of a file
]


def summaries(rows: list[tuple[str, str, str | None, float]]) -> pd.DataFrame:
    """The summary source's file-level hits of q1, each naming its module_path (or NULL)."""
    frame = pd.DataFrame(
        {
            "query_id": "q1",
            "source": "summary",
            "item_id": [item for item, *_ in rows],
            "parent_id": [file for _, file, *_ in rows],
            "score": [score for *_, score in rows],
            "granularity": "file",
            "file_path": [file for _, file, *_ in rows],
            "revision": "r1",
            "module_path": pd.Series([module for _, _, module, _ in rows], dtype="object"),
            "rank": range(1, len(rows) + 1),
        }
    )
    return frame


def log(rows: list[tuple[str, str, str | None, float]] = SUMMARIES) -> pd.DataFrame:
    blocks = hits(BLOCKS)
    blocks["module_path"] = pd.Series([None] * len(blocks), dtype="object")
    return pd.concat([blocks, summaries(rows)], ignore_index=True)


# by hand, a level's ranks per source from each item's best hit:
# files:    s1 a 1, c 2; summary c 1 (sum/g), b 2        c = 1/62 + 1/61, a 1/61, b 1/62
# modules:  s1 Shape 1, f 2, g 3; summary g 1, helper 2, pkg/c.py 3 (a file: not listed)
#           g = 1/63 + 1/61, Shape 1/61, helper = f = 1/62 (by id: pkg/b.py < pkg/c.py)
# entities: s1 Shape.area 1, f 2, g 3; summary g 1, helper 2, pkg/c.py 3 — as the modules
Q1 = {
    "instance_id": "q1",
    "found_files": ["pkg/c.py", "pkg/a.py", "pkg/b.py"],
    "found_modules": ["pkg/c.py:g", "pkg/a.py:Shape", "pkg/b.py:helper", "pkg/c.py:f"],
    "found_entities": ["pkg/c.py:g", "pkg/a.py:Shape.area", "pkg/b.py:helper", "pkg/c.py:f"],
    "raw_output_loc": [],
}


def test_a_module_summary_ranks_its_module_and_is_listed(tmp_path: Path) -> None:
    out = fused_code(log(), tmp_path / "out")
    assert (out / "loc_outputs.jsonl").read_text(encoding="utf-8") == json.dumps(Q1) + "\n"


def test_the_module_target_fuses_the_summaries_modules(tmp_path: Path) -> None:
    """fused.parquet at the module level: the module lists' order, the file summary's file last
    (1/63), and the best hit's payload names its module_path."""
    out = fused_code(log(), tmp_path / "out", sets=["target_granularity=module"])
    fused = pd.read_parquet(out / "fused.parquet").sort_values("rank")
    assert list(fused["item_id"]) == [*Q1["found_modules"], "pkg/c.py"]
    g = fused.set_index("item_id").loc["pkg/c.py:g"]
    assert abs(g["fused_score"] - (1 / 61 + 1 / 63)) < 1e-12
    best = fused.set_index("item_id").loc["pkg/b.py:helper", "best_provenance"]
    assert best["payload"]["module_path"] == "pkg/b.py:helper"


def test_without_module_paths_a_summary_is_its_file(tmp_path: Path) -> None:
    """The same summaries with module_path NULL: each ranks its file at the module and entity
    levels, which the lists leave out — only the blocks' modules are listed."""
    nulls = [(item, file, None, score) for item, file, _, score in SUMMARIES]
    out = fused_code(log(nulls), tmp_path / "out")
    line = json.loads((out / "loc_outputs.jsonl").read_text(encoding="utf-8"))
    # modules: s1 Shape 1/61, f 1/62, g 1/63; the summaries' files are not listed
    assert line["found_modules"] == ["pkg/a.py:Shape", "pkg/c.py:f", "pkg/c.py:g"]
    assert line["found_files"] == Q1["found_files"]


def test_a_module_path_on_a_block_is_not_read(tmp_path: Path) -> None:
    """A block is placed by its lines, finer than a module: its module_path is carried, not read."""
    placed = log()
    placed.loc[0, "module_path"] = "pkg/a.py:biggest"
    out = fused_code(placed, tmp_path / "out")
    line = json.loads((out / "loc_outputs.jsonl").read_text(encoding="utf-8"))
    assert line == Q1


def test_a_module_path_not_a_module_of_its_file_is_refused(tmp_path: Path) -> None:
    """A module of another file, and a method (an entity, not a module), each refused naming the
    hit, the module_path, the file and the revision."""
    for file, module in (("pkg/b.py", "pkg/a.py:biggest"), ("pkg/a.py", "pkg/a.py:Shape.area")):
        rows = [("sum/x", file, module, 1.0)]
        assert refused(log(rows), tmp_path) == (
            "--log (log.parquet, query_id='q1', source='summary', item_id='sum/x'): "
            f"module_path '{module}' is not a module (a top-level class or function) of {file} "
            "in --entities (entities.parquet) at revision 'r1'"
        )


def test_the_refusal_names_the_hit_whose_file_lacks_the_module(tmp_path: Path) -> None:
    """One module_path on two summaries, of its own file (fine) and of another (refused): the
    refusal names the second, though the first sorts before it."""
    rows = [
        ("sum/a", "pkg/a.py", "pkg/a.py:Shape", 2.0),
        ("sum/z", "pkg/b.py", "pkg/a.py:Shape", 1.0),
    ]
    assert refused(log(rows), tmp_path) == (
        "--log (log.parquet, query_id='q1', source='summary', item_id='sum/z'): "
        "module_path 'pkg/a.py:Shape' is not a module (a top-level class or function) of pkg/b.py "
        "in --entities (entities.parquet) at revision 'r1'"
    )
