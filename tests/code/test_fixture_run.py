"""`duckscore run --entities` on the bundled collection (fixtures/code/): loc_outputs.jsonl's
lists equal a plain-Python computation written from the rules alone — each block mapped to the
entity of largest overlap (then smallest span, then id) in entities.parquet at its revision, a
file-level hit naming a module_path (seed 003 §7.2) to that module, a source ranking a file,
module or entity by its best hit, RRF (k = 60) over the sources."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli
from duckscore.core.check import tables_read
from duckscore.core.render import RenderedSQL
from duckscore.fusion.code_plan import CodePlan, LocTopK
from duckscore.fusion.recipe import load_recipe, plan
from duckscore.runner.graph import run_graph
from duckscore.scoring.policy_view import load_score_policy

from ..helpers import FIXTURES

CODE = FIXTURES / "code"
TOP_K = {"file": 5, "module": 10, "entity": 10}


def entities_by_file() -> dict[tuple[str | None, str], list[dict[str, Any]]]:
    found: dict[tuple[str | None, str], list[dict[str, Any]]] = defaultdict(list)
    for row in pq.read_table(CODE / "entities.parquet").to_pylist():
        if row["kind"] != "file":
            found[(row["revision"], row["file_path"])].append(row)
    return found


def mapped(hit: dict[str, Any], known: dict) -> dict[str, str]:
    """The hit's file, module and entity; a file-level hit its module_path's module (the module's
    own entity) when it names one, else, as a block in no entity, its file."""
    file = hit["file_path"]
    levels = {"file": file, "module": file, "entity": file}
    if hit["granularity"] in ("doc", "file"):
        module = hit.get("module_path")
        return levels if module is None else levels | {"module": module, "entity": module}
    best = None
    for entity in known[(hit["revision"], file)]:
        overlap = (
            min(hit["end_line"], entity["end_line"])
            - max(hit["start_line"], entity["start_line"])
            + 1
        )
        if overlap < 1:
            continue
        key = (-overlap, entity["end_line"] - entity["start_line"] + 1, entity["entity_id"])
        if best is None or key < best[0]:
            best = (key, entity)
    if best is not None:
        levels |= {"module": best[1]["module_id"], "entity": best[1]["entity_id"]}
    return levels


def expected_lists(log: Path = CODE / "retrieval_log.parquet") -> dict[str, dict[str, list[str]]]:
    known = entities_by_file()
    hits = pq.read_table(log).to_pylist()
    # per (query, level, source, item): the best hit (max score, then lowest rank)
    best: dict[tuple[str, str, str, str], tuple[float, int]] = {}
    for hit in hits:
        for level, item in mapped(hit, known).items():
            key = (hit["query_id"], level, hit["source"], item)
            here = (-hit["score"], hit["rank"])
            best[key] = min(best.get(key, here), here)
    lists: dict[tuple[str, str, str], list[tuple[tuple[float, int], str]]] = defaultdict(list)
    for (query, level, source, item), order in best.items():
        lists[(query, level, source)].append((order, item))
    rrf: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (query, level, _), entries in lists.items():
        for rank, (_, item) in enumerate(sorted(entries), start=1):
            rrf[(query, level)][item] += 1 / (60 + rank)
    result: dict[str, dict[str, list[str]]] = defaultdict(dict)
    for (query, level), scores in rrf.items():
        ranked = sorted(scores, key=lambda item: (-round(scores[item], 12), item))
        if level != "file":  # a file ranked at the module or entity level is not listed
            ranked = [item for item in ranked if ":" in item]
        result[query][level] = ranked[: TOP_K[level]]
    return result


def ran(log: Path, out: Path) -> Path:
    done = CliRunner().invoke(
        cli,
        ["-q", "run", "--log", str(log), "--entities", str(CODE / "entities.parquet"), "--recipe",
         "code_rrf_v1", "--out", str(out)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ran(CODE / "retrieval_log.parquet", tmp_path_factory.mktemp("code") / "out")


@pytest.fixture(scope="module")
def loc_outputs(run_out: Path) -> list[str]:
    return (run_out / "loc_outputs.jsonl").read_text(encoding="utf-8").splitlines()


def test_the_lists_equal_the_plain_python_reference(loc_outputs: list[str]) -> None:
    assert_lists(loc_outputs, expected_lists())


def with_module_paths(path: Path) -> Path:
    """The bundled log with a module_path on every other summary hit (its rank odd) of a file that
    has modules: its file's first module by id at its revision, as if it summarised that module."""
    modules: dict[tuple[str | None, str], str] = {}
    for (revision, file), rows in entities_by_file().items():
        modules[(revision, file)] = min(r["module_id"] for r in rows)
    hits = pq.read_table(CODE / "retrieval_log.parquet").to_pylist()
    for hit in hits:
        summarised = hit["source"] == "summary" and hit["rank"] % 2 == 1
        key = (hit["revision"], hit["file_path"])
        hit["module_path"] = modules.get(key) if summarised else None
    assert sum(hit["module_path"] is not None for hit in hits) > 500
    pq.write_table(pa.Table.from_pylist(hits), path)
    return path


