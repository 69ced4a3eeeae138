"""`duckscore policy list|show|components`: the packaged policies and recipes, validated, and
the registered fusion components."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .app import DuckscoreGroup, cli

if TYPE_CHECKING:
    from ..core.policy import PolicyKind

CAPABILITIES = ("score", "fuse", "answers", "bids", "instincts")
KINDS = {
    "score": "a score policy",
    "fuse": "a fuse recipe",
    "answers": "an answers policy",
    "bids": "a bids policy",
    "instincts": "an instincts policy",
}


def _kind(capability: str) -> PolicyKind:
    if capability == "score":
        from ..scoring.policy import SCORE_POLICY as kind
    elif capability == "fuse":
        from ..fusion.recipe import FUSE_RECIPE as kind
    elif capability == "answers":
        from ..answering.policy import ANSWER_POLICY as kind
    elif capability == "bids":
        from ..bids.policy import BID_POLICY as kind
    else:
        from ..instincts.policy import INSTINCT_POLICY as kind
    return kind


@cli.group(cls=DuckscoreGroup)
def policy() -> None:
    """List and show versioned policies."""


@policy.command("list")
@click.argument("capability", type=click.Choice(CAPABILITIES), default="score")
def policy_list(capability: str) -> None:
    """The packaged policies (score, answers, bids, instincts) or recipes (fuse)."""
    from ..core.policy import available_policies

    for name in available_policies(_kind(capability)):
        click.echo(name)


@policy.command("show")
@click.argument("name")
@click.option("--capability", type=click.Choice(CAPABILITIES), default="score", show_default=True)
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Apply overrides first."
)
def policy_show(name: str, capability: str, overrides: tuple[str, ...]) -> None:
    """The effective, validated parameters of policy NAME (or a YAML path), as JSON."""
    from ..core.errors import PolicyError
    from ..core.policy import canonical_json, load_policy

    try:
        loaded = load_policy(_kind(capability), name, list(overrides))
    except PolicyError as exc:
        hint = _other_capability(name, capability)
        raise PolicyError(f"{exc}; {hint}" if hint else str(exc)) from None
    click.echo(canonical_json(loaded.as_record()))


def _other_capability(name: str, capability: str) -> str | None:
    """`canonical_rrf is a fuse recipe: duckscore policy show canonical_rrf --capability fuse`
    when NAME is not packaged for `capability` but is for another."""
    from ..core.policy import available_policies

    if name in available_policies(_kind(capability)):
        return None
    for other in CAPABILITIES:
        if other != capability and name in available_policies(_kind(other)):
            return f"{name} is {KINDS[other]}: duckscore policy show {name} --capability {other}"
    return None


@policy.command("components")
@click.option(
    "--kind",
    type=click.Choice(("normalizer", "aligner", "fusion", "query_rule")),
    help="Only this kind of component.",
)
@click.option(
    "--recipe",
    metavar="NAME|PATH",
    help="Also the plugins this fusion recipe names (its `plugins`).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON list instead of text.")
def policy_components(kind: str | None, recipe: str | None, as_json: bool) -> None:
    """The registered normalisers, aligners, fusion methods and query rules: each one's kind,
    name, origin (built-in, with its file; a plugin file; an entry point), description and
    parameters."""
    from ..core.policy import canonical_json
    from ..fusion.component_list import listed_components
    from ..fusion.recipe import load_recipe

    loaded = None if recipe is None else load_recipe(recipe)
    listed = listed_components(loaded, kind)
    if as_json:
        click.echo(canonical_json(listed))
        return
    for component in listed:
        where = ", ".join(
            [component["origin"], *([component["file"]] if "file" in component else [])]
        )
        click.echo(f"{component['kind']} {component['name']} ({where}): {component['description']}")
        for parameter in component["parameters"]:
            click.echo(f"    {_parameter_line(parameter)}")


def _parameter_line(parameter: dict[str, Any]) -> str:
    """`scale: number in (0, inf), default 1.0 (what it is)`."""
    kind = parameter["type"]
    if kind in ("number", "integer"):
        low, high = parameter["min"], parameter["max"]
        left = "(" if low is None or parameter["min_open"] else "["
        right = ")" if high is None or parameter["max_open"] else "]"
        shown = f"{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}"
        kind = f"{kind} in {left}{shown}{right}"
    elif kind == "choice":
        kind = f"one of {', '.join(parameter['choices'])}"
    if parameter["required"]:
        default = "required"
    elif parameter["default"] is None:
        default = "left out by default"
    else:
        default = f"default {parameter['default']!r}"
    about = f" ({parameter['description']})" if parameter.get("description") else ""
    return f"{parameter['name']}: {kind}, {default}{about}"
