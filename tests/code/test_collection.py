"""The bundled code-localization collection (fixtures/code/, built from pallets/click's history
by fixtures/code/build_fixture.py): its tables' shapes, types and order, and their consistency
with one another — every logged block inside its file at its revision, every gold file, module
and entity a row of the entities table at the instance's parent, the gold table and the
benchmarks' JSONL saying the same. Read with pyarrow and plain Python, not with duckscore."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ..helpers import FIXTURES

CODE = FIXTURES / "code"
HEX40 = re.compile(r"[0-9a-f]{40}")
STRING, INT = pa.string(), pa.int32()
SCHEMAS = {
    "retrieval_log": [("query_id", STRING), ("source", STRING), ("item_id", STRING),
                      ("parent_id", STRING), ("score", pa.float64()), ("rank", INT),
                      ("granularity", STRING), ("file_path", STRING), ("start_line", INT),
                      ("end_line", INT), ("revision", STRING), ("query_text", STRING)],
    "queries": [("query_id", STRING), ("query_text", STRING), ("revision", STRING),
                ("commit", STRING)],
    "entities": [("revision", STRING), ("file_path", STRING), ("kind", STRING),
                 ("qualified_name", STRING), ("module_id", STRING), ("entity_id", STRING),
                 ("start_line", INT), ("end_line", INT)],
    "gold": [("instance_id", STRING), ("level", STRING), ("location", STRING),
             ("revision", STRING)],
}  # fmt: skip
TOP = {"bm25": 50, "tfidf": 50, "summary": 20}
WINDOW, STEP = 40, 20


@cache
def rows(name: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(CODE / f"{name}.parquet").to_pylist()
    return rows


@cache
def files() -> dict[tuple[str, str], int]:
    """(revision, file_path) -> the file's last line."""
    return {
        (e["revision"], e["file_path"]): e["end_line"]
        for e in rows("entities")
        if e["kind"] == "file"
    }


@cache
def queries() -> dict[str, dict[str, Any]]:
    return {q["query_id"]: q for q in rows("queries")}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_each_table_has_its_columns_and_types_and_no_pandas_index(name: str) -> None:
    schema = pq.read_schema(CODE / f"{name}.parquet")
    assert [(f.name, f.type) for f in schema] == SCHEMAS[name]
    assert b"pandas" not in (schema.metadata or {})


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("retrieval_log", lambda r: (r["query_id"], r["source"], r["rank"])),
        ("queries", lambda r: r["query_id"]),
        ("entities", lambda r: (r["revision"], r["file_path"], r["start_line"], r["entity_id"])),
        ("gold", lambda r: (r["instance_id"], r["level"], r["location"])),
    ],
)
def test_each_table_is_sorted_by_its_key(name: str, key: Any) -> None:
    keys = [key(r) for r in rows(name)]
    assert keys == sorted(keys)
    if name != "entities":  # a name defined twice is two entity rows at two lines, one id
        assert len(set(keys)) == len(keys)


def test_the_instances_are_commits_of_click_with_their_parents() -> None:
    found = rows("queries")
    assert 100 <= len(found) <= 300
    for q in found:
        assert HEX40.fullmatch(q["commit"]) and HEX40.fullmatch(q["revision"])
        assert q["commit"] != q["revision"]
        assert q["query_id"] == f"pallets__click-{q['commit'][:12]}"
        assert q["query_text"].strip() == q["query_text"] and q["query_text"]
        assert not re.search(r"(?im)^co-authored-by:", q["query_text"])
    assert {q["revision"] for q in found} == {r for r, _ in files()}
    summary = json.loads((CODE / "collection.json").read_text(encoding="utf-8"))
    assert summary["instances"] == len(found) and HEX40.fullmatch(summary["head"])
    assert summary["rows"] == {name: len(rows(name)) for name in SCHEMAS}


def test_every_logged_item_is_a_file_or_a_window_of_a_file_at_the_query_s_revision() -> None:
    for r in rows("retrieval_log"):
        q = queries()[r["query_id"]]
        assert (r["revision"], r["query_text"]) == (q["revision"], q["query_text"])
        assert r["parent_id"] == r["file_path"] and r["score"] > 0
        last = files()[(r["revision"], r["file_path"])]
        if r["source"] == "summary":
            assert (r["granularity"], r["item_id"]) == ("file", r["file_path"])
            assert r["start_line"] is None and r["end_line"] is None
            continue
        start, end = r["start_line"], r["end_line"]
        assert r["granularity"] == "block" and r["item_id"] == f"{r['file_path']}:{start}:{end}"
        assert 1 <= start <= end <= last and (start - 1) % STEP == 0
        assert end - start + 1 == WINDOW or end == last


