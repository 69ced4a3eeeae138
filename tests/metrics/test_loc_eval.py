"""`duckscore eval --loc`: the code-localization metrics against hand-computed values and against
an independent plain-Python reference (tests/metrics/loc_reference.py, a transcription of
LocAgent's published evaluation code), on small cases and on random ones (hypothesis).

The hand-computed cases pin each quirk of the published definitions, so a template that drops
one fails here: Acc@k capped at min(|G|, k), Recall's denominator min(|G|, max_k), MAP divided by
k, an instance without a prediction line counting as all miss, an instance without gold skipped,
`__init__` merged and repeated locations kept once, paths normalised on both sides.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duckscore.cli import cli
from duckscore.core.check import check_sql
from duckscore.core.errors import DuckscoreError, InputError
from duckscore.core.inputs import schema_of
from duckscore.metrics.catalog import MetricError, parse_loc_levels
from duckscore.metrics.localization import evaluate_localization, render_localization

from ..helpers import same_value
from . import loc_reference as reference

STAGES = (
    "level_cutoffs",
    "normalized_predictions",
    "normalized_gold",
    "gold_sets",
    "evaluated",
    "kept_predictions",
    "ranked_predictions",
    "judged",
    "positioned",
    "prediction_stats",
    "ideal",
    "ideal_stats",
    "predicted_counts",
    "per_query",
    "means",
)


def write_lines(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def loc_line(instance: str, files: list[str] | None = None, modules: list[str] | None = None,
             entities: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {"instance_id": instance, "found_files": files or [], "found_modules": modules or [],
            "found_entities": entities or [], "raw_output_loc": []}  # fmt: skip


def gold_line(instance: str, files: list[str], modules: list[str] | None = None,
              entities: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """One file_change per file; the modules and entities under the first."""
    changes = [{"file": f, "changes": {}} for f in files]
    if changes:
        changes[0]["changes"] = {"edited_modules": modules or [], "edited_entities": entities or []}
    return {"instance_id": instance, "file_changes": changes}


def evaluate_files(tmp: Path, loc: list[dict[str, Any]], gold: list[dict[str, Any]],
                   **options: Any) -> Any:  # fmt: skip
    return evaluate_localization(
        write_lines(tmp / "loc_outputs.jsonl", loc),
        write_lines(tmp / "gold.jsonl", gold),
        **options,
    )


def value(result: Any, instance: str, level: str, name: str) -> float:
    frame = result.per_query
    row = frame[(frame["instance_id"] == instance) & (frame["level"] == level)]
    assert len(row) == 1, (instance, level)
    return float(row.iloc[0][name])


# ---------------------------------------------------------------------------------------------
# hand-computed cases


def test_acc_is_capped_at_k(tmp_path: Path) -> None:
    """|G| = 3, predictions g1 x g2 g3: one gold in the top 1 is all Acc@1 asks (min(3, 1) = 1);
    the top 3 holds two of three (0); the top 5 all three (1)."""
    result = evaluate_files(
        tmp_path,
        [loc_line("i", ["g1.py", "x.py", "g2.py", "g3.py", "y.py"])],
        [gold_line("i", ["g1.py", "g2.py", "g3.py"])],
        levels="file",
        k=["file=1,3,5"],
    )
    assert result.means["file"]["Acc@1"] == 1.0
    assert result.means["file"]["Acc@3"] == 0.0
    assert result.means["file"]["Acc@5"] == 1.0


def test_recall_divides_by_the_gold_capped_at_the_largest_k(tmp_path: Path) -> None:
    """|G| = 12, k 1, 3, 5, the first five predictions gold: Recall@5 = 5 / min(12, 5) = 1 and
    Recall@3 = 3 / 5, not 3 / 12 (all the gold) nor 3 / 3 (capped at k)."""
    gold = [f"g{i}.py" for i in range(12)]
    result = evaluate_files(
        tmp_path, [loc_line("i", gold[:5])], [gold_line("i", gold)], levels="file"
    )
    assert result.means["file"]["Recall@5"] == 1.0
    assert same_value(result.means["file"]["Recall@3"], 0.6)
    assert same_value(result.means["file"]["Recall@1"], 0.2)


def test_map_is_divided_by_k(tmp_path: Path) -> None:
    """G = {a, b}, predictions a x b: MAP@3 = (1/1 + 2/3) / 3 = 5/9 (not / |G|: 5/6);
    MAP@1 = 1; MAP@5 = (5/3) / 5 = 1/3; P@5 = 2/5."""
    result = evaluate_files(
        tmp_path,
        [loc_line("i", ["a.py", "x.py", "b.py"])],
        [gold_line("i", ["a.py", "b.py"])],
        levels="file",
        k=["file=1,3,5"],
    )
    means = result.means["file"]
    assert same_value(means["MAP@3"], 5 / 9)
    assert means["MAP@1"] == 1.0
    assert same_value(means["MAP@5"], 1 / 3)
    assert same_value(means["P@5"], 0.4)


def test_ndcg_with_gain_one_and_the_capped_ideal(tmp_path: Path) -> None:
    """G = {a, b}, predictions x a: DCG@2 = 1/log2(3), ideal DCG@2 = 1 + 1/log2(3); at k = 1
    the ideal holds one hit (1) and the top 1 none (0)."""
    result = evaluate_files(
        tmp_path,
        [loc_line("i", ["x.py", "a.py"])],
        [gold_line("i", ["a.py", "b.py"])],
        levels="file",
        k=["file=1,2"],
    )
    assert same_value(result.means["file"]["NDCG@2"], (1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert result.means["file"]["NDCG@1"] == 0.0


def test_an_instance_without_a_prediction_line_is_all_miss(tmp_path: Path) -> None:
    """i2 has gold and no line: it scores 0 and the means divide by 3."""
    result = evaluate_files(
        tmp_path,
        [loc_line("i1", ["a.py"]), loc_line("i3", ["c.py"])],
        [gold_line("i1", ["a.py"]), gold_line("i2", ["b.py"]), gold_line("i3", ["c.py"])],
        levels="file",
    )
    assert result.summaries["file"].evaluated == 3
    assert result.summaries["file"].without_predictions == 1
    assert same_value(result.means["file"]["Acc@1"], 2 / 3)
    assert all(value(result, "i2", "file", name) == 0.0 for name in result.means["file"])


def test_an_instance_without_gold_is_skipped(tmp_path: Path) -> None:
    """i2's gold is empty (no file change) and i3's has no entity: each is skipped where its gold
    has nothing, so the means are i1's alone."""
    result = evaluate_files(
        tmp_path,
        [
            loc_line("i1", ["a.py"], ["a.py:f"], ["a.py:f"]),
            loc_line("i2"),
            loc_line("i3", ["c.py"]),
        ],
        [
            gold_line("i1", ["a.py"], ["a.py:f"], ["a.py:f"]),
            gold_line("i2", []),
            gold_line("i3", ["c.py"]),
        ],
    )
    assert result.summaries["file"].evaluated == 2
    assert result.summaries["file"].skipped == 1
    assert result.summaries["function"].evaluated == 1
    assert result.summaries["function"].skipped == 2
    assert result.means["function"]["Acc@5"] == 1.0
    assert set(result.per_query["instance_id"]) == {"i1", "i3"}


