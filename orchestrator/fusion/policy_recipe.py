"""The recipe a score policy belongs with (issue 32). A calibrated policy records the recipe whose
parent features it was fitted on (`metadata.recipe`: recipe_id, parameters_sha256, source);
its thresholds and p_good hold for those features only. A command given the policy fuses with
that recipe unless told otherwise, refuses another (unless allowed), and a policy that records
none fuses with the default recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..common.defaults import DEFAULT_RECIPE
from ..core.errors import PolicyError
from ..core.policy import Policy, available_policies
from .recipe import FUSE_RECIPE, load_recipe, recipe_record, recipe_record_from_manifest
from .recipe_view import Recipe

ALLOW_FLAG = "--allow-recipe-mismatch"


def recorded_recipe(policy: Policy) -> dict[str, Any] | None:
    record = policy.metadata.get("recipe")
    return record if isinstance(record, dict) and "parameters_sha256" in record else None


def recipe_name_for(policy: Policy, recipe: str | None) -> str:
    """The recipe (a packaged name or a path) to fuse with for `policy`: `recipe` when given,
    else the one the policy records, else the default."""
    if recipe is not None:
        return recipe
    recorded = recorded_recipe(policy)
    return DEFAULT_RECIPE if recorded is None else _recorded_location(policy, recorded)


def recipe_for_policy(
    policy: Policy,
    recipe: str | None,
    overrides: list[str] | None = None,
    allow_mismatch: bool = False,
) -> Recipe:
    """The recipe of recipe_name_for, loaded; refused when it is not the policy's own (unless
    allowed)."""
    loaded = load_recipe(recipe_name_for(policy, recipe), overrides)
    recorded = recorded_recipe(policy)
    if recorded is not None and not allow_mismatch:
        option = "--recipe" if recipe is not None else "--set-recipe"
        record = recipe_record(loaded)
        _check_same(policy, recorded, record["recipe_id"], record["parameters_sha256"], option)
    return loaded


def check_features_recipe(policy: Policy, features: Any, allow_mismatch: bool = False) -> None:
    """Refuse parent features that `duckscore fuse` wrote with another recipe than the policy's
    (known from the manifest.json beside them; features without one are taken as they are)."""
    recorded = recorded_recipe(policy)
    if recorded is None or allow_mismatch or not isinstance(features, str | Path):
        return
    found = recipe_record_from_manifest(Path(features))
    if found is not None:
        _check_same(policy, recorded, found["recipe_id"], found["parameters_sha256"], "--features")


def _recorded_location(policy: Policy, recorded: dict[str, Any]) -> str:
    """A packaged recipe by its name, or the file the policy names, when it exists."""
    name = str(recorded.get("recipe_id", "")).split("+")[0]
    if name in available_policies(FUSE_RECIPE):
        return name
    source = recorded.get("source")
    if isinstance(source, str) and Path(source).is_file():
        return source
    raise PolicyError(
        f"policy {policy.version} was calibrated with recipe {recorded.get('recipe_id')!r} "
        f"({source}), which is not here: give it with --recipe"
    )


def _check_same(
    policy: Policy, recorded: dict[str, Any], version: str, digest: str, option: str
) -> None:
    if digest == recorded["parameters_sha256"]:
        return
    raise PolicyError(
        f"{option}: recipe {version} is not the recipe policy {policy.version} was calibrated "
        f"on ({recorded.get('recipe_id')}, parameters sha256 {recorded['parameters_sha256'][:8]}); "
        "its thresholds and p_good hold for that recipe's features only: fuse with it (leave "
        f"--recipe out), or pass {ALLOW_FLAG}"
    )
