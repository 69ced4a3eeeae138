"""A component file (fusion/components.py): its YAML header read and checked into a Component,
its macro there with the arguments its kind takes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ..core.errors import PolicyError
from ..core.policy import Choice, Flag, Number, load_yaml
from .components import (
    BUILTIN,
    CONTRIBUTION,
    INPUTS,
    KINDS,
    MISSING,
    NEEDS,
    Component,
    Parameter,
)

PARAMETER_TYPES = ("number", "integer", "boolean", "choice")
MISSING_POLICIES = ("zero", "skip")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER = re.compile(r"\s*\{#-?(.*?)-?#\}", re.DOTALL)
_FUSION_ONLY = ("default_missing", "weighted", "ranks", "additive")
_NORMALIZER_ONLY = ("needs", "fills_candidates")
_HEADER_KEYS = {
    "kind",
    "name",
    "description",
    "parameters",
    "default_missing",
    "weighted",
    "ranks",
    "needs",
    "fills_candidates",
    "additive",
}
_PARAMETER_KEYS = {
    "type",
    "min",
    "max",
    "min_open",
    "max_open",
    "choices",
    "default",
    "description",
}


def component_files(path: Path, where: str) -> list[Path]:
    """`path`'s component files: the file itself, or a folder's *.sql files by name."""
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(path.glob("*.sql"))
        if not files:
            raise PolicyError(f"{where}: folder {path} holds no *.sql component file")
        return files
    raise PolicyError(f"{where}: no component file or folder {path}")


def read_component(path: Path, origin: str, location: str | None = None) -> Component:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot read ({exc})") from None
    return parse_component(text, location or str(path), origin)


def parse_component(text: str, location: str, origin: str) -> Component:
    """A component from its file's text: the header declared, the macro there and well-formed."""
    found = _HEADER.match(text)
    if found is None:
        raise PolicyError(
            f"{location}: a component file starts with a {{#- … -#}} header of YAML "
            "(kind, name, description, parameters)"
        )
    try:
        header = load_yaml(found.group(1))
    except yaml.YAMLError as exc:
        problem = " ".join(str(getattr(exc, "problem", exc)).split())
        raise PolicyError(f"{location}: the header is not valid YAML ({problem})") from None
    builtin = origin == BUILTIN
    component = declared_component(header, location, origin, builtin=builtin, text=text)
    if not builtin:
        check_macro(component)
    return component


def check_macro(component: Component) -> None:
    """The component's macro compiles and takes its kind's inputs. Every command reads the
    built-ins, so theirs are compiled when first rendered, not here (tests check them)."""
    macro = component.macro()
    expected = ("params", *INPUTS[component.kind])
    given, extra = macro.arguments[: len(expected)], macro.arguments[len(expected) :]
    if len(given) != len(expected) or extra not in _extra_arguments(component):
        raise PolicyError(
            f"{component.location}: macro {component.macro_name}({', '.join(macro.arguments)}): "
            f"{_signature(component, expected)}"
        )


def _extra_arguments(component: Component) -> tuple[tuple[str, ...], ...]:
    """What a component's macro may take after its inputs: a fusion method `contribution`, and
    a normaliser that fills_candidates `missing` (it must)."""
    if component.kind == "fusion":
        return ((), (CONTRIBUTION,))
    return ((MISSING,),) if component.fills_candidates else ((),)


def _signature(component: Component, expected: tuple[str, ...]) -> str:
    if component.kind == "fusion":
        return f"fusion macros take ({', '.join(expected)}, [{CONTRIBUTION}=false])"
    if component.fills_candidates:
        return f"a normaliser that fills_candidates takes ({', '.join(expected)}, {MISSING}=false)"
    return f"{component.kind} macros take ({', '.join(expected)})"


