"""The code mapper (sql/fuse/code_map.sql, docs/code.md "Fusing code"): each block to the
innermost entity its lines overlap — the largest overlap, ties by the smallest span, then by
entity_id — and a block in no entity to its file; its ids from the columns or from `path:start:end`
item ids. Expectations written by hand from tables.py's entities."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from duckscore.core.errors import PolicyError
from duckscore.fusion.pipeline import fuse

from .tables import fused_code, hits

# block -> (entity, module) by the rule, worked out by hand from tables.py
MAPPED = {
    # __init__ 2-5 and Shape 1-30 both overlap 2 lines: the smaller span, __init__
    "pkg/a.py:3:4": ("pkg/a.py:Shape.__init__", "pkg/a.py:Shape"),
    # area 7-20 and Shape overlap 5 lines each: area's span is the smaller
    "pkg/a.py:8:12": ("pkg/a.py:Shape.area", "pkg/a.py:Shape"),
    # Shape overlaps 30 lines, area 14, __init__ 4: the class (a line in no method is it)
    "pkg/a.py:1:30": ("pkg/a.py:Shape", "pkg/a.py:Shape"),
    # Shape 25-30 and biggest 35-40 overlap 6 lines each: biggest's span, 16, is the smaller
    "pkg/a.py:25:40": ("pkg/a.py:biggest", "pkg/a.py:biggest"),
    # in no entity: its file at every level
    "pkg/a.py:52:58": ("pkg/a.py", "pkg/a.py"),
    # helper's two definitions overlap 2 lines each (9-10, 12-13): one entity either way
    "pkg/b.py:9:13": ("pkg/b.py:helper", "pkg/b.py:helper"),
    # f 1-10 and g 11-20 overlap 5 lines each with spans of 10: by entity_id, f
    "pkg/c.py:6:15": ("pkg/c.py:f", "pkg/c.py:f"),
}


def one_block_per_query() -> pd.DataFrame:
    return hits([(block, "s1", block, 1.0) for block in MAPPED])


@pytest.mark.parametrize("level", ["entity", "module"])
def test_each_block_maps_to_its_innermost_entity(level: str, tmp_path: Path) -> None:
    out = fused_code(one_block_per_query(), tmp_path / "out", sets=[f"target_granularity={level}"])
    fused = pd.read_parquet(out / "fused.parquet")
    found = dict(zip(fused["query_id"], fused["item_id"], strict=True))
    assert found == {block: ids[level == "module"] for block, ids in MAPPED.items()}


def test_ids_of_the_form_path_start_end_give_the_lines(tmp_path: Path) -> None:
    """Without file_path, start_line and end_line, a block's id is read as path:start:end."""
    log = one_block_per_query().drop(columns=["file_path", "start_line", "end_line"])
    out = fused_code(log, tmp_path / "out", sets=["target_granularity=entity"])
    fused = pd.read_parquet(out / "fused.parquet")
    assert dict(zip(fused["query_id"], fused["item_id"], strict=True)) == {
        block: entity for block, (entity, _) in MAPPED.items()
    }
    payload = fused.set_index("query_id").loc["pkg/a.py:3:4", "best_provenance"]["payload"]
    assert (payload["file_path"], payload["start_line"], payload["end_line"]) == ("pkg/a.py", 3, 4)


def test_a_file_target_fuses_files_and_scores_their_parents(tmp_path: Path) -> None:
    """The file target (seed 003's `file`, `doc`): one fused item and one parent per file."""
    out = fused_code(one_block_per_query(), tmp_path / "out")
    fused = pd.read_parquet(out / "fused.parquet")
    features = pd.read_parquet(out / "parent_features.parquet")
    expected = {block: block.split(":")[0] for block in MAPPED}
    assert dict(zip(fused["query_id"], fused["item_id"], strict=True)) == expected
    assert dict(zip(features["query_id"], features["parent_id"], strict=True)) == expected


def test_without_a_granularity_column_an_item_of_its_parent_is_a_file_hit(tmp_path: Path) -> None:
    """A log with no granularity says a hit's level as fusion reads it: an item that is its own
    parent is a document (here a file) hit, mapped to its file alone; any other a block, mapped
    by its lines."""
    log = hits([("q1", "s1", "pkg/a.py:8:12", 2.0), ("q2", "s1", "pkg/c.py", 1.0)])
    out = fused_code(log.drop(columns=["granularity"]), tmp_path / "out",
                     sets=["target_granularity=entity"])  # fmt: skip
    fused = pd.read_parquet(out / "fused.parquet")
    assert dict(zip(fused["query_id"], fused["item_id"], strict=True)) == {
        "q1": "pkg/a.py:Shape.area",
        "q2": "pkg/c.py",
    }


def test_revisions_match_null_safely(tmp_path: Path) -> None:
    """A working tree's entities (revision NULL) and a log without revisions match."""
    from .tables import entities

    log = hits([("q", "s1", "pkg/a.py:8:12", 1.0)], revision=None).drop(columns=["revision"])
    out = fused_code(log, tmp_path / "out", sets=["target_granularity=entity"],
                     table=entities(revision=None))  # fmt: skip
    assert pd.read_parquet(out / "fused.parquet")["item_id"].tolist() == ["pkg/a.py:Shape.area"]


@pytest.mark.parametrize("level", ["module", "entity"])
def test_a_module_or_entity_target_needs_the_entities(level: str, tmp_path: Path) -> None:
    with pytest.raises(
        PolicyError, match=f"target_granularity '{level}' maps blocks .* --entities"
    ):
        fuse(
            one_block_per_query(), tmp_path / "out", "code_rrf_v1", [f"target_granularity={level}"]
        )
    assert not (tmp_path / "out").exists()