def test_init_is_merged_and_each_location_counts_once(tmp_path: Path) -> None:
    """At function level `a.py:A.__init__` is `a.py:A` on both sides; the predictions
    A.__init__, A, B become A, B, so B is second: Acc@2 = 1. Without merging the gold is
    {A.__init__, B} and the predictions stay three: a hit, a miss, a hit."""
    loc = [loc_line("i", ["a.py"], ["a.py:A"], ["a.py:A.__init__", "a.py:A", "a.py:B"])]
    gold = [gold_line("i", ["a.py"], ["a.py:A"], ["a.py:A.__init__", "a.py:B"])]
    merged = evaluate_files(tmp_path, loc, gold, levels="function", k=["function=1,2"])
    assert merged.means["function"]["Acc@2"] == 1.0
    assert merged.per_query.iloc[0]["n_predicted"] == 2
    assert merged.per_query.iloc[0]["n_gold"] == 2
    plain = evaluate_files(
        tmp_path, loc, gold, levels="function", k=["function=1,2,3"], merge_init=False
    )
    means = plain.means["function"]
    assert (means["Acc@1"], means["Acc@2"], means["Acc@3"]) == (1.0, 0.0, 1.0)
    assert same_value(means["MAP@3"], (1 / 1 + 2 / 3) / 3)
    assert plain.per_query.iloc[0]["n_predicted"] == 3