def declared_component(
    header: Any, location: str, origin: str, *, builtin: bool, text: str | None = None
) -> Component:
    if not isinstance(header, dict):
        raise PolicyError(f"{location}: the header must be a YAML mapping")
    allowed = _HEADER_KEYS | ({"recipe_keys", "required_keys"} if builtin else set())
    for key in header:
        if key not in allowed:
            raise PolicyError(
                f"{location}: unknown header key {key!r} ({', '.join(sorted(allowed))})"
            )
    for key in ("kind", "name", "description"):
        if key not in header:
            raise PolicyError(f"{location}: the header needs `{key}`")
    kind = Choice(KINDS).check(f"{location}: kind", header["kind"])
    name = header["name"]
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise PolicyError(f"{location}: name: {name!r} is not an identifier")
    description = header["description"]
    if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
        raise PolicyError(f"{location}: description must be one line of text")
    fusion_only = [key for key in _FUSION_ONLY if key in header]
    if kind != "fusion" and fusion_only:
        raise PolicyError(f"{location}: {fusion_only[0]} is declared by a fusion method only")
    normalizer_only = [key for key in _NORMALIZER_ONLY if key in header]
    if kind != "normalizer" and normalizer_only:
        raise PolicyError(f"{location}: {normalizer_only[0]} is declared by a normaliser only")
    if kind == "fusion" and "default_missing" not in header:
        raise PolicyError(f"{location}: a fusion method declares default_missing (zero or skip)")
    return Component(
        kind=kind,
        name=name,
        description=description.strip(),
        origin=origin,
        parameters=_parameters(header.get("parameters") or {}, location),
        recipe_keys=tuple(header.get("recipe_keys") or ()),
        required_keys=_required_keys(header, location),
        default_missing=(
            Choice(MISSING_POLICIES).check(
                f"{location}: default_missing", header["default_missing"]
            )
            if kind == "fusion"
            else ""
        ),
        weighted=Flag().check(f"{location}: weighted", header.get("weighted", False)),
        ranks=Flag().check(f"{location}: ranks", header.get("ranks", False)),
        needs=_needs(header.get("needs", []), location),
        fills_candidates=Flag().check(
            f"{location}: fills_candidates", header.get("fills_candidates", False)
        ),
        additive=Flag().check(f"{location}: additive", header.get("additive", False)),
        text=text,
        location=location,
    )


def _required_keys(header: Mapping[str, Any], location: str) -> tuple[str, ...]:
    required = tuple(header.get("required_keys") or ())
    unread = [key for key in required if key not in (header.get("recipe_keys") or ())]
    if unread:
        raise PolicyError(f"{location}: required_keys: {unread[0]} is not one of its recipe_keys")
    return required


def _needs(declared: Any, location: str) -> tuple[str, ...]:
    if not isinstance(declared, list) or any(
        not isinstance(item, str) or item not in NEEDS for item in declared
    ):
        raise PolicyError(
            f"{location}: needs: expected a list of {', '.join(NEEDS)}, got {declared!r}"
        )
    return tuple(declared)


def _parameters(declared: Any, location: str) -> tuple[Parameter, ...]:
    if not isinstance(declared, dict):
        raise PolicyError(f"{location}: parameters must map each name to its schema")
    return tuple(_parameter(name, schema, location) for name, schema in declared.items())


def _parameter(name: Any, schema: Any, location: str) -> Parameter:
    where = f"{location}: parameters.{name}"
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise PolicyError(f"{where}: the name is not an identifier")
    if not isinstance(schema, dict):
        raise PolicyError(f"{where}: give its schema as a mapping ({{type: number, …}})")
    for key in schema:
        if key not in _PARAMETER_KEYS:
            raise PolicyError(
                f"{where}: unknown key {key!r} ({', '.join(sorted(_PARAMETER_KEYS))})"
            )
    kind = Choice(PARAMETER_TYPES).check(f"{where}.type", schema.get("type"))
    numeric = kind in ("number", "integer")
    for key in ("min", "max", "min_open", "max_open"):
        if key in schema and not numeric:
            raise PolicyError(f"{where}.{key}: only a number or an integer has bounds")
    if ("choices" in schema) != (kind == "choice"):
        raise PolicyError(f"{where}: a choice, and only a choice, lists its choices")
    choices = schema.get("choices", [])
    if kind == "choice" and (
        not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices)
    ):
        raise PolicyError(f"{where}.choices: expected a non-empty list of strings")
    parameter = Parameter(
        name=name,
        type=kind,
        min=Number(nullable=True).check(f"{where}.min", schema.get("min")),
        max=Number(nullable=True).check(f"{where}.max", schema.get("max")),
        min_open=Flag().check(f"{where}.min_open", schema.get("min_open", False)),
        max_open=Flag().check(f"{where}.max_open", schema.get("max_open", False)),
        choices=tuple(choices),
        description=str(schema.get("description", "")),
    )
    if "default" not in schema:
        return parameter
    default = parameter.check(f"{where}.default", schema["default"])
    return replace(parameter, default=default)
