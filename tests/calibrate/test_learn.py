"""`duckscore learn`: the learned recipe's SQL against the libraries' own predictions (LightGBM's
Booster.predict, numpy for the linear model), a mutation check of the compiled trees, the recipe
written and read back, the command's refusals, and the SciFact report reproduced."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import lightgbm
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.calibrate.learn import feature_table, report_path_for, training_recipe, training_with
from duckscore.calibrate.ltr_fit import ModelSettings, compile_booster, fit
from duckscore.calibrate.tune_grid import assign_folds
from duckscore.cli import cli
from duckscore.core.policy import dump_yaml, load_policy
from duckscore.core.render import render_expression
from duckscore.core.session import Session
from duckscore.fusion.log import open_log
from duckscore.fusion.ltr import DEFAULT_FEATURES, feature_names
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSE_RECIPE, load_recipe
from duckscore.metrics.tables import open_qrels

from ..helpers import SCIFACT, documented_keys

LOG = SCIFACT / "retrieval_log.parquet"
QRELS = SCIFACT / "qrels.parquet"
K_ZERO = 1.0000000180025095e-35  # LightGBM's kZeroThreshold, the float 1e-35f


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


# -- the SciFact parity: fold 0 held out, the model fitted on the other four ----------------


@pytest.fixture(scope="module")
def scifact() -> dict[str, Any]:
    """SciFact's feature table, as learn() exports it, and the five folds of `--seed 42`."""
    base = load_recipe("canonical_rrf")
    with Session() as session:
        _, base_plan = open_log(session, LOG, base)
        open_qrels(session, QRELS)
        session.execute("CREATE TEMP TABLE tune_qrels AS SELECT * FROM eval_qrels")
        names = feature_names(list(DEFAULT_FEATURES), base_plan.sources)
        training = training_recipe(base, base_plan, names)
        table = feature_table(session, training, base_plan)
    folds = assign_folds(sorted(table["query_id"].unique()), 5, 42)
    return {
        "training": training,
        "table": table,
        "names": names,
        "fold": table["query_id"].map(folds),
    }


def columns(n: int) -> list[str]:
    return [f"ltr_{j}" for j in range(1, n + 1)]


@pytest.mark.parametrize("kind", ["trees", "linear"])
def test_the_sql_scores_are_the_librarys_predictions(
    kind: str, scifact: dict[str, Any], tmp_path: Path
) -> None:
    """Fitted on folds 1-4, written as a recipe file and read back, fused by `duckscore fuse`'s
    own path: on fold 0's queries every fused_score equals Booster.predict (trees) or the numpy
    product (linear) of the exported features, within 1e-9."""
    table, names = scifact["table"], scifact["names"]
    train = table[scifact["fold"] != 0]
    sizes = train.groupby("query_id", sort=False).size().tolist()
    x = train[columns(len(names))].to_numpy(float)
    y = train["relevance"].to_numpy()
    fitted = fit(x, y.astype(int), sizes, ModelSettings(kind=kind, trees=60, leaves=15))
    recipe = training_with(scifact["training"], fitted)
    path = tmp_path / "learned.yaml"
    parameters = recipe.policy.parameters
    path.write_text(dump_yaml({"recipe_id": "parity", **parameters}, flow=None))
    assert load_policy(FUSE_RECIPE, str(path)).parameters == parameters
    fuse(LOG, tmp_path / "out", str(path), explain=False, features=False)
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    held_out = table[scifact["fold"] == 0]
    expected = fitted.predict(held_out[columns(len(names))].to_numpy(float))
    got = (
        held_out[["query_id", "target_id"]]
        .merge(
            fused.rename(columns={"item_id": "target_id"}), on=["query_id", "target_id"], how="left"
        )["fused_score"]
        .to_numpy(float)
    )
    assert len(got) == len(held_out) > 5000
    assert np.max(np.abs(got - expected)) <= 1e-9
    if kind == "trees":  # the same trees, the same order: the same double
        assert np.array_equal(got, expected)


# -- the compiled split rule, mutated ------------------------------------------------------