def test_paths_are_normalised_on_both_sides(tmp_path: Path) -> None:
    result = evaluate_files(
        tmp_path,
        [loc_line("i", ["./pkg/a.py", "pkg\\b.py"], ["././pkg/a.py:A"])],
        [gold_line("i", ["pkg\\a.py", "./pkg/b.py"], ["pkg/a.py:A"])],
        levels="file,module",
    )
    assert result.means["file"]["Acc@2"] == 1.0
    assert result.means["module"]["Acc@3"] == 1.0


def test_edit_functions_give_files_modules_and_entities(tmp_path: Path) -> None:
    gold = [{"instance_id": "i", "edit_functions": ["a.py:A.m", "a.py:A.n", "b.py:f"]}]
    loc = [
        loc_line("i", ["b.py", "a.py"], ["a.py:A", "b.py:f"], ["a.py:A.n", "b.py:f", "a.py:A.m"])
    ]
    result = evaluate_files(tmp_path, loc, gold)
    assert result.per_query.set_index("level")["n_gold"].to_dict() == {
        "file": 2, "module": 2, "function": 3,
    }  # fmt: skip
    assert result.means["file"]["Acc@2"] == 1.0
    assert result.means["module"]["Acc@3"] == 1.0
    assert result.means["function"]["Acc@3"] == 1.0


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl", ".json"])
def test_a_gold_table_reads_as_the_benchmark_shape(tmp_path: Path, suffix: str) -> None:
    loc = [loc_line("i1", ["a.py", "b.py"], ["a.py:A"], ["a.py:A.m"]), loc_line("i2", ["c.py"])]
    benchmark = [gold_line("i1", ["b.py"], ["a.py:A", "b.py:g"], ["a.py:A.m"]),
                 gold_line("i2", ["d.py", "c.py"])]  # fmt: skip
    rows = [("i1", "file", "b.py"), ("i1", "module", "a.py:A"), ("i1", "module", "b.py:g"),
            ("i1", "function", "a.py:A.m"), ("i2", "file", "d.py"), ("i2", "file", "c.py")]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["instance_id", "level", "location"])
    table = tmp_path / f"gold{suffix}"
    if suffix == ".csv":
        frame.to_csv(table, index=False)
    elif suffix == ".parquet":
        frame.to_parquet(table)
    elif suffix == ".jsonl":
        frame.to_json(table, orient="records", lines=True)
    else:  # an array over several lines
        frame.to_json(table, orient="records", indent=1)
    loc_path = write_lines(tmp_path / "loc.jsonl", loc)
    from_table = evaluate_localization(loc_path, table)
    from_benchmark = evaluate_localization(loc_path, write_lines(tmp_path / "b.jsonl", benchmark))
    assert from_table.inputs.gold_shape == "table"
    assert from_benchmark.inputs.gold_shape == "benchmark"
    assert from_table.means == from_benchmark.means
    assert same_value(from_table.means["module"]["Recall@3"], 0.5)


def test_instances_only_predicted_are_ignored_and_counted(tmp_path: Path) -> None:
    result = evaluate_files(
        tmp_path,
        [loc_line("i", ["a.py"]), loc_line("other", ["a.py"])],
        [gold_line("i", ["a.py"])],
        levels="file",
    )
    assert result.ignored == 1
    assert list(result.per_query["instance_id"]) == ["i"]


def in_order(terms: list[float]) -> float:
    total = 0.0
    for term in terms:
        total += term
    return total


def test_sums_run_in_rank_and_instance_order_to_the_bit(tmp_path: Path) -> None:
    """The template sums DCG, the ideal DCG and MAP's precisions in rank order, and the means in
    instance_id order. Hits at ranks 1, 2, 3, 5, 6 and 10 of 10 give other last bits when any of
    the three sums runs the other way; P@10 of 0.1, 0.2 and 0.3 sum to 0.6000000000000001 in
    instance order and to 0.6 in the other."""
    ranks = (1, 2, 3, 5, 6, 10)
    found = [f"g{r}.py" if r in ranks else f"x{r}.py" for r in range(1, 11)]
    gold = [f"g{r}.py" for r in ranks]
    ordered = evaluate_files(tmp_path, [loc_line("i", found)], [gold_line("i", gold)],
                             levels="file", k=["file=10"])  # fmt: skip
    dcg = in_order([1 / math.log2(r + 1) for r in ranks])
    ideal = in_order([1 / math.log2(i + 1) for i in range(1, len(ranks) + 1)])
    assert ordered.means["file"]["NDCG@10"] == dcg / ideal
    assert (
        ordered.means["file"]["MAP@10"] == in_order([(n + 1) / r for n, r in enumerate(ranks)]) / 10
    )
    hits = {"a": 1, "b": 2, "c": 3}
    spread = evaluate_files(
        tmp_path,
        [loc_line(i, [f"{i}{n}.py" for n in range(h)]) for i, h in hits.items()],
        [gold_line(i, [f"{i}{n}.py" for n in range(10)]) for i in hits],
        levels="file",
        k=["file=10"],
    )
    assert spread.means["file"]["P@10"] == in_order([0.1, 0.2, 0.3]) / 3


