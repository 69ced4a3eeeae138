"""loc_outputs.jsonl (docs/code.md): the files, modules and entities of each query from one run,
each level as the recipe fuses it, the benchmarks' line format; its lists worked out by hand
(RRF, k = 60, a max aligner: a source ranks a file, module or entity by its best hit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli
from duckscore.fusion.code_plan import LocTopK

from .tables import entities, fused_code, hits

LOG = hits(
    [
        ("q1", "s1", "pkg/a.py:8:12", 9.0),  # area (module Shape)
        ("q1", "s1", "pkg/b.py:9:13", 8.0),  # helper
        ("q1", "s1", "pkg/a.py:52:58", 7.0),  # no entity: pkg/a.py
        ("q1", "s2", "pkg/a.py:25:40", 5.0),  # biggest
        ("q1", "s2", "pkg/a.py:3:4", 4.0),  # Shape.__init__ (module Shape)
        ("q1", "s2", "pkg/c.py:6:15", 3.0),  # f
        ("q1", "summary", "pkg/b.py", 2.0),
        ("q1", "summary", "pkg/a.py", 1.0),
        ("q0", "s1", "pkg/c.py:11:20", 1.0),  # g
    ]
)
# q1 by hand, a level's ranks per source from each item's best hit:
# files:    s1 a 1, b 2; s2 a 1, c 2; summary b 1, a 2
#           a = 1/61 + 1/61 + 1/62, b = 1/62 + 1/61, c = 1/62
# modules:  s1 Shape 1, helper 2, pkg/a.py 3; s2 biggest 1, Shape 2, f 3; summary b.py 1, a.py 2
#           Shape 1/61 + 1/62 = .032522, pkg/a.py 1/63 + 1/62 = .032002 (a file: not listed),
#           biggest = pkg/b.py = 1/61 (ties by id), helper 1/62, f 1/63
# entities: area 1/61, helper 1/62, pkg/a.py 1/63 + 1/62, biggest 1/61, __init__ 1/62, f 1/63,
#           pkg/b.py 1/61: the three at 1/61 by id (Shape.area < biggest < pkg/b.py), then the
#           two at 1/62 (Shape.__init__ < pkg/b.py:helper), then f
Q1 = {
    "instance_id": "q1",
    "found_files": ["pkg/a.py", "pkg/b.py", "pkg/c.py"],
    "found_modules": ["pkg/a.py:Shape", "pkg/a.py:biggest", "pkg/b.py:helper", "pkg/c.py:f"],
    "found_entities": [
        "pkg/a.py:Shape.area",
        "pkg/a.py:biggest",
        "pkg/a.py:Shape.__init__",
        "pkg/b.py:helper",
        "pkg/c.py:f",
    ],
    "raw_output_loc": [],
}
Q0 = {
    "instance_id": "q0",
    "found_files": ["pkg/c.py"],
    "found_modules": ["pkg/c.py:g"],
    "found_entities": ["pkg/c.py:g"],
    "raw_output_loc": [],
}


def lines(out: Path) -> list[str]:
    return (out / "loc_outputs.jsonl").read_text(encoding="utf-8").splitlines()


def test_the_lists_of_each_level_by_hand(tmp_path: Path) -> None:
    out = fused_code(LOG, tmp_path / "out")
    # queries sorted; keys in the benchmarks' order, json.dumps' separators
    assert lines(out) == [json.dumps(Q0), json.dumps(Q1)]
    assert lines(out)[0].startswith('{"instance_id": "q0", "found_files": ["pkg/c.py"], ')
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["outputs"]["loc_outputs.jsonl"] == {"rows": 2}
    assert manifest["code"] == {
        "target": "file",
        "loc_top_k": {"files": 5, "modules": 10, "entities": 10},
        "lines_from_item_id": False,
        "fallback": None,
    }


def test_the_lists_are_the_same_from_any_target(tmp_path: Path) -> None:
    """One run's three lists: fusing the entities into fused.parquet changes none of them."""
    out = fused_code(LOG, tmp_path / "out", sets=["target_granularity=entity"])
    assert lines(out) == [json.dumps(Q0), json.dumps(Q1)]


def test_each_list_keeps_its_top_k(tmp_path: Path) -> None:
    out = fused_code(LOG, tmp_path / "out", top_k=LocTopK(files=1, modules=2, entities=3))
    q1 = json.loads(lines(out)[1])
    assert q1["found_files"] == Q1["found_files"][:1]
    assert q1["found_modules"] == Q1["found_modules"][:2]
    assert q1["found_entities"] == Q1["found_entities"][:3]