def booster_for(missing: str) -> Any:
    """A small lambdarank model over three features with NaNs, zeros and both signs: its splits
    are of LightGBM's missing type `missing` (NaN: NaN seen in training; Zero:
    zero_as_missing; None: use_missing off), with both default directions and thresholds at
    ±kZeroThreshold."""
    rng = np.random.default_rng(1)
    n = 2000
    x = rng.normal(size=(n, 3))
    x[:, 0] = rng.choice([-1.0, 0.0, 1.0, 2.0], size=n) * (rng.random(n) < 0.8)
    x[rng.random((n, 3)) < 0.15] = np.nan
    x[:, 2] = np.where(rng.random(n) < 0.3, 0.0, x[:, 2])
    y = (np.nan_to_num(x[:, 0], nan=-1) < 0) + (np.nan_to_num(x[:, 1]) > 0.5) + np.isnan(x[:, 2])
    extra = {"nan": {}, "zero": {"zero_as_missing": True}, "none": {"use_missing": False}}
    params = {"objective": "lambdarank", "num_leaves": 7, "min_data_in_leaf": 5, "seed": 1,
              "verbosity": -1, "deterministic": True, "num_threads": 1, **extra[missing]}  # fmt: skip
    data = lightgbm.Dataset(x, y.astype(int), group=[100] * 20)
    return lightgbm.train(params, data, num_boost_round=12)


def path_to(tree: dict[str, Any], node: int) -> list[tuple[int, bool]]:
    """The splits from the root to `node`, each with the side taken (True: left)."""
    parent = {c: (n, c == tree["left_child"][n]) for n in range(len(tree["split_feature"]))
              for c in (tree["left_child"][n], tree["right_child"][n])}  # fmt: skip
    path = []
    while node != 0:
        node, left = parent[node]
        path.append((node, left))
    return path[::-1]


def reaching(tree: dict[str, Any], node: int, row: np.ndarray) -> np.ndarray:
    """`row` with the features of `node`'s ancestors set to reach it: each in the interval its
    ancestors' thresholds leave ((lo, hi]), away from 0 where it can be."""
    bounds: dict[int, list[float]] = {}
    for ancestor, left in path_to(tree, node):
        lo, hi = bounds.setdefault(tree["split_feature"][ancestor], [-np.inf, np.inf])
        threshold = tree["threshold"][ancestor]
        bounds[tree["split_feature"][ancestor]] = (
            [lo, min(hi, threshold)] if left else [max(lo, threshold), hi]
        )
    row = row.copy()
    for feature, (lo, hi) in bounds.items():
        if np.isinf(lo) and np.isinf(hi):
            continue
        value = hi - 1.0 if np.isinf(lo) else lo + 1.0 if np.isinf(hi) else (lo + hi) / 2
        row[feature] = value if abs(value) > 1e-9 or hi - lo < 1e-9 else value + (hi - lo) / 4
    return row


def boundary_rows(model: dict[str, Any]) -> np.ndarray:
    """For every split, rows that reach it with its feature at the threshold, a step either
    side, its negation, NULL, 0, ±kZeroThreshold and ±1e-36 (the other features drawn, with
    NULLs)."""
    rng = np.random.default_rng(2)
    values = [np.nan, 0.0, K_ZERO, -K_ZERO, 1e-36, -1e-36]
    rows = []
    for tree in model["trees"]:
        for node, (feature, threshold) in enumerate(zip(tree["split_feature"], tree["threshold"])):
            near = [threshold, -threshold, np.nextafter(threshold, -np.inf),
                    np.nextafter(threshold, np.inf)]  # fmt: skip
            # a split of the missing values from all others has an infinite threshold, which
            # dump_model() writes as 1e300: the same split for features within ±1e300 (a log's
            # scores are within ±1e100), not for a value beyond
            for value in [v for v in near if abs(v) <= 1e300] + values:
                row = rng.normal(size=3)
                row[rng.random(3) < 0.2] = np.nan
                row = reaching(tree, node, row)
                row[feature] = value
                rows.append(row)
    return np.array(rows)


def sql_scores(model: dict[str, Any], rows: np.ndarray, mutate: Callable[[str], str]) -> np.ndarray:
    """sql/fuse/_ltr.sql's model_inputs and score of `model` over `rows` (NaN as NULL), the
    score's SQL passed through `mutate`."""
    n = rows.shape[1]
    inputs = render_expression(
        "{% from 'fuse/_ltr.sql' import ltr_input %}"
        "{% for j in range(1, n + 1) %}{{ ltr_input(model, j) }} AS model_{{ j }}"
        "{{ ', ' if not loop.last }}{% endfor %}",
        model=model,
        n=n,
    )
    score = render_expression(
        "{% from 'fuse/_ltr.sql' import ltr_score %}{{ ltr_score(model) }}", model=model
    )
    frame = pd.DataFrame(rows, columns=columns(n)).reset_index(names="row")
    con = duckdb.connect()
    con.register("features", frame)
    query = f"SELECT {mutate(score)} FROM (SELECT *, {inputs} FROM features) ORDER BY row"
    return np.array([value for (value,) in con.execute(query).fetchall()], dtype=float)


