"""The log carries a payload (issue 49 §1): file_path, start_line, end_line, qualified_name,
revision and any other column of the log reach fused.parquet's best_provenance, the payload of
the best hit; a log without them writes what it wrote; `file` is seed 003's name of a
document-level hit."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from duckscore.core.session import Session
from duckscore.fusion.log import log_probe, open_log
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import load_recipe

LOG = pd.DataFrame(
    {
        "query_id": ["q", "q", "q"],
        "source": ["bm25", "bm25", "dense"],
        "doc_url": ["u1", "u2", "u3"],  # no column of the contract: passed through
        "item_id": ["a.py:1:9", "a.py:10:20", "b.py:3:4"],
        "parent_id": ["a.py", "a.py", "b.py"],
        "score": [1.0, 3.0, 2.0],
        "file_path": ["a.py", "a.py", "b.py"],
        "start_line": [1, 10, 3],
        "end_line": [9, 20, 4],
        "qualified_name": ["A", "A.f", "g"],
        "lang": ["py", "py", "py"],
    }
)


def provenance(out: Path) -> dict[str, dict]:
    fused = pd.read_parquet(out / "fused.parquet")
    return dict(zip(fused["item_id"], fused["best_provenance"], strict=True))


def test_the_best_hits_payload_is_in_best_provenance(tmp_path: Path) -> None:
    fuse(LOG, tmp_path / "out")
    found = provenance(tmp_path / "out")
    # a.py's best hit in bm25 is a.py:10:20 (score 3): its row's payload, the columns in order
    assert found["a.py"]["original_id"] == "a.py:10:20"
    assert found["a.py"]["payload"] == {
        "file_path": "a.py",
        "start_line": 10,
        "end_line": 20,
        "qualified_name": "A.f",
        "doc_url": "u2",
        "lang": "py",
    }
    assert found["b.py"]["payload"]["doc_url"] == "u3"
    # without a payload, best_provenance is what it was; without explanations, NULL
    fuse(LOG[["query_id", "source", "item_id", "parent_id", "score"]], tmp_path / "bare")
    assert set(provenance(tmp_path / "bare")["a.py"]) == {
        "original_id", "original_score", "snippet", "source"
    }  # fmt: skip
    fuse(LOG, tmp_path / "lean", explain=False)
    assert pd.read_parquet(tmp_path / "lean" / "fused.parquet")["best_provenance"].isna().all()


def test_each_contribution_carries_its_hits_payload(tmp_path: Path) -> None:
    """A contribution's hit is its original_id in its source: its payload is that row's."""
    fuse(LOG, tmp_path / "out")
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    [entry] = fused.set_index("item_id").loc["a.py", "contributions"]
    assert (entry["source"], entry["original_id"]) == ("bm25", "a.py:10:20")
    assert entry["payload"] == {"file_path": "a.py", "start_line": 10, "end_line": 20,
                                "qualified_name": "A.f", "doc_url": "u2", "lang": "py"}  # fmt: skip
    # the same fusion without a payload: the same entries, without the field
    fuse(LOG[["query_id", "source", "item_id", "parent_id", "score"]], tmp_path / "bare")
    bare = pd.read_parquet(tmp_path / "bare" / "fused.parquet")
    assert [
        [{k: v for k, v in e.items() if k != "payload"} for e in c] for c in fused["contributions"]
    ] == [list(c) for c in bare["contributions"]]
    assert "payload" not in bare["contributions"][0][0]


def test_delayed_alignment_keeps_each_entry_s_own_payload(tmp_path: Path) -> None:
    """After fusion, a parent's entries are its blocks' (and the doc hits expanded to them):
    each entry's payload is the row of its original_id, in the entries' order."""
    log = pd.DataFrame(
        {
            "query_id": ["q", "q", "q"],
            "source": ["bm25", "bm25", "summary"],
            "item_id": ["a.py:1:9", "a.py:10:20", "a.py"],
            "parent_id": ["a.py", "a.py", "a.py"],
            "score": [1.0, 3.0, 5.0],
            "lang": ["x", "y", "z"],
        }
    )
    fuse(log, tmp_path / "out", "canonical_rrf", ["aligner.order=after_fusion"])
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    found = [
        (e["source"], e["original_id"], e["payload"]["lang"]) for e in fused["contributions"][0]
    ]
    # the block a.py:10:20 fuses best (bm25 rank 1 and summary's expanded hit), then a.py:1:9
    assert found == [("bm25", "a.py:10:20", "y"), ("summary", "a.py", "z"),
                     ("bm25", "a.py:1:9", "x"), ("summary", "a.py", "z")]  # fmt: skip


def test_hive_partition_keys_are_no_payload(tmp_path: Path) -> None:
    folder = tmp_path / "log" / "day=1"
    folder.mkdir(parents=True)
    LOG[["query_id", "source", "item_id", "parent_id", "score", "lang"]].to_parquet(
        folder / "part.parquet"
    )
    fuse(str(tmp_path / "log"), tmp_path / "out")
    assert provenance(tmp_path / "out")["a.py"]["payload"] == {"lang": "py"}


def test_a_file_hit_is_a_document_hit(tmp_path: Path) -> None:
    """Delayed alignment expands a `file` hit to its file's blocks, as it expands a `doc` hit."""
    log = pd.DataFrame(
        {
            "query_id": ["q", "q"],
            "source": ["summary", "bm25"],
            "item_id": ["a.py", "a.py:1:9"],
            "parent_id": ["a.py", "a.py"],
            "granularity": ["file", "block"],
            "score": [1.0, 2.0],
        }
    )
    fuse(log, tmp_path / "out", "canonical_rrf", ["aligner.order=after_fusion"])
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    # the block holds both sources' terms: 1/61 + 1/61
    assert fused["item_id"].tolist() == ["a.py"]
    assert fused["fused_score"].tolist() == [2 / 61]


def test_a_log_without_lines_may_mix_doc_and_block_hits_in_a_source() -> None:
    """The one-granularity rule is a code log's (issue 49 §1): a log without lines keeps its
    source of document and block hits, neither refused nor taken by the live scorer's probe
    (api/lanes.py) for a fault, which would send every call down the checked path."""
    mixed = pd.DataFrame({"query_id": ["q", "q"], "source": ["s", "s"], "item_id": ["d1", "d2#0"],
                          "parent_id": ["d1", "d2"], "score": [2.0, 1.0],
                          "granularity": ["doc", "block"]})  # fmt: skip
    session = Session()
    try:
        opened, fuse_plan = open_log(session, mixed, load_recipe("hybrid_v1"))
        broken = session.con.execute(log_probe(opened, fuse_plan)).fetchone()
    finally:
        session.close()
    assert broken is not None and broken[0] is False