def test_a_query_whose_hits_map_to_no_entity_has_empty_lists_there(tmp_path: Path) -> None:
    """A block in no entity ranks its file at the module and entity levels, which those lists
    leave out: the query's lines hold empty lists there, as the benchmarks' readers expect,
    never null."""
    only_module_level_code = hits([("q2", "s1", "pkg/a.py:52:58", 1.0)])
    out = fused_code(only_module_level_code, tmp_path / "out")
    assert lines(out) == [
        '{"instance_id": "q2", "found_files": ["pkg/a.py"], "found_modules": [], '
        '"found_entities": [], "raw_output_loc": []}'
    ]


def test_a_query_of_ignored_sources_alone_has_a_line_of_empty_lists(tmp_path: Path) -> None:
    """q2's one hit is of s2, a source the recipe neither declares nor discovers: the query
    keeps its line (an instance the benchmarks score as found nothing), its lists empty."""
    log = hits([("q1", "s1", "pkg/c.py:1:10", 1.0), ("q2", "s2", "pkg/c.py:11:20", 1.0)])
    sets = ["discover_sources=false", "sources.s1.weight=1.0"]
    out = fused_code(log, tmp_path / "out", sets=sets)
    assert lines(out)[1] == (
        '{"instance_id": "q2", "found_files": [], "found_modules": [], "found_entities": [], '
        '"raw_output_loc": []}'
    )


def test_no_lists_without_entities(tmp_path: Path) -> None:
    from duckscore.fusion.pipeline import fuse

    fuse(LOG, tmp_path / "out", "code_rrf_v1")
    assert not (tmp_path / "out" / "loc_outputs.jsonl").exists()


def test_run_writes_the_lists_beside_a_contract_of_files(tmp_path: Path) -> None:
    log, table = tmp_path / "log.parquet", tmp_path / "entities.parquet"
    LOG.to_parquet(log)
    entities().to_parquet(table)
    out = tmp_path / "out"
    done = CliRunner().invoke(
        cli,
        ["-q", "run", "--log", str(log), "--entities", str(table), "--recipe", "code_rrf_v1",
         "--allow-recipe-mismatch", "--set-recipe", "target_granularity=module",
         "--loc-top-k", "entities=2", "--out", str(out)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads(lines(out)[1])["found_entities"] == Q1["found_entities"][:2]
    contract = [json.loads(line) for line in (out / "contract.jsonl").read_text().splitlines()]
    q1 = next(line for line in contract if line["query_id"] == "q1")
    assert {parent["parent_id"] for parent in q1["top_parents"]} == set(Q1["found_files"])


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--loc-top-k", "files=5"], "--loc-top-k needs --entities"),
        (["--entities", "{table}", "--loc-top-k", "functions=5"], "--loc-top-k functions=5: give"),
        (["--entities", "{table}", "--loc-top-k", "files=0"], "--loc-top-k files=0: give"),
    ],
)
def test_loc_top_k_is_refused_in_one_line(args: list[str], problem: str, tmp_path: Path) -> None:
    log, table = tmp_path / "log.parquet", tmp_path / "entities.parquet"
    LOG.to_parquet(log)
    entities().to_parquet(table)
    given = [arg.format(table=table) for arg in args]
    done = CliRunner().invoke(
        cli, ["fuse", "--log", str(log), "--out", str(tmp_path / "out"), *given]
    )
    assert done.exit_code == 2 and problem in done.output, done.output
    assert not (tmp_path / "out").exists()


def test_the_python_api_returns_the_lists(tmp_path: Path) -> None:
    """ds.fuse and ds.run take entities= and loc_top_k=; the lists are `.loc_outputs`, kept in
    the connection's outputs or read back from `out`."""
    import duckscore as ds

    assert ds.fuse(LOG, "code_rrf_v1", entities=entities()).loc_outputs == [Q0, Q1]
    ran = ds.run(LOG, "code_rrf_v1", entities=entities(), loc_top_k=["files=1"], out=tmp_path / "o")
    assert ran.loc_outputs == [Q0, {**Q1, "found_files": Q1["found_files"][:1]}]
    assert ds.run(LOG, "code_rrf_v1").loc_outputs is None
