"""A code run's stages of the graph (docs/code.md, "Fusing code"): the mapper (sql/fuse/code_map.sql:
every hit with its file, module and entity), the hits at the module and entity levels
(sql/fuse/code_level.sql), the recipe fused at each level and loc_outputs.jsonl
(sql/fuse/loc_outputs.sql). fusion/stages.py: fuse_graph puts them before the fused items, and
fuses the target level and the parent features over them. Also the mapper's checks, run on a
Session before the graph is built."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..core.graph import Publication, Render, Stage
from ..core.policy import FrozenMap
from ..core.render import RenderedSQL, render
from ..core.session import Session
from .code_plan import ITEM_LINES, CodePlan
from .contract import ENTITIES
from .recipe import FusePlan
from .recipe_view import Recipe

ENTITIES_INPUT = ENTITIES.name  # the typed view of --entities
CODE_HITS = "code_hits"  # every hit with its file (its parent), module and entity
CODE_MODULES = "code_modules"  # the hits, each a hit of its module (or its file)
CODE_ENTITIES = "code_entities"  # the hits, each a hit of its entity (or its file)
LOC_FILES, LOC_MODULES, LOC_ENTITIES = "loc_files", "loc_modules", "loc_entities"
LOC_OUTPUTS = "loc_lists"  # loc_outputs.jsonl's rows
LOC_FILE = "loc_outputs.jsonl"
# each level of the benchmarks: the hits fused as parents there, and the column naming them
LEVELS = {
    "file": (CODE_HITS, None),
    "module": (CODE_MODULES, "code_module_id"),
    "entity": (CODE_ENTITIES, "code_entity_id"),
}

# what a recipe's fusion of one level renders as: fused.sql selecting a CTE (stages.py: _fused)
Fused = Callable[[FusePlan, str, bool], Render]


def target_hits(code: CodePlan) -> str:
    """The hits the fused items are fused from: a block target's are the mapped hits."""
    return LEVELS[code.level][0] if code.level in LEVELS else CODE_HITS


def code_stages(fuse_plan: FusePlan, log: str, fused: Fused) -> list[Stage]:
    """The mapper, the hits of each level, the recipe fused as a document target at each level
    (no explanations) and loc_outputs.jsonl: the stages a code run adds before its fused items."""
    code = fuse_plan.code
    assert code is not None
    stages = [
        Stage(
            CODE_HITS,
            "fuse/code_map.sql",
            (("retrieval_log", log), ("entities", ENTITIES_INPUT)),
            _mapped(code),
            step="mapping the blocks to files, modules and entities",
        )
    ]
    stages += [
        Stage(hits, "fuse/code_level.sql", (("hits", CODE_HITS),), _level(column), keep="view")
        for hits, column in LEVELS.values()
        if column is not None
    ]
    as_parents = _as_parents(fuse_plan)
    found = {"file": LOC_FILES, "module": LOC_MODULES, "entity": LOC_ENTITIES}
    stages += [
        Stage(
            found[level],
            "fuse/fused.sql",
            (("retrieval_log", hits),),
            fused(as_parents, "fused_items", False),
            keep="view",
        )
        for level, (hits, _) in LEVELS.items()
    ]
    reads = (("hits", CODE_HITS), ("files", LOC_FILES), ("modules", LOC_MODULES),
             ("entities", LOC_ENTITIES))  # fmt: skip
    stages.append(
        Stage(
            LOC_OUTPUTS,
            "fuse/loc_outputs.sql",
            reads,
            _loc_outputs(code),
            publications=(Publication(LOC_FILE, order=("instance_id",), records=True),),
            step=f"ranking the files, modules and entities into {LOC_FILE}",
        )
    )
    return stages


def _as_parents(fuse_plan: FusePlan) -> FusePlan:
    """The plan with its recipe's target a document (the hits' parent, at each level)."""
    recipe = fuse_plan.recipe
    parameters = {**recipe.policy.parameters, "target_granularity": "doc"}
    policy = replace(recipe.policy, parameters=FrozenMap(parameters))
    return replace(fuse_plan, recipe=Recipe.of(policy), payload=())


def _mapped(code: CodePlan) -> Render:
    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render_code_map(code, inputs, final or CODE_HITS)

    return rendered


def render_code_map(code: CodePlan, inputs: Mapping[str, str], final: str) -> RenderedSQL:
    """sql/fuse/code_map.sql selecting `final` (code_hits, or a check: faults, chunking)."""
    return render(
        "fuse/code_map.sql",
        inputs=dict(inputs),
        parse_ids=code.parse_ids,
        module_paths=code.module_paths,
        pattern=ITEM_LINES,
        final=final,
    )


def _level(column: str) -> Render:
    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render("fuse/code_level.sql", inputs=inputs, column=column)

    return rendered


def _loc_outputs(code: CodePlan) -> Render:
    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render("fuse/loc_outputs.sql", inputs=inputs, top_k=code.top_k.record())

    return rendered


def mapper_check(
    session: Session, code: CodePlan, log: str, entities: str, check: str
) -> dict[str, Any] | None:
    """The first row of one of the mapper's checks (`faults`, `chunking`) over the typed log
    and entities, or None when it finds nothing."""
    inputs = {"retrieval_log": log, "entities": entities}
    rows = session.rows(render_code_map(code, inputs, check))
    return rows[0] if rows else None