# ---------------------------------------------------------------------------------------------
# the reference on random instances

FILES = ["a.py", "./a.py", "pkg\\c.py", "pkg/c.py", "d.py", "e.py"]
MODULES = ["a.py:A", "./a.py:A", "a.py:f", "pkg/c.py:C", "d.py:g"]
ENTITIES = ["a.py:A", "a.py:A.__init__", "a.py:A.m", "pkg\\c.py:C.__init__", "pkg/c.py:C", "d.py:g"]
POOLS = {"file": FILES, "module": MODULES, "function": ENTITIES}
K_SETS = st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=4, unique=True)


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    instances = [f"i{n}" for n in range(draw(st.integers(min_value=1, max_value=6)))]
    gold: dict[str, dict[str, list[str]]] = {}
    for n, instance in enumerate(instances):
        lists = {level: draw(st.lists(st.sampled_from(pool), max_size=5))
                 for level, pool in POOLS.items()}  # fmt: skip
        if n == 0:  # every level has gold somewhere
            lists = {level: [*found, POOLS[level][-1]] for level, found in lists.items()}
        gold[instance] = lists
    predicted = [i for n, i in enumerate(instances) if n == 0 or draw(st.booleans())]
    loc = []
    for instance in [*predicted, *(["extra"] if draw(st.booleans()) else [])]:
        line: dict[str, Any] = {"instance_id": instance}
        for level, pool in POOLS.items():
            if instance == instances[0] or draw(st.booleans()):
                line[reference.KEYS[level]] = draw(st.lists(st.sampled_from(pool), max_size=8))
        loc.append(line)
    return {
        "gold": gold,
        "loc": loc,
        "table": draw(st.booleans()),
        "merge_init": draw(st.booleans()),
        "ks": {level: tuple(sorted(draw(K_SETS))) for level in POOLS},
    }


def write_gold(folder: Path, case: dict[str, Any]) -> Path:
    if case["table"]:  # a table holds each (instance, level, location) once
        rows = sorted({(i, level, x) for i, lists in case["gold"].items()
                       for level, found in lists.items() for x in found})  # fmt: skip
        path = folder / "gold.parquet"
        pd.DataFrame(rows, columns=["instance_id", "level", "location"]).to_parquet(path)
        return path
    lines = [gold_line(i, lists["file"], lists["module"], lists["function"])
             for i, lists in case["gold"].items()]  # fmt: skip
    return write_lines(folder / "gold.jsonl", lines)


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(case=cases())
def test_the_sql_equals_the_reference_on_random_instances(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        loc = write_lines(folder / "loc.jsonl", case["loc"])
        gold = write_gold(folder, case)
        k = [f"{level}={','.join(map(str, ks))}" for level, ks in case["ks"].items()]
        result = evaluate_localization(loc, gold, k=k, merge_init=case["merge_init"])
        gold_rows = reference.read_jsonl(gold) if not case["table"] else None
        for level, ks in case["ks"].items():
            if gold_rows is None:
                frame = pd.read_parquet(gold)
                expected_gold = reference.table_gold(list(frame.itertuples(index=False)), level)
            else:
                expected_gold = reference.benchmark_gold(gold_rows, level)
            expected = reference.per_instance(
                reference.predictions(loc, level, case["merge_init"]), expected_gold, ks, level,
                case["merge_init"],
            )  # fmt: skip
            got = result.per_query[result.per_query["level"] == level].set_index("instance_id")
            assert sorted(got.index) == sorted(expected)
            for instance, values in expected.items():
                for name, want in values.items():
                    assert same_value(float(got.loc[instance, name]), want), (instance, name)
            for name, want in reference.means(expected).items():
                assert same_value(result.means[level][name], want), (level, name)
            assert list(result.means[level]) == list(reference.means(expected))


# ---------------------------------------------------------------------------------------------
# refusals


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"instance_id": "a", "found_files": []}\n\n{"instance_id": "b", found_files: []}\n',
         "line 3): not JSON"),
        ('{"found_files": ["a.py"]}\n', "line 1): no instance_id"),
        ('{"instance_id": ["a"], "found_files": []}\n', "line 1): instance_id ['a'] is not a text"),
        ('{"instance_id": "a", "found_files": "a.py"}\n', "line 1): found_files is not a list of texts"),
        ('{"instance_id": "a", "found_files": [1]}\n', "line 1): found_files is not a list of texts"),
        ('{"instance_id": "a", "found_files": ["a.py"]}\n{"instance_id": "a", "found_files": []}\n',
         "line 2): instance_id 'a' again (first at line 1)"),
        ('["a"]\n', "line 1): not a JSON object"),
        ('{"instance_id": "a"}\n', "no line has found_files"),
        ("\n \n", "empty file, no lines"),
    ],
)  # fmt: skip
def test_bad_loc_lines_are_refused_naming_the_line(tmp_path: Path, text: str, message: str) -> None:
    loc = tmp_path / "loc.jsonl"
    loc.write_text(text, encoding="utf-8")
    gold = write_lines(tmp_path / "gold.jsonl", [gold_line("a", ["a.py"])])
    with pytest.raises(InputError, match=f"--loc \\({loc}.*" + _escaped(message)):
        evaluate_localization(loc, gold, levels="file")


