"""The cases of `tests/fuse/peer_vectors.yaml`, and the recipe each one fuses with: the oracle's
default recipe with the case's overrides, or a packaged engine preset (`recipe:`, read as the
data it is from `sql/fuse/recipes/`) with them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from .fusion_reference import recipe_with

PEER_VECTORS = Path(__file__).resolve().parent / "peer_vectors.yaml"
CASES: list[dict[str, Any]] = yaml.safe_load(PEER_VECTORS.read_text(encoding="utf-8"))["cases"]
RECIPES = Path(__file__).resolve().parents[2] / "sql" / "fuse" / "recipes"


def case_recipe(case: dict[str, Any]) -> dict[str, Any]:
    """The oracle's recipe of a case."""
    overrides = case.get("recipe_overrides") or {}
    if "recipe" not in case:
        return recipe_with(overrides)
    preset = yaml.safe_load((RECIPES / f"{case['recipe']}.yaml").read_text(encoding="utf-8"))
    return recipe_with(overrides, base=preset)


def set_recipe(case: dict[str, Any]) -> list[str]:
    """A preset case's overrides as `--set-recipe KEY=VALUE` items (JSON is YAML)."""
    return [f"{key}={json.dumps(value)}" for key, value in case["recipe_overrides"].items()]