def test_each_source_ranks_its_items_by_score_ties_by_id() -> None:
    by_list: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows("retrieval_log"):
        by_list[(r["query_id"], r["source"])].append(r)
    assert {source for _, source in by_list} == set(TOP)
    for (_, source), ranked in by_list.items():
        assert [r["rank"] for r in ranked] == list(range(1, len(ranked) + 1))
        assert len(ranked) <= TOP[source]
        assert len({r["item_id"] for r in ranked}) == len(ranked)
        for a, b in itertools.pairwise(ranked):
            assert (-a["score"], a["item_id"]) < (-b["score"], b["item_id"])
    assert len({q for q, _ in by_list}) == len(rows("queries"))


def test_the_entities_table_holds_each_entity_inside_its_file_and_class() -> None:
    classes: dict[tuple[str, str, str], tuple[int, int]] = {}
    for e in rows("entities"):
        path, kind, name = e["file_path"], e["kind"], e["qualified_name"]
        assert path.endswith(".py") and path.startswith(("src/click/", "click/"))
        assert 1 <= e["start_line"] <= e["end_line"] <= files()[(e["revision"], path)]
        if kind == "file":
            assert (name, e["module_id"], e["entity_id"], e["start_line"]) == ("", None, path, 1)
            continue
        assert e["entity_id"] == f"{path}:{name}"
        assert e["module_id"] == f"{path}:{name.split('.')[0]}"
        assert (kind == "method") == ("." in name) and kind in ("class", "method", "function")
        if kind == "class":
            classes[(e["revision"], path, name)] = (e["start_line"], e["end_line"])
    for e in rows("entities"):
        if e["kind"] == "method":
            start, end = classes[(e["revision"], e["file_path"], e["qualified_name"].split(".")[0])]
            assert start < e["start_line"] <= e["end_line"] <= end


def test_every_gold_location_is_known_at_the_instance_s_parent() -> None:
    known: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for e in rows("entities"):
        known[e["revision"]]["file"].add(e["file_path"])
        if e["kind"] != "file":
            known[e["revision"]]["module"].add(e["module_id"])
            known[e["revision"]]["function"].add(e["entity_id"])
    gold: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for g in rows("gold"):
        assert g["revision"] == queries()[g["instance_id"]]["revision"]
        gold[g["instance_id"]][g["level"]].add(g["location"])
    assert set(gold) == set(queries())
    for instance, levels in gold.items():
        at = known[queries()[instance]["revision"]]
        assert 1 <= len(levels["file"]) <= 3 and levels["function"] and levels["module"]
        for level, locations in levels.items():
            assert locations <= at[level], (instance, level, locations - at[level])
        for location in levels["module"] | levels["function"]:
            assert location.split(":")[0] in levels["file"]
        assert {f.split(":")[1].split(".")[0] for f in levels["function"]} == {
            m.split(":")[1] for m in levels["module"]
        }
        assert not any(re.search(r"(^|/)(tests?/|test_)", f) for f in levels["file"])


def test_the_benchmarks_jsonl_says_what_the_gold_table_says() -> None:
    lines = (CODE / "gold.jsonl").read_text(encoding="utf-8").splitlines()
    from_table: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for g in rows("gold"):
        from_table[g["instance_id"]].add((g["level"], g["location"]))
    seen = []
    for line in lines:
        instance = json.loads(line)
        assert list(instance) == ["instance_id", "base_commit", "file_changes"]
        assert json.dumps(instance) == line
        assert instance["base_commit"] == queries()[instance["instance_id"]]["revision"]
        seen.append(instance["instance_id"])
        from_json = set()
        for change in instance["file_changes"]:
            assert list(change) == ["file", "changes"]
            assert list(change["changes"]) == ["edited_entities", "edited_modules"]
            from_json.add(("file", change["file"]))
            from_json.update(("function", e) for e in change["changes"]["edited_entities"])
            from_json.update(("module", m) for m in change["changes"]["edited_modules"])
            for location in (
                change["changes"]["edited_entities"] + change["changes"]["edited_modules"]
            ):
                assert location.startswith(f"{change['file']}:")
        assert from_json == from_table[instance["instance_id"]]
    assert seen == sorted(queries())


def test_the_collection_is_small_and_carries_its_licence_and_provenance() -> None:
    assert sum(p.stat().st_size for p in CODE.iterdir()) < 3_000_000
    licence = (CODE / "LICENSE-click.txt").read_text(encoding="utf-8")
    assert "Redistribution and use in source and binary forms" in licence
    readme = (CODE / "README.md").read_text(encoding="utf-8")
    head = json.loads((CODE / "collection.json").read_text(encoding="utf-8"))["head"]
    assert head in readme and head in (CODE / "build_fixture.py").read_text(encoding="utf-8")
    assert "BSD-3-Clause" in readme
