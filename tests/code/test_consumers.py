"""What the graph's other consumers do with a code recipe (docs/code.md, "Where"): a `module` or
`entity` target needs an entities table, which only `fuse` and `run` on DuckDB take; the others
refuse it in one line, and `run`'s Spark and partitioned engines refuse --entities."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckscore.core.errors import PolicyError
from duckscore.fusion.code_plan import CodeTarget
from duckscore.fusion.recipe import load_recipe
from duckscore.pack.table import table_macros
from duckscore.runner.dispatch import Unsupported, run_log
from duckscore.runner.job import Engine, Job
from duckscore.scoring.policy_view import load_score_policy

from ..helpers import FIXTURES

CODE = FIXTURES / "code"
HIT = {"query_id": "q", "source": "bm25", "item_id": "a.py:1:2", "parent_id": "a.py", "score": 1.0}


def test_the_macro_pack_refuses_an_entity_target() -> None:
    recipe = load_recipe("code_rrf_v1", ["target_granularity=entity"])
    score, answers = load_score_policy("overall_v3"), None
    with pytest.raises(PolicyError, match=r"target_granularity 'entity' maps blocks .* --entities"):
        table_macros(score, recipe, answers, ["bm25"])  # type: ignore[arg-type]


def test_the_live_scorer_refuses_a_module_target() -> None:
    from duckscore.api.scorer import scorer

    with pytest.raises(PolicyError, match="target_granularity 'module' maps blocks"):
        scorer(
            "code_rrf_v1", set_recipe=["target_granularity=module"], allow_recipe_mismatch=True
        ).score([HIT])


@pytest.mark.parametrize(
    ("engine", "flag"),
    [(Engine(engine="spark"), "--engine spark"), (Engine(partition_by="day"), "--partition-by")],
)
def test_spark_and_partitions_refuse_entities(engine: Engine, flag: str, tmp_path: Path) -> None:
    with pytest.raises(
        Unsupported, match=f"--entities \\(a code run\\) is not supported with {flag}"
    ):
        run_log(str(CODE / "retrieval_log.parquet"), tmp_path / "out", Job(), engine,
                code=CodeTarget(str(CODE / "entities.parquet")))  # fmt: skip
    assert not (tmp_path / "out").exists()