def same_model(model: dict[str, Any], **arrays: Callable[[list[Any]], list[Any]]) -> dict[str, Any]:
    trees = [{**t, **{k: f(t[k]) for k, f in arrays.items()}} for t in model["trees"]]
    return {"kind": "trees", "trees": trees}


MUTANTS: dict[str, tuple[Callable[[dict[str, Any]], dict[str, Any]], Callable[[str], str]]] = {
    "x < threshold": (lambda m: m, lambda s: s.replace(" <= CAST(", " < CAST(")),
    "x > threshold": (lambda m: m, lambda s: s.replace(" <= CAST(", " > CAST(")),
    "default_left dropped": (
        lambda m: same_model(m, default_left=lambda d: [False] * len(d)),
        lambda s: s,
    ),
    "default_left inverted": (
        lambda m: same_model(m, default_left=lambda d: [not v for v in d]),
        lambda s: s,
    ),
    "missing read as 0": (
        lambda m: same_model(m, missing=lambda d: ["none"] * len(d)),
        lambda s: s,
    ),
    "NULL as its own missing": (
        lambda m: same_model(m, missing=lambda d: ["nan"] * len(d)),
        lambda s: s,
    ),
}
# what each kind of model tells from a mutant: every one that changes it (a `nan` split is
# already NULL's own missing, a `none` split already reads NULL as 0 and has no default side)
DETECTED = {
    "nan": set(MUTANTS) - {"NULL as its own missing"},
    "zero": set(MUTANTS),
    "none": {"x < threshold", "x > threshold", "NULL as its own missing"},
}


@pytest.mark.parametrize("missing", ["nan", "zero", "none"])
def test_the_compiled_trees_follow_lightgbms_split_rule_and_its_mutants_do_not(
    missing: str,
) -> None:
    model, stored = compile_booster(booster_for(missing))
    assert {m for t in model["trees"] for m in t["missing"]} == {missing}
    rows = boundary_rows(model)
    expected = stored.predict(rows)
    assert np.array_equal(sql_scores(model, rows, lambda s: s), expected)
    for name in DETECTED[missing]:
        change_model, change_sql = MUTANTS[name]
        mutated = sql_scores(change_model(model), rows, change_sql)
        assert not np.allclose(mutated, expected, rtol=0, atol=1e-9), name


def test_tiny_values_are_read_as_lightgbm_reads_them() -> None:
    """|x| <= kZeroThreshold is 0 to LightGBM's dense-row reader: without model_inputs' rule a
    split at -kZeroThreshold sends -kZeroThreshold left, LightGBM right."""
    model, stored = compile_booster(booster_for("none"))
    assert any(t == pytest.approx(-K_ZERO) for tree in model["trees"] for t in tree["threshold"])
    rows = boundary_rows(model)
    expected = stored.predict(rows)

    def raw_inputs(score: str) -> str:
        return score.replace("model_", "ltr_")  # the features as they are, not as LightGBM reads

    kept = sql_scores(model, rows, raw_inputs)
    assert not np.allclose(kept, expected, rtol=0, atol=1e-9)


# -- the command on a small log ------------------------------------------------------------


def synthetic(folder: Path, sources: tuple[str, ...] = ("bm25", "sum", "vec")) -> tuple[Path, Path]:
    """30 queries over 30 documents, 3 sources of 15 hits whose scores follow the relevance with
    noise (the first source most), and the judgments (grades 0, 1, 2)."""
    rng = np.random.default_rng(7)
    hits, judged = [], []
    for q in range(30):
        grades = {f"d{d}": int(rng.random() < 0.15) + int(rng.random() < 0.05) for d in range(30)}
        for s, source in enumerate(sources):
            scores = {d: g * (1.5 - 0.4 * s) + rng.normal() for d, g in grades.items()}
            top = sorted(scores, key=lambda d: (-scores[d], d))[:15]
            hits += [(f"q{q}", source, d, d, scores[d], r + 1) for r, d in enumerate(top)]
        judged += [(f"q{q}", d, g) for d, g in grades.items()]
    folder.mkdir(parents=True, exist_ok=True)
    log, qrels = folder / "log.parquet", folder / "qrels.parquet"
    pd.DataFrame(hits, columns=["query_id", "source", "item_id", "parent_id", "score", "rank"]).to_parquet(log)  # fmt: skip
    pd.DataFrame(judged, columns=["query_id", "doc_id", "relevance"]).to_parquet(qrels)
    return log, qrels