@pytest.mark.parametrize(
    "lines, message",
    [
        ([{"instance_id": "a"}], "line 1): neither file_changes nor edit_functions"),
        ([{"instance_id": "a", "file_changes": [{"changes": {}}]}],
         "file_changes[0].file is not a non-empty text"),
        ([{"instance_id": "a", "file_changes": [{"file": "a.py", "changes": {"edited_entities": "f"}}]}],
         "file_changes[0].changes: edited_entities is not a list of texts"),
        ([{"instance_id": "a", "edit_functions": ["a.py:f", ""]}], "edit_functions holds an empty text"),
        ([gold_line("a", ["a.py"]), gold_line("a", ["b.py"])], "line 2): instance_id 'a' again"),
        ([{**gold_line("a", ["a.py"]), "revision": 7}], "line 1): revision 7 is not a non-empty text"),
        ([{**gold_line("a", ["a.py"]), "base_commit": ""}], "line 1): base_commit '' is not a non-empty text"),
        ([{**gold_line("a", ["a.py"]), "revision": "r1", "base_commit": "r2"}],
         "line 1): revision 'r1' and base_commit 'r2' differ"),
    ],
)  # fmt: skip
def test_bad_benchmark_gold_is_refused_naming_the_line(
    tmp_path: Path, lines: list[dict[str, Any]], message: str
) -> None:
    if "edit_functions" not in lines[0] and "file_changes" not in lines[0]:
        lines = [gold_line("z", ["z.py"]), *lines]  # the first line decides the shape
        message = message.replace("line 1", "line 2")
    loc = write_lines(tmp_path / "loc.jsonl", [loc_line("a", ["a.py"])])
    with pytest.raises(InputError, match="--gold .*" + _escaped(message)):
        evaluate_localization(loc, write_lines(tmp_path / "gold.jsonl", lines), levels="file")


def test_bad_gold_table_rows_are_refused_naming_the_row(tmp_path: Path) -> None:
    loc = write_lines(tmp_path / "loc.jsonl", [loc_line("a", ["a.py"])])
    gold = tmp_path / "gold.csv"
    gold.write_text("instance_id,level,location\na,file,a.py\na,class,a.py:A\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"row 2.*'level' is not one of file, module, function"):
        evaluate_localization(loc, gold, levels="file")


def test_gold_sharing_no_instance_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="share no instance: none of the 1 predicted"):
        evaluate_files(tmp_path, [loc_line("a", ["a.py"])], [gold_line("b", ["a.py"])])


def test_a_level_without_gold_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no instance has a module or function location"):
        evaluate_files(tmp_path, [loc_line("a", ["a.py"])], [gold_line("a", ["a.py"])])


