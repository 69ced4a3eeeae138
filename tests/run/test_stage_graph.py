"""The run graph (run/graph.py) as its consumers see it: every stage reads what it declares and
nothing else, through its template's `inputs`; every stage a run runs is in its record, so no
recorded SQL reads a relation whose definition the output folder does not hold (issue 48 §1: a
rank-only run's fused.sql read a view made by an f-string, recorded nowhere)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli
from duckscore.core.check import tables_read
from duckscore.core.graph import Graph
from duckscore.core.render import ColumnParameter, RenderedSQL, column
from duckscore.fusion.code_plan import CodePlan, LocTopK
from duckscore.fusion.recipe import load_recipe, plan
from duckscore.fusion.stages import FUSE_HITS, RANKED_LOG, SOURCE_PARENTS
from duckscore.runner.graph import run_graph
from duckscore.scoring.policy_view import load_score_policy

from ..helpers import SCIFACT

SOURCES = ["dense", "sparse", "summary"]
VARIANTS: dict[str, tuple[str, list[str], dict[str, object]]] = {
    "canonical": ("canonical_rrf", [], {}),
    "shared": ("canonical_rrf", [], {"shared": True}),
    "rank-only shared": ("canonical_rrf", [], {"log_view": RANKED_LOG, "shared": True}),
    "no rank, spans, query ids": (
        "hybrid_v1",
        [],
        {"has_rank": False, "spans": True, "with_query_ids": True},
    ),
    "after fusion": ("canonical_rrf", ["aligner.order=after_fusion"], {"shared": True}),
    "blocks, distances": (
        "hybrid_v1",
        ["target_granularity=block", "source_defaults.distance=true"],
        {"log_view": RANKED_LOG},
    ),
    "re-ranked": (
        "canonical_rrf",
        ["rerank.top_n=3", "rerank.mode=weight", "rerank.weight=0.5"],
        {"shared": True},
    ),
    # a code run (--entities): the mapper, the levels, the lists; fused at the module level
    "code": ("code_rrf_v1", ["target_granularity=module"], {"shared": True, "code": "module"}),
    "code files": ("code_rrf_v1", [], {"shared": True, "code": "file"}),
}


def graph_of(variant: str, top_n: int | ColumnParameter = 5) -> Graph:
    recipe, overrides, options = VARIANTS[variant]
    level = options.get("code")
    fuse_plan = plan(
        load_recipe(recipe, overrides),
        SOURCES,
        bool(options.get("has_rank", True)),
        str(options.get("log_view", "retrieval_log")),
        code=None if level is None else CodePlan(str(level), LocTopK(), parse_ids=False),
    )
    return run_graph(
        fuse_plan,
        load_score_policy("overall_v3"),
        top_n,
        shared=bool(options.get("shared")),
        spans=bool(options.get("spans")),
        with_query_ids=bool(options.get("with_query_ids")),
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_stage_reads_what_it_declares_through_its_inputs(variant: str) -> None:
    """Each stage rendered with every relation renamed reads exactly the renamed relations of
    its declared sources: a template naming a table itself would read the old name."""
    graph = graph_of(variant)
    renamed = {name: f"renamed_{name}" for name in (*graph.inputs, *graph.names)}
    for stage in graph:
        rendered = graph.render(stage.name, renamed)
        assert set(tables_read(rendered)) == {renamed[s] for s in stage.sources}, stage.name


def test_the_graphs_have_the_stages_their_options_ask_for() -> None:
    assert graph_of("canonical").names == (
        FUSE_HITS, "fused_items", "parent_features", "scored_parents", "score_contract"
    )  # fmt: skip
    assert graph_of("rank-only shared").names[:3] == (RANKED_LOG, FUSE_HITS, SOURCE_PARENTS)
    assert graph_of("after fusion").names[1] == "fused_items"  # no shared aggregate to keep
    spans = graph_of("no rank, spans, query ids")
    assert spans.inputs == ("retrieval_log", "trace_spans", "query_ids")
    assert spans[FUSE_HITS].keep == "table"  # ranks derived by a window: kept, not a view
    assert graph_of("canonical", column("top_n"))["score_contract"].parameters == (
        ("top_n", "BIGINT"),
    )
    reranked = graph_of("re-ranked")
    assert reranked.inputs == ("retrieval_log", "rerank_scores")
    assert reranked.names[:4] == (FUSE_HITS, SOURCE_PARENTS, "fused_items", "reranked_items")
    assert reranked["fused_items"].keep == "view" and not reranked["fused_items"].publications
    assert [p.file for p in reranked["reranked_items"].publications] == ["fused.parquet"]
    code = graph_of("code")
    assert code.inputs == ("retrieval_log", "entities")
    assert code.names[:8] == (
        "code_hits", "code_modules", "code_entities", "loc_files", "loc_modules",
        "loc_entities", "loc_lists", FUSE_HITS,
    )  # fmt: skip
    # the module level fused, the files' parents: no aggregate both could share
    assert code["fused_items"].sources == ("code_modules",)
    assert code[FUSE_HITS].sources == code["loc_files"].sources == ("code_hits",)
    assert graph_of("code files")["fused_items"].sources == ("code_hits", SOURCE_PARENTS)
    assert [p.file for p in code["loc_lists"].publications] == ["loc_outputs.jsonl"]


def recorded(out: Path) -> dict[str, RenderedSQL]:
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    texts = {t: (out / "sql" / t.replace("/", "_")).read_text("utf-8") for t in manifest["sql"]}
    return {t: RenderedSQL(t, text) for t, text in texts.items()}


@pytest.mark.parametrize(("ranks_only", "reranked"), [(True, False), (False, False), (False, True)])
def test_every_stage_a_run_runs_is_recorded(
    ranks_only: bool, reranked: bool, tmp_path: Path
) -> None:
    log = tmp_path / "log.parquet"
    dropped = "EXCLUDE (score)" if ranks_only else ""
    duckdb.execute(
        f"COPY (SELECT * {dropped} FROM read_parquet(?) WHERE query_id IN (SELECT DISTINCT "
        f"query_id FROM read_parquet(?) ORDER BY ALL LIMIT 20)) TO '{log}'",
        [str(SCIFACT / "retrieval_log.parquet")] * 2,
    )
    out = tmp_path / "out"
    options = []
    if reranked:
        scores = tmp_path / "scores.csv"
        scores.write_text("query_id,item_id,rerank_score\n", encoding="utf-8")
        options = ["--rerank-scores", str(scores)] + [
            arg for key in VARIANTS["re-ranked"][1] for arg in ("--set-recipe", key)
        ]
    done = CliRunner().invoke(cli, ["-q", "run", "--log", str(log), "--out", str(out), *options])
    assert done.exit_code == 0, done.output
    sql = recorded(out)
    variant = "re-ranked" if reranked else "rank-only shared" if ranks_only else "shared"
    graph = graph_of(variant)  # as `run` keeps it
    made = {stage.name: stage.template for stage in graph}
    for rendered in sql.values():
        for table in tables_read(rendered):
            assert table in graph.inputs or made.get(table) in sql, (rendered.template, table)
    assert set(made.values()) == set(sql)
    if ranks_only:
        assert "-CAST(rank AS DOUBLE) AS score" in sql["fuse/ranked_log.sql"].text
        assert RANKED_LOG in tables_read(sql["fuse/fused.sql"])
