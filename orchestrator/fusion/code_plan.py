"""What a code-localization run adds to a fusion plan (docs/code.md, "Fusing code"): the
entities table the blocks are mapped through (`--entities`), the level fused, how many files,
modules and entities loc_outputs.jsonl lists, and seed 003 §9.4's fallback."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..core.errors import OptionError
from ..core.inputs import Table
from .recipe_view import Recipe

# a block's id when its lines are in it: `path:start:end`, 1-based, below a billion (RE2, as
# DuckDB reads it)
ITEM_LINES = r"^(.+):([1-9][0-9]{0,8}):([1-9][0-9]{0,8})$"
# the recipe's target_granularity -> the level a code run fuses (doc: seed 003's file)
CODE_LEVELS = {"doc": "file", "block": "block", "module": "module", "entity": "entity"}
# the targets only a code run has: a retrieval log alone does not know its modules and entities
MAPPED_TARGETS = ("module", "entity")


@dataclass(frozen=True)
class LocTopK:
    """How many of each level a line of loc_outputs.jsonl lists: the largest k the
    code-localization benchmarks read at that level (file Acc@5; module and function @10)."""

    files: int = 5
    modules: int = 10
    entities: int = 10

    @classmethod
    def parse(cls, given: Sequence[str], option: str = "--loc-top-k") -> LocTopK:
        """`files=20`, `modules=5` …: each a level and a whole number of at least 1."""
        counts: dict[str, int] = {}
        levels = [f.name for f in fields(cls)]
        for item in given:
            level, _, value = item.partition("=")
            if level not in levels or not value.isdigit() or int(value) < 1:
                raise OptionError(
                    f"{option} {item}: give LEVEL=N, LEVEL one of {', '.join(levels)} and N a "
                    "whole number of at least 1"
                )
            counts[level] = int(value)
        return cls(**counts)

    def record(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class CodeTarget:
    """What a code run is given: the entities table and the lengths of the lists it writes."""

    entities: Table
    top_k: LocTopK = LocTopK()
    label: str = "--entities"


def code_target(entities: Table | None, top_k: Sequence[str] = ()) -> CodeTarget | None:
    """What --entities and --loc-top-k (`files=20` …) ask for: a code run, or None."""
    if entities is None and top_k:
        raise OptionError("--loc-top-k needs --entities (the lists are of a code run)")
    return None if entities is None else CodeTarget(entities, LocTopK.parse(top_k))


def code_inputs(code: CodeTarget | None) -> dict[str, Table]:
    """A code run's input, by its option: what an output must not overwrite."""
    return {} if code is None else {code.label: code.entities}


@dataclass(frozen=True)
class CodePlan:
    """A code run's plan beside its recipe's: `level` fused into fused.parquet (file, module,
    entity or block); `parse_ids`: the log gives no lines, read off `path:start:end` ids;
    `fallback`: why block-level fusion fell back to file level (seed 003 §9.4), or None;
    `module_paths`: the log has a module_path column, which places its file-level hits at their
    module (seed 003 §7.2)."""

    level: str
    top_k: LocTopK
    parse_ids: bool
    fallback: str | None = None
    module_paths: bool = False

    def record(self) -> dict[str, Any]:
        """What the manifest says of it (`code`)."""
        return {
            "target": self.level,
            "loc_top_k": self.top_k.record(),
            "lines_from_item_id": self.parse_ids,
            "fallback": self.fallback,
        }


def fell_back(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A recipe's parameters fused at file level, aligned before fusion: seed 003 §9.4's
    fallback when the block sources' chunking is not shared."""
    p = dict(parameters)
    if p["target_granularity"] == "block":
        p["target_granularity"] = "doc"
    p["aligner"] = {**p["aligner"], "order": "before_fusion"}
    return p


def fuses_blocks(recipe: Recipe) -> bool:
    """Whether a recipe fuses blocks as such: a block target, or alignment after fusion."""
    return recipe.target_granularity == "block" or recipe.aligner.order == "after_fusion"