def test_entities_refuse_a_gold_location_in_an_unknown_file(tmp_path: Path) -> None:
    entities = tmp_path / "entities.parquet"
    pd.DataFrame({"file_path": ["pkg/a.py", "pkg/a.py"], "kind": ["file", "function"]}).to_parquet(
        entities
    )
    loc = [loc_line("i", ["pkg/a.py"], ["pkg/a.py:f"], ["pkg/a.py:f"])]
    known = [gold_line("i", ["./pkg/a.py"], ["pkg/a.py:f"], ["pkg\\a.py:f"])]
    assert evaluate_files(tmp_path, loc, known, entities=entities).means["file"]["Acc@1"] == 1.0
    unknown = [gold_line("i", ["pkg/a.py", "pkg/b.py"], ["pkg/b.py:g"], ["pkg/a.py:f"])]
    with pytest.raises(
        InputError,
        match=r"instance 'i': location 'pkg/b\.py' names no file of --entities .* 1 more",
    ):
        evaluate_files(tmp_path, loc, unknown, entities=entities)


def two_revisions(path: Path) -> Path:
    """An entities table of pkg/a.py at r1, and of pkg/a.py and pkg/b.py at r2."""
    pd.DataFrame(
        {"revision": ["r1", "r2", "r2"], "file_path": ["pkg/a.py", "pkg/a.py", "pkg/b.py"],
         "kind": ["file", "file", "file"]}
    ).to_parquet(path)  # fmt: skip
    return path


def test_entities_of_another_revision_know_no_gold_file(tmp_path: Path) -> None:
    """pkg/b.py is a file at r2, not at r1: gold at r1 naming it is refused, at r2 it is not."""
    entities = two_revisions(tmp_path / "entities.parquet")
    loc = [loc_line("i", ["pkg/b.py"])]
    at_r2 = {**gold_line("i", ["pkg/a.py", "pkg/b.py"]), "revision": "r2"}
    result = evaluate_files(tmp_path, loc, [at_r2], levels="file", entities=entities)
    assert result.means["file"]["Recall@1"] == 0.5
    with pytest.raises(
        InputError,
        match=r"instance 'i': location 'pkg/b\.py' names no file of --entities "
        r"\(.*entities\.parquet\) at revision 'r1'$",
    ):
        evaluate_files(tmp_path, loc, [{**at_r2, "revision": "r1"}], levels="file",
                       entities=entities)  # fmt: skip


def test_a_benchmark_line_s_base_commit_is_its_revision(tmp_path: Path) -> None:
    """SWE-bench's and Loc-Bench's base_commit, when the line gives no revision, is the commit
    the locations are at: pkg/b.py is known at r2, not at r1."""
    entities = two_revisions(tmp_path / "entities.parquet")
    loc = [loc_line("i", ["pkg/b.py"])]
    gold = gold_line("i", ["pkg/b.py"])
    with pytest.raises(InputError, match=r"'pkg/b\.py' names no file .* at revision 'r1'$"):
        evaluate_files(tmp_path, loc, [{**gold, "base_commit": "r1"}], levels="file",
                       entities=entities)  # fmt: skip
    for keys in ({"base_commit": "r2"}, {"revision": "r2", "base_commit": "r2"}):
        result = evaluate_files(tmp_path, loc, [{**gold, **keys}], levels="file",
                                entities=entities)  # fmt: skip
        assert result.means["file"]["Acc@1"] == 1.0, keys


