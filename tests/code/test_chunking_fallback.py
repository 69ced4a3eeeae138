"""Seed 003 §9.4: block-level fusion needs the block sources to share their chunking (one id
and one line range per block); when they do not, a code run fuses at file level, aligned before
fusion, and says why in a warning and in the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli

from .tables import entities, hits
from .test_module_path import summaries

FORTY = [("q1", "s1", "pkg/a.py:1:40", 9.0), ("q1", "s1", "pkg/a.py:21:60", 8.0)]
THIRTY = [("q1", "s2", "pkg/a.py:1:30", 5.0), ("q1", "s2", "pkg/a.py:31:60", 4.0)]
SHARED = [("q1", "s2", "pkg/a.py:21:60", 5.0), ("q1", "s2", "pkg/a.py:1:40", 4.0)]
NO_BLOCK_SHARED = (
    "the block sources do not share their chunking (s1 and s2 share no block: their blocks "
    "overlap in pkg/a.py, never with one id and one line range): fusing at file level, aligned "
    "before fusion (seed 003 §9.4)"
)


def fused(
    log: pd.DataFrame, tmp_path: Path, sets: list[str], table_rows: pd.DataFrame | None = None
) -> tuple[str, list[str], dict]:
    """`duckscore fuse --entities` of `log` (tables.py's entities, or `table_rows`): its stderr,
    fused items and manifest."""
    log_file, table = tmp_path / "log.parquet", tmp_path / "entities.parquet"
    log.to_parquet(log_file)
    (entities() if table_rows is None else table_rows).to_parquet(table)
    out = tmp_path / "out"
    recipe = [arg for key in sets for arg in ("--set-recipe", key)]
    done = CliRunner().invoke(
        cli,
        ["fuse", "--log", str(log_file), "--entities", str(table), "--recipe", "code_rrf_v1",
         *recipe, "--out", str(out)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    items = pd.read_parquet(out / "fused.parquet").sort_values("rank")["item_id"].tolist()
    return done.stderr, items, json.loads((out / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "sets", [["target_granularity=block"], ["aligner.order=after_fusion"]], ids=["block", "delayed"]
)
def test_sources_chunking_differently_fuse_at_file_level(sets: list[str], tmp_path: Path) -> None:
    stderr, items, manifest = fused(hits(FORTY + THIRTY), tmp_path, sets)
    assert f"duckscore: warning: {NO_BLOCK_SHARED}\n" in stderr
    assert items == ["pkg/a.py"]
    assert manifest["code"]["fallback"] in NO_BLOCK_SHARED
    assert manifest["code"]["target"] == "file"
    assert (manifest["target_granularity"], manifest["aligner"]["order"]) == (
        "doc",
        "before_fusion",
    )


def test_sources_sharing_their_blocks_fuse_blocks(tmp_path: Path) -> None:
    stderr, items, manifest = fused(hits(FORTY + SHARED), tmp_path, ["target_granularity=block"])
    assert "warning" not in stderr
    assert items == ["pkg/a.py:1:40", "pkg/a.py:21:60"]  # each 1/61 + 1/62: by id
    assert (manifest["code"]["target"], manifest["code"]["fallback"]) == ("block", None)


def test_one_block_id_with_two_line_ranges(tmp_path: Path) -> None:
    log = hits(FORTY + SHARED)
    log.loc[log["source"] == "s2", "end_line"] = [60, 30]
    stderr, items, _ = fused(log, tmp_path, ["target_granularity=block"])
    assert (
        "(s1 and s2 give block 'pkg/a.py:1:40' other lines, 1-40 and 1-30): fusing at file level"
        in stderr
    )
    assert items == ["pkg/a.py"]


def test_a_file_target_needs_no_shared_chunking(tmp_path: Path) -> None:
    """Blocks aligned to their files before fusion: each source's own chunking is enough."""
    stderr, items, manifest = fused(hits(FORTY + THIRTY), tmp_path, [])
    assert "warning" not in stderr and items == ["pkg/a.py"]
    assert manifest["code"]["fallback"] is None


def test_lines_no_entity_overlaps_are_said(tmp_path: Path) -> None:
    """An entities table of files alone (or of another revision's code): the run maps every
    hit to its file and says so, rather than writing empty module and entity lists silently."""
    files_alone = entities().query("kind == 'file'")
    stderr, items, _ = fused(hits(FORTY), tmp_path, ["target_granularity=entity"], files_alone)
    assert items == ["pkg/a.py"]
    assert (
        f"duckscore: warning: no entity of --entities ({tmp_path / 'entities.parquet'}) overlaps "
        f"any of the 2 line ranges of --log ({tmp_path / 'log.parquet'}): every hit maps to its "
        "file, and the module and entity lists are empty\n"
    ) in stderr


def test_with_module_summaries_the_warning_says_their_modules_are_listed(tmp_path: Path) -> None:
    """A block outside every entity (pkg/a.py's module-level code after line 50) beside a
    summary of the module pkg/c.py:g: the block maps to its file, and the module list is not
    empty — it holds the summary's module, so the warning does not say the lists are empty."""
    block = hits([("q1", "s1", "pkg/a.py:52:58", 9.0)])
    block["module_path"] = pd.Series([None], dtype="object")
    log = pd.concat([block, summaries([("sum/g", "pkg/c.py", "pkg/c.py:g", 3.0)])])
    stderr, items, _ = fused(log.reset_index(drop=True), tmp_path, ["target_granularity=module"])
    assert items == ["pkg/a.py", "pkg/c.py:g"]
    assert (
        f"duckscore: warning: no entity of --entities ({tmp_path / 'entities.parquet'}) overlaps "
        f"any of the 1 line ranges of --log ({tmp_path / 'log.parquet'}): every hit with lines "
        "maps to its file, and the module and entity lists hold only the modules named in "
        "module_path\n"
    ) in stderr


def test_no_warning_when_an_entity_holds_a_line_range(tmp_path: Path) -> None:
    stderr, _, _ = fused(hits(FORTY), tmp_path, ["target_granularity=entity"])
    assert "duckscore: warning:" not in stderr
