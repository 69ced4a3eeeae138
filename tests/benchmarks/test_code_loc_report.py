"""benchmarks/code_loc_report.py (docs/code.md's table of how well fusion localizes code): the
table docs/code.md shows is the one its JSON holds; each source alone and RRF are what a
plain-Python ranking of the log's files gives at file level (a file ranked in a source by its
best block, RRF k = 60 over the sources, ties by path); the script's core runs on a subset."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from benchmarks import code_loc_report as report
from benchmarks.code_loc_report import COLUMNS, split, table

from ..helpers import FIXTURES, ROOT
from ..project.test_docs import blocks

RESULTS = json.loads(
    (ROOT / "benchmarks" / "results" / "code_loc.json").read_text(encoding="utf-8")
)
COMMAND = "python benchmarks/code_loc_report.py\n"
CODE = FIXTURES / "code"
Rankings = dict[str, list[str]]  # query -> files, best first


def source_rankings(log: Path) -> dict[str, Rankings]:
    """source -> query -> its files in the order of their best hit (the log's rank)."""
    found: dict[str, Rankings] = defaultdict(lambda: defaultdict(list))
    rows = sorted(pq.read_table(log).to_pylist(), key=lambda r: (r["query_id"], r["rank"]))
    for row in rows:
        files = found[row["source"]][row["query_id"]]
        if row["file_path"] not in files:
            files.append(row["file_path"])
    return found


def rrf(rankings: list[Rankings], k: int = 60) -> Rankings:
    scores: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for ranking in rankings:
        for query, files in ranking.items():
            for position, file in enumerate(files, start=1):
                scores[query][file] += 1 / (k + position)
    return {
        query: sorted(found, key=lambda f: (-round(found[f], 12), f))
        for query, found in scores.items()
    }


def file_acc(ranking: Rankings, gold: Path, instances: list[str], k: int) -> float:
    files: dict[str, set[str]] = defaultdict(set)
    for row in pq.read_table(gold).to_pylist():
        if row["level"] == "file":
            files[row["instance_id"]].add(row["location"])
    found = [
        len(set(ranking.get(i, [])[:k]) & files[i]) == min(len(files[i]), k) for i in instances
    ]
    return sum(found) / len(found)


def expected_file_figures(collection: Path) -> dict[str, dict[str, dict[str, float]]]:
    """config name -> held_out | all -> Acc@k at file level, from the oracle above."""
    gold = collection / "gold.parquet"
    instances = sorted({r["instance_id"] for r in pq.read_table(gold).to_pylist()})
    held_out = [q for position, q in enumerate(instances) if position % 2 == 1]
    by_source = source_rankings(collection / "retrieval_log.parquet")
    rankings = {f"{s} alone": ranking for s, ranking in by_source.items()}
    rankings["RRF (code_rrf_v1)"] = rrf(list(by_source.values()))
    return {
        name: {
            half: {f"Acc@{k}": file_acc(ranking, gold, ids, k) for k in COLUMNS["file"]}
            for half, ids in (("held_out", held_out), ("all", instances))
        }
        for name, ranking in rankings.items()
    }


def assert_file_figures(document: dict, collection: Path) -> None:
    expected = expected_file_figures(collection)
    recorded = {c["name"]: c for c in document["configs"] if c["name"] in expected}
    assert sorted(recorded) == sorted(expected)
    for name, halves in expected.items():
        for half, figures in halves.items():
            assert recorded[name][half]["file"] == pytest.approx(figures, abs=1e-12), (name, half)


def test_the_docs_table_is_the_json() -> None:
    page = blocks((ROOT / "docs" / "code.md").read_text(encoding="utf-8"))
    [at] = [i for i, b in enumerate(page) if b.kind == "sh" and b.text == COMMAND]
    assert page[at + 1].kind == "text" and "output" in page[at + 1].tags
    assert page[at + 1].text == table(RESULTS) + "\n"


def test_the_split_alternates_by_id() -> None:
    assert split(["d", "a", "c", "b", "e"]) == (["a", "c", "e"], ["b", "d"])
    assert RESULTS["split"] | {"rule": ""} == {"rule": "", "tuning": 100, "held_out": 100}


def test_sources_alone_and_rrf_are_the_files_they_rank() -> None:
    assert_file_figures(RESULTS, CODE)


@pytest.mark.slow
def test_the_core_on_a_subset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """measure() on 20 instances (a grid of two points, the entities of their commits): every
    configuration, the split in halves, the file-level figures of the oracle, a tuned recipe
    chosen from the grid."""
    monkeypatch.setattr(report, "TUNE_GRID", ("fusion.k=1,60",))
    gold = pq.read_table(CODE / "gold.parquet")
    keep = pa.array(sorted(set(gold["instance_id"].to_pylist()))[::10])
    log = pq.read_table(CODE / "retrieval_log.parquet")
    log = log.filter(pc.is_in(log["query_id"], keep))
    entities = pq.read_table(CODE / "entities.parquet")
    revisions = pc.unique(log["revision"])
    pq.write_table(log, tmp_path / "retrieval_log.parquet")
    pq.write_table(gold.filter(pc.is_in(gold["instance_id"], keep)), tmp_path / "gold.parquet")
    pq.write_table(
        entities.filter(pc.is_in(entities["revision"], revisions)), tmp_path / "entities.parquet"
    )
    document = report.measure(tmp_path)
    assert (document["instances"], document["split"]["tuning"], document["split"]["held_out"]) == (
        20,
        10,
        10,
    )
    assert [c["name"] for c in document["configs"]] == [
        "bm25 alone",
        "summary alone",
        "tfidf alone",
        "RRF (code_rrf_v1)",
        "§12.1 default (hybrid_v1)",
        "tuned on the tuning half",
    ]
    assert_file_figures(document, tmp_path)
    assert document["configs"][-1]["recipe"] == "code_rrf_tuned"
    assert document["tuning"]["grid"] == ["fusion.k=1,60"]
    assert document["tuning"]["chosen"]["fusion.k"] in (1, 60)