def test_a_gold_table_gives_its_instances_revision(tmp_path: Path) -> None:
    entities = two_revisions(tmp_path / "entities.parquet")
    loc = write_lines(tmp_path / "loc_outputs.jsonl", [loc_line("i", ["pkg/b.py"])])
    gold = tmp_path / "gold.csv"
    gold.write_text("instance_id,level,location,revision\ni,file,pkg/b.py,r1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"'pkg/b\.py' names no file .* at revision 'r1'$"):
        evaluate_localization(loc, gold, levels="file", entities=entities)
    gold.write_text(
        "instance_id,level,location,revision\ni,file,pkg/b.py,r2\ni,file,pkg/a.py,r1\n"
        "i,module,pkg/a.py:f,\n",
        encoding="utf-8",
    )
    with pytest.raises(
        InputError,
        match=r"\(.*gold\.csv\): instance 'i' gives more than one revision "
        r"\(NULL, 'r1', 'r2'\)",
    ):
        evaluate_localization(loc, gold, levels="file", entities=entities)


def test_gold_without_a_revision_is_checked_at_any_revision_of_the_entities(
    tmp_path: Path,
) -> None:
    """Without a revision, a gold instance's file is known when any revision of --entities lists
    it (pkg/b.py: r2 only), as before revisions were read; a file of none is refused."""
    loc = [loc_line("i", ["pkg/b.py"])]
    gold = [gold_line("i", ["pkg/b.py"])]
    entities = two_revisions(tmp_path / "entities.parquet")
    result = evaluate_files(tmp_path, loc, gold, levels="file", entities=entities)
    assert result.means["file"]["Acc@1"] == 1.0
    with pytest.raises(
        InputError, match=r"instance 'i': location 'pkg/c\.py' names no file of --entities \(.*\)$"
    ):
        evaluate_files(tmp_path, loc, [gold_line("i", ["pkg/c.py"])], levels="file",
                       entities=entities)  # fmt: skip
    at_r2 = tmp_path / "r2.parquet"
    pd.read_parquet(entities).query("revision == 'r2'").to_parquet(at_r2)
    with pytest.raises(InputError, match=r"names no file of --entities .* at revision 'r1'$"):
        evaluate_files(tmp_path, loc, [{**gold[0], "revision": "r1"}], levels="file",
                       entities=at_r2)  # fmt: skip


@pytest.mark.parametrize(
    "levels, k, message",
    [
        ("file,class", (), "unknown level 'class'"),
        ("file,file", (), "'file' is listed twice"),
        ("file", ("module=5",), "module is not one of --levels 'file'"),
        ("file", ("file=1", "file=3"), "file is given twice"),
        ("file", ("file=0",), "each k must be a whole number"),
        ("file", ("file=1,,3",), "each k must be a whole number"),
        ("file", ("file=3,3",), "listed twice"),
        ("file", ("files=3",), "write LEVEL=K"),
    ],
)
def test_bad_levels_and_cutoffs(levels: str, k: tuple[str, ...], message: str) -> None:
    with pytest.raises(MetricError, match=_escaped(message)):
        parse_loc_levels(levels, k)


def test_levels_keep_their_order_and_default_cutoffs() -> None:
    assert parse_loc_levels("function, FILE", ["file=5,1"]) == {
        "function": (3, 5, 10),
        "file": (1, 5),
    }


def _escaped(message: str) -> str:
    return message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")


# ---------------------------------------------------------------------------------------------
# the command line


@pytest.fixture
def small(tmp_path: Path) -> tuple[Path, Path]:
    loc = write_lines(tmp_path / "loc.jsonl",
                      [loc_line("i1", ["a.py", "b.py"], ["a.py:A"], ["a.py:A.__init__"]),
                       loc_line("i9", ["z.py"])])  # fmt: skip
    gold = write_lines(tmp_path / "gold.jsonl",
                       [gold_line("i1", ["b.py"], ["a.py:A"], ["a.py:A"]),
                        gold_line("i2", ["c.py"], ["c.py:C"], ["c.py:C.m"])])  # fmt: skip
    return loc, gold


def test_cli_prints_a_table_per_level(small: tuple[Path, Path]) -> None:
    loc, gold = small
    done = CliRunner().invoke(cli, ["eval", "--loc", str(loc), "--gold", str(gold), "--levels",
                                    "file,function", "--k", "file=1,2"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        "file: 2 instances evaluated (1 without predictions); 0 gold instances without a file location skipped",
        "metric          mean", "Acc@1       0.000000", "Acc@2       0.500000",
        "NDCG@1      0.000000", f"NDCG@2      {(1 / math.log2(3)) / 2:.6f}",
        "P@1         0.000000", "P@2         0.250000", "Recall@1    0.000000",
        "Recall@2    0.500000", "MAP@1       0.000000", "MAP@2       0.125000", "",
        "function: 2 instances evaluated (1 without predictions); 0 gold instances without a function location skipped",
        "metric           mean", "Acc@3        0.500000", "Acc@5        0.500000",
        "Acc@10       0.500000", "NDCG@3       0.500000", "NDCG@5       0.500000",
        "NDCG@10      0.500000", "P@3          0.166667", "P@5          0.100000",
        "P@10         0.050000", "Recall@3     0.500000", "Recall@5     0.500000",
        "Recall@10    0.500000", "MAP@3        0.166667", "MAP@5        0.100000",
        "MAP@10       0.050000", "", "1 predicted instances without gold ignored",
    ]  # fmt: skip


def test_cli_json_and_per_query(small: tuple[Path, Path], tmp_path: Path) -> None:
    loc, gold = small
    out = tmp_path / "per_query.csv"
    done = CliRunner().invoke(cli, ["eval", "--loc", str(loc), "--gold", str(gold), "--json",
                                    "--per-query", str(out), "--k", "module=10"])  # fmt: skip
    assert done.exit_code == 0, done.output
    means = json.loads(done.output)
    assert list(means) == ["file", "module", "function"]
    assert list(means["module"]) == ["Acc@10", "NDCG@10", "P@10", "Recall@10", "MAP@10"]
    assert list(means["file"])[:4] == ["Acc@1", "Acc@2", "Acc@3", "Acc@5"]
    assert means["module"]["Acc@10"] == 0.5
    written = pd.read_csv(out)
    assert list(written.columns[:4]) == ["instance_id", "level", "n_gold", "n_predicted"]
    assert list(zip(written["instance_id"], written["level"])) == [
        ("i1", "file"), ("i1", "module"), ("i1", "function"),
        ("i2", "file"), ("i2", "module"), ("i2", "function"),
    ]  # fmt: skip
    assert pd.isna(written.loc[1, "Acc@1"]) and written.loc[0, "Acc@1"] == 0.0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--run", "r.parquet"], "--run cannot be used with --loc"),
        (["--qrels", "q.parquet", "--metrics", "ndcg@10"], "--qrels, --metrics cannot be used with --loc"),
        (["--baseline", "b.parquet"], "--baseline cannot be used with --loc"),
    ],
)  # fmt: skip
def test_cli_refuses_retrieval_options_with_loc(
    small: tuple[Path, Path], extra: list[str], message: str
) -> None:
    loc, gold = small
    done = CliRunner().invoke(cli, ["eval", "--loc", str(loc), "--gold", str(gold), *extra])
    assert done.exit_code == 2
    assert message in done.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--loc", "loc.jsonl"], "--loc needs --gold"),
        (["--gold", "g.jsonl", "--run", "r", "--qrels", "q"], "--gold needs --loc"),
        (["--run", "r", "--qrels", "q", "--no-merge-init", "--k", "file=1"], "--k, --merge-init needs --loc"),
        (["--qrels", "q"], "Missing option '--run' (or --loc and --gold"),
    ],
)  # fmt: skip
def test_cli_needs_one_mode(args: list[str], message: str) -> None:
    done = CliRunner().invoke(cli, ["eval", *args])
    assert done.exit_code == 2
    assert message in done.output