def test_module_summaries_equal_the_plain_python_reference(tmp_path: Path) -> None:
    log = with_module_paths(tmp_path / "log.parquet")
    found = (ran(log, tmp_path / "out") / "loc_outputs.jsonl").read_text(encoding="utf-8")
    expected = expected_lists(log)
    assert_lists(found.splitlines(), expected)
    # the summaries' modules are listed: the module lists of many instances change
    plain = expected_lists()
    assert sum(expected[q]["module"] != plain[q]["module"] for q in plain) > 50


def assert_lists(loc_outputs: list[str], expected: dict[str, dict[str, list[str]]]) -> None:
    found = [json.loads(line) for line in loc_outputs]
    assert [line["instance_id"] for line in found] == sorted(expected)
    for line in found:
        want = expected[line["instance_id"]]
        assert line["found_files"] == want["file"], line["instance_id"]
        assert line["found_modules"] == want["module"], line["instance_id"]
        assert line["found_entities"] == want["entity"], line["instance_id"]
    assert all(list(line) == ["instance_id", "found_files", "found_modules", "found_entities",
                              "raw_output_loc"] for line in found)  # fmt: skip
    assert loc_outputs == [json.dumps(line) for line in found]


def test_every_stage_of_a_code_run_is_recorded(run_out: Path) -> None:
    """No recorded SQL reads a relation whose definition the output folder does not hold."""
    manifest = json.loads((run_out / "manifest.json").read_text(encoding="utf-8"))
    sql = {
        template: RenderedSQL(template, (run_out / "sql" / template.replace("/", "_")).read_text())
        for template in manifest["sql"]
    }
    graph = run_graph(
        plan(load_recipe("code_rrf_v1"), ["bm25", "summary", "tfidf"], True,
             code=CodePlan("file", LocTopK(), parse_ids=False)),
        load_score_policy("overall_v3"),
        shared=True,
    )  # fmt: skip
    made = {stage.name: stage.template for stage in graph}
    assert set(made.values()) == set(sql)
    for rendered in sql.values():
        for table in tables_read(rendered):
            assert table in graph.inputs or made.get(table) in sql, (rendered.template, table)


def eval_loc(run_out: Path, gold: Path, *entities: str) -> Any:
    done = CliRunner().invoke(
        cli,
        ["eval", "--loc", str(run_out / "loc_outputs.jsonl"), "--gold", str(gold), "--json",
         *entities],
    )  # fmt: skip
    return json.loads(done.output) if done.exit_code == 0 else done.output


def test_the_bundled_gold_passes_entities_at_its_revisions(run_out: Path, tmp_path: Path) -> None:
    """With --entities (197 revisions) the bundled gold — its table, its JSONL's base_commit, the
    table without revisions — is known, and scores as without; a click/ file at a parent after
    the move to src/click/ is refused."""
    means = eval_loc(run_out, CODE / "gold.parquet")
    assert means["file"]["Acc@1"] == 0.575
    entities = ("--entities", str(CODE / "entities.parquet"))
    gold = pq.read_table(CODE / "gold.parquet")
    without_revision = tmp_path / "gold.parquet"
    pq.write_table(gold.drop_columns(["revision"]), without_revision)
    for given in (CODE / "gold.parquet", CODE / "gold.jsonl", without_revision):
        assert eval_loc(run_out, given, *entities) == means, given
    rows = gold.to_pylist()
    after_move = next(r["revision"] for r in rows if r["location"].startswith("src/click/"))
    before = next(r["instance_id"] for r in rows if r["location"].startswith("click/"))
    moved = tmp_path / "moved.parquet"
    pq.write_table(gold.from_pylist([r | {"revision": after_move} if r["instance_id"] == before
                                     else r for r in rows], gold.schema), moved)  # fmt: skip
    refused = eval_loc(run_out, moved, *entities)
    assert f"instance '{before}': location 'click/" in refused
    assert f"at revision '{after_move}'" in refused