# the report's keys, in the order docs/learn.md lists them (`weights` for the linear model only)
REPORTED = documented_keys("docs/learn.md", "**The report**, written beside")


@pytest.mark.extended  # 26 s: make test's 15 minutes (docs/testing.md)
def test_learn_writes_a_recipe_that_reads_back_and_scores_as_reported(tmp_path: Path) -> None:
    import hashlib

    from duckscore.core.policy import canonical_json
    from duckscore.metrics.retrieval import evaluate

    log, qrels = synthetic(tmp_path / "in")
    out = tmp_path / "learned.yaml"
    args = ["learn", "--log", log, "--qrels", qrels, "--out", out, "--trees", "20", "--folds",
            "3", "--grid", "fusion.k=10,60"]  # fmt: skip
    done = invoke(*args)
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("learned: canonical_rrf_ltr_") and "(trees, 29 features)" in lines[0]
    assert [line.split()[0] for line in lines[3:6]] == ["learned", "canonical_rrf", "tuned"]
    report_file = report_path_for(out)
    assert report_file.name == "learned.report.json"
    recipe = load_policy(FUSE_RECIPE, str(out))
    document = recipe.metadata["learn"]
    text = report_file.read_text(encoding="utf-8")
    report = json.loads(text)
    assert list(report) == [key for key in REPORTED if key != "weights"]
    assert list(report["held_out"]) == ["learned", "base", "against_base", "tuned", "against_tuned"]
    assert all(list(row)[-2:] == ["tuned", "tuned_choice"] for row in report["per_fold"])
    ltr = recipe.parameters["ltr"]
    # the version names the parameters, which name the report
    assert recipe.version == lines[0].split()[1]
    assert recipe.version.endswith(recipe.parameters_sha256[:8])
    assert (
        recipe.parameters_sha256
        == hashlib.sha256(canonical_json(recipe.parameters).encode()).hexdigest()
    )
    assert ltr["training"]["report_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert document["report"] == "learned.report.json"
    assert report["held_out"] == document["held_out"]
    assert recipe.parameters["fusion"]["method"] == "ltr"
    assert not recipe.parameters["discover_sources"]
    per_query = pd.DataFrame(report["per_query"])
    assert len(per_query) == report["queries"] == 30
    for name in ("learned", "base", "tuned"):
        assert report["held_out"][name] == pytest.approx(per_query[name].mean(), rel=1e-9)
    # the in-sample figure is the written recipe's, fused and evaluated by the commands
    fuse(str(log), tmp_path / "fused", str(out))
    means, _ = evaluate(str(tmp_path / "fused" / "fused.parquet"), str(qrels), "ndcg@10")
    assert means["ndcg@10"] == pytest.approx(report["in_sample"]["learned"], rel=1e-9)
    # the same inputs, the same bytes
    again = tmp_path / "again.yaml"
    assert invoke(*args[:-7], again, *args[-6:]).exit_code == 0
    assert load_policy(FUSE_RECIPE, str(again)).version == recipe.version
    assert report_path_for(again).read_text(encoding="utf-8") == text


def test_a_linear_model_weighs_every_feature(tmp_path: Path) -> None:
    log, qrels = synthetic(tmp_path / "in")
    out = tmp_path / "linear.yaml"
    done = invoke("learn", "--log", log, "--qrels", qrels, "--out", out, "--model", "linear",
                  "--features", "present,rrf,minmax", "--folds", "3")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    model = load_policy(FUSE_RECIPE, str(out)).parameters["ltr"]["model"]
    assert model["kind"] == "linear" and len(model["weights"]) == 9
    report = json.loads(report_path_for(out).read_text(encoding="utf-8"))
    assert list(report) == REPORTED and report["grid"] is None
    # without a grid, nothing tuned: no tuned figure anywhere, rather than a null
    assert list(report["held_out"]) == ["learned", "base", "against_base"]
    assert not any("tuned" in row for row in report["per_fold"] + report["per_query"])
    assert list(report["weights"]) == [f"{k}@{s}" for k in ("present", "rrf", "minmax")
                                       for s in ("bm25", "sum", "vec")]  # fmt: skip
    assert report["held_out"]["learned"] > report["held_out"]["base"]


def refusal_cases(folder: Path) -> list[tuple[list[Any], str]]:
    log, qrels = synthetic(folder)
    one_source = folder / "one.parquet"
    pd.read_parquet(log).query("source == 'bm25'").to_parquet(one_source)
    other = folder / "other.parquet"
    pd.read_parquet(qrels).assign(query_id=lambda f: "x" + f["query_id"]).to_parquet(other)
    halves = folder / "halves.parquet"
    pd.read_parquet(qrels).assign(relevance=lambda f: f["relevance"] / 2).to_parquet(halves)
    return [
        ([log, other], "share no query: no judged query has a candidate to learn from"),
        ([one_source, qrels], "one source (bm25) to fuse; learned fusion weighs two or more"),
        ([log, halves], "column 'relevance' is 0.5; --model trees learns whole grades 0 to 30"),
        ([log, qrels, "--features", "present,colour"], "--features: unknown kind 'colour'"),
        ([log, qrels, "--folds", "1"], "--folds 1: at least 2"),
        ([log, qrels, "--folds", "31"], "--folds 31: more folds than the 30 judged queries"),
        ([log, qrels, "--trees", "0"], "--trees 0: 1 to 500"),
        ([log, qrels, "--leaves", "1"], "--leaves 1: 2 to 127"),
        ([log, qrels, "--grid", "fusion.kk=1"], "unknown key 'fusion.kk'"),
        ([log, qrels, "--recipe", "nope"], "unknown fuse policy 'nope'"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_refusals_are_one_line_and_write_nothing(case: int, tmp_path: Path) -> None:
    (log, qrels, *rest), message = refusal_cases(tmp_path / "in")[case]
    out = tmp_path / "learned.yaml"
    done = invoke("learn", "--log", log, "--qrels", qrels, "--out", out, "--folds", "3", *rest)
    assert done.exit_code == 2
    assert done.stderr.startswith("duckscore: error: ") and done.stderr.count("\n") == 1
    assert message in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_an_output_that_is_not_yaml_is_refused_before_any_work(tmp_path: Path) -> None:
    log, qrels = synthetic(tmp_path / "in")
    done = invoke("learn", "--log", log, "--qrels", qrels, "--out", tmp_path / "learned.json")
    assert done.exit_code == 2 and "the output is YAML, not JSON" in done.stderr


def test_a_model_that_learnt_nothing_is_its_constant() -> None:
    """No judged candidate is relevant: LightGBM stops after a tree of one leaf and no split;
    the recipe holds it as such and the SQL adds its leaf."""
    rows = np.random.default_rng(4).normal(size=(200, 3))
    fitted = fit(rows, np.zeros(200, dtype=int), [20] * 10, ModelSettings(trees=3))
    assert [t["split_feature"] for t in fitted.model["trees"]] == [[]]
    assert np.array_equal(sql_scores(fitted.model, rows, lambda s: s), fitted.predict(rows))


def test_the_live_scorer_fuses_as_the_command_does(tmp_path: Path) -> None:
    """`ds.scorer` with a learned recipe: its fused items are `duckscore fuse`'s, query by query."""
    from duckscore.api.scorer import scorer

    log, qrels = synthetic(tmp_path / "in")
    out = tmp_path / "learned.yaml"
    done = invoke("learn", "--log", log, "--qrels", qrels, "--out", out, "--trees", "10",
                  "--folds", "2")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    fuse(str(log), tmp_path / "fused", str(out))
    expected = pd.read_parquet(tmp_path / "fused" / "fused.parquet")
    hits = pd.read_parquet(log)
    live = scorer(str(out), allow_recipe_mismatch=True)
    for query in ("q0", "q7"):
        got = live.score(hits[hits["query_id"] == query], tables=True).fused
        assert got is not None
        frame = got.to_pandas()[["item_id", "fused_score", "rank"]]
        want = expected[expected["query_id"] == query][["item_id", "fused_score", "rank"]]
        pd.testing.assert_frame_equal(frame.reset_index(drop=True), want.reset_index(drop=True))
