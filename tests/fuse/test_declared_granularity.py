"""A recipe may declare the granularity of a source's hits (`sources.<name>.granularity`, issue
49 §1): every hit of that source is then of it — `doc` and `file` one level, a NULL read as the
log reads it (doc when item_id = parent_id, else block) — else the log is refused in one line
naming the row, the source and the declared value; the live scorer's probe takes such rows for
a fault. The expectations are written by hand from the rows below."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli
from duckscore.core.errors import InputError, PolicyError
from duckscore.core.session import Session
from duckscore.fusion.log import log_probe, open_log
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import load_recipe

# blocks of bm25, files of summary; no lines: the rule holds for any log
LOG = pd.DataFrame(
    {
        "query_id": ["q", "q", "q", "q"],
        "source": ["bm25", "bm25", "summary", "summary"],
        "item_id": ["a.py:1:9", "b.py:3:4", "a.py", "b.py"],
        "parent_id": ["a.py", "b.py", "a.py", "b.py"],
        "score": [2.0, 1.0, 2.0, 1.0],
        "granularity": ["block", "block", "file", "doc"],
    }
)
DECLARED = ["sources.bm25={granularity: block}", "sources.summary={granularity: file}"]


def refusal(log: pd.DataFrame, tmp_path: Path, overrides: list[str]) -> str:
    with pytest.raises(InputError) as caught:
        fuse(log, tmp_path / "out", "canonical_rrf", overrides)
    assert not (tmp_path / "out").exists()
    return str(caught.value)


def test_hits_of_the_declared_granularity_fuse_as_undeclared_ones(tmp_path: Path) -> None:
    """summary's `doc` row is of its declared `file`; NULL rows are read by their ids."""
    log = LOG.assign(granularity=["block", None, "file", None])
    declared = fuse(log, tmp_path / "declared", "canonical_rrf", DECLARED)
    plain = fuse(log, tmp_path / "plain", "canonical_rrf")
    for name in ("fused.parquet", "parent_features.parquet"):
        assert pd.read_parquet(tmp_path / "declared" / name).equals(
            pd.read_parquet(tmp_path / "plain" / name)
        )
    manifest = json.loads((tmp_path / "declared" / "manifest.json").read_text())
    assert manifest["sources"]["bm25"]["granularity"] == "block"
    assert (
        "granularity"
        not in json.loads((tmp_path / "plain" / "manifest.json").read_text())["sources"]["bm25"]
    )
    assert declared.manifest["sources"]["summary"]["granularity"] == "file"
    assert plain.manifest["sources"]["summary"].keys() == {"top_k", "normalize", "weight",
                                                          "distance"}  # fmt: skip


def test_a_hit_of_another_granularity_is_refused_naming_its_row(tmp_path: Path) -> None:
    log = LOG.assign(granularity=["block", "file", "file", "doc"])
    assert refusal(log, tmp_path, DECLARED) == (
        "--log (<DataFrame>, row 2, query_id='q', source='bm25', item_id='b.py:3:4'): "
        "granularity 'file' is not the 'block' fuse policy canonical_rrf declares for source "
        "'bm25' (sources.bm25.granularity)"
    )


def test_a_null_granularity_is_the_level_the_log_reads_it_as(tmp_path: Path) -> None:
    """A NULL summary hit whose id is not its parent's is a block, not the declared file."""
    log = LOG.assign(granularity=[None, None, None, None])
    log.loc[3, "item_id"] = "b.py#summary"
    assert refusal(log, tmp_path, DECLARED) == (
        "--log (<DataFrame>, row 4, query_id='q', source='summary', item_id='b.py#summary'): "
        "granularity 'NULL, read as block' is not the 'file' fuse policy canonical_rrf "
        "declares for source 'summary' (sources.summary.granularity)"
    )
    # without the column, every row is read so, and checked the same
    without = log.drop(columns=["granularity"])
    assert "row 4" in refusal(without, tmp_path, DECLARED)


def test_source_defaults_declare_every_source_s_granularity(tmp_path: Path) -> None:
    """A discovered source gets the source_defaults' granularity."""
    message = refusal(LOG, tmp_path, ["source_defaults.granularity=block"])
    assert message.startswith("--log (<DataFrame>, row 3, query_id='q', source='summary'")
    assert "granularity 'file' is not the 'block'" in message


@pytest.mark.parametrize("level", ["module", "entity"])
def test_a_code_level_is_declared_as_written(tmp_path: Path, level: str) -> None:
    log = LOG.assign(granularity=[level, level, "file", "doc"])
    assert fuse(log, tmp_path / level, "canonical_rrf", [f"sources.bm25={{granularity: {level}}}"])
    assert f"granularity '{level}' is not the 'block'" in refusal(log, tmp_path, DECLARED)


def test_an_unknown_granularity_is_refused_by_the_recipe() -> None:
    with pytest.raises(
        PolicyError,
        match=r"sources\.bm25\.granularity: 'chunk' is not one of doc, block, file, module, entity",
    ):
        load_recipe("canonical_rrf", ["sources.bm25={granularity: chunk}"])


def test_the_live_probe_takes_a_hit_off_its_declaration_for_a_fault() -> None:
    """api/lanes.py sends a call down the checked path when the probe finds such a row."""
    session = Session()
    try:
        opened, fuse_plan = open_log(session, LOG, load_recipe("canonical_rrf", DECLARED))
        probe = log_probe(opened, fuse_plan)
        assert session.con.execute(probe).fetchall() == [(False, ["bm25", "summary"])]
        session.con.register("off_declaration", LOG.assign(granularity="doc"))
        session.con.execute("CREATE OR REPLACE TEMP VIEW retrieval_log AS FROM off_declaration")
        assert session.con.execute(probe).fetchall() == [(True, ["bm25", "summary"])]
    finally:
        session.close()


def test_the_command_line_refuses_in_one_line(tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    LOG.assign(granularity=["block", "doc", "file", "doc"]).to_parquet(log)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "recipe_id: declared_v1\nextends: canonical_rrf\nsources:\n  bm25: {granularity: block}\n",
        encoding="utf-8",
    )
    done = CliRunner().invoke(
        cli, ["fuse", "--log", str(log), "--recipe", str(recipe), "--out", str(tmp_path / "out")]
    )
    assert done.exit_code == 2
    assert done.output.strip() == (
        f"duckscore: error: --log ({log}, row 2, query_id='q', source='bm25', "
        f"item_id='b.py:3:4'): granularity 'doc' is not the 'block' {recipe} declares for "
        "source 'bm25' (sources.bm25.granularity)"
    )
    assert not (tmp_path / "out").exists()
