"""What `duckscore policy components` lists: every registered component, a built-in's
parameters being the recipe keys it reads, and its file (sql/fuse/components/<kind>/)."""

from __future__ import annotations

from typing import Any

from ..core.policy import Choice, Flag, Number, Omissible, load_policy
from ..core.rules import MapOf
from .components import Parameter
from .plugins import registry
from .recipe import DEFAULT_BASE, FUSE_RECIPE
from .recipe_view import Recipe


def listed_components(
    recipe: Recipe | None = None, kind: str | None = None
) -> list[dict[str, Any]]:
    """Every registered component (of `kind`), as `duckscore policy components` lists it: the
    built-ins, the entry points' and `recipe`'s plugins; a built-in's parameters are the recipe
    keys it reads, their rules and hybrid_v1's values."""
    found = registry(() if recipe is None else recipe.plugins)
    defaults = load_policy(FUSE_RECIPE, DEFAULT_BASE).parameters.thawed()
    listed = []
    for component in found.components.values():
        if kind is not None and component.kind != kind:
            continue
        record = component.as_record()
        if component.builtin:
            record["parameters"] = [
                _recipe_key(key, defaults).as_record() for key in component.recipe_keys
            ]
        listed.append(record)
    return listed


def _recipe_key(dotted: str, defaults: dict[str, Any]) -> Parameter:
    """A recipe key as a parameter: its rule's type and bounds, hybrid_v1's value (None: a key
    left out, off)."""
    rule: Any = FUSE_RECIPE.spec
    value: Any = defaults
    for part in dotted.split("."):
        rule = rule.entry if isinstance(rule, MapOf) else rule[part]  # sources.<name>.…
        value = value.get(part) if isinstance(value, dict) else None
        if isinstance(rule, Omissible):
            rule = rule.rule
    if isinstance(rule, Number):
        kind = "integer" if rule.integer else "number"
        return Parameter(dotted, kind, rule.lo, rule.hi, rule.lo_open, rule.hi_open, default=value)
    if isinstance(rule, Choice):
        return Parameter(dotted, "choice", choices=rule.options, default=value)
    if isinstance(rule, Flag):
        return Parameter(dotted, "boolean", default=value)
    return Parameter(dotted, "recipe key", default=value)