def test_cli_writes_nothing_on_bad_input(tmp_path: Path) -> None:
    loc = tmp_path / "loc.jsonl"
    loc.write_text('{"instance_id": "a", "found_files": ["a.py"]}\n{"instance_id": 3.5}\n')
    gold = write_lines(tmp_path / "gold.jsonl", [gold_line("a", ["a.py"])])
    out = tmp_path / "per_query.parquet"
    done = CliRunner().invoke(cli, ["eval", "--loc", str(loc), "--gold", str(gold), "--levels",
                                    "file", "--per-query", str(out)])  # fmt: skip
    assert done.exit_code == 2
    assert f"--loc ({loc}, line 2): instance_id 3.5 is not a text" in done.output
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# the SQL


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_renders_checks_and_runs(stage: str) -> None:
    tables = {
        "loc_predictions": "('i', 'file', 1, 'a.py'), ('i', 'function', 1, 'a.py:A.__init__')) "
        "AS t(instance_id, level, position, location",
        "loc_gold": "('i', 'file', 'a.py'), ('i', 'function', 'a.py:A')) "
        "AS t(instance_id, level, location",
    }
    con = duckdb.connect()
    for name, rows in tables.items():
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM (VALUES {rows})")
    rendered = render_localization({"file": (1, 3), "function": (2,)}, True, stage)
    check_sql(rendered, {name: schema_of(con, name) for name in tables})
    assert con.execute(rendered.text).fetchall()


@pytest.mark.parametrize(
    "levels, message",
    [({}, "levels must name at least one level"), ({"file": (0,)}, "k must be a whole number")],
)
def test_the_template_refuses_what_the_runner_never_renders(
    levels: dict[str, tuple[int, ...]], message: str
) -> None:
    with pytest.raises(DuckscoreError, match=message):
        render_localization(levels)


def test_the_template_refuses_an_unknown_metric() -> None:
    from duckscore.core.render import render

    with pytest.raises(DuckscoreError, match="unknown localization metric bogus"):
        render("metrics/localization.sql", levels=[{"name": "file", "max_k": 1}], cutoffs=[1],
               metrics=[{"kind": "bogus", "k": 1, "column": "x", "levels": ["file"]}],
               merge_init=True, final="per_query",
               inputs={"predictions": "p", "gold": "g"})  # fmt: skip
