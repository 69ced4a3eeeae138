"""Versioned policy files: load, validate against a declared parameter spec, apply overrides.

A policy is a YAML file with a version key (e.g. `score_policy_version: overall_v1`), an optional
`description`, `parent_version` and free-form `metadata`, and a `parameters` tree. Every
parameter is declared in the capability's spec; unknown, missing and out-of-range keys are
errors that name the key. A file may name a base (`extends: overall_v1`, or a path) and give
only its differences, merged over the base's parameters. Overrides (`--set alpha=0.7`, dotted
for nested keys) are applied before validation. A file without a version of its own, and
overrides, give the version a suffix derived from the differences, so an output never claims a
version whose parameters it did not use.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import yaml

from .errors import PolicyError
from .frozen import FrozenMap, thaw
from .precision import FITTED_DIGITS, at_written_precision
from .resources import policies_dir
from .rules import Bounds, Choice, Flag, ListOf, MapOf, Number, Omissible, Rule, Spec, Text, Words
from .trees import (
    apply_override,
    complete,
    deep_merge,
    lists_to_maps,
    reject_unknown,
    validate_tree,
)

# the rules are part of this module's interface: a capability declares its spec with them
__all__ = [
    "FITTED_DIGITS",
    "AmbiguousNumber",
    "Bounds",
    "Choice",
    "Flag",
    "FrozenMap",
    "ListOf",
    "MapOf",
    "Number",
    "Omissible",
    "Policy",
    "PolicyKind",
    "Rule",
    "Spec",
    "Text",
    "Words",
    "at_written_precision",
    "available_policies",
    "canonical_json",
    "dump_yaml",
    "load_policy",
    "load_yaml",
    "parse_overrides",
    "policy_from_parameters",
]

_VERSION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


_BOOL, _INT, _FLOAT = (f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float"))
# YAML 1.1's implicit types that YAML 1.2's core schema reads otherwise (or not at all):
# booleans yes/no/on/off, octal 010, binary, 1_000, sexagesimal 1:30, and `=` (value)
_YAML_1_1_ONLY = {_BOOL, _INT, _FLOAT, "tag:yaml.org,2002:value"}
_LEADING_ZERO = re.compile(r"[-+]?0[0-9]+")
_INT_FORMS = (
    (re.compile(r"[-+]?[0-9]+"), 10),
    (re.compile(r"0o[0-7]+"), 8),
    (re.compile(r"0x[0-9a-fA-F]+"), 16),
)


class AmbiguousNumber(yaml.constructor.ConstructorError):
    """An integer written with a leading zero (`010`): octal 8 in YAML 1.1, 10 in YAML 1.2."""


class _Loader(yaml.SafeLoader):
    """YAML with the numbers and booleans of YAML 1.2's core schema (PyYAML reads YAML 1.1):
    `1e-9` is a float (a string to 1.1); `0o10` and `0x10` are integers; only true/false (any
    case) are booleans, so `yes`, `no`, `on`, `off` are text, as are `1_000` and `1:30`; an
    integer with a leading zero (`010`) is refused, since YAML 1.1 reads it as octal and 1.2 as
    decimal. Policy files, rule files and every KEY=VALUE value are read with it."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in _YAML_1_1_ONLY]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_YAML_1_2 = (
    (_BOOL, r"true|True|TRUE|false|False|FALSE", "tTfF"),
    (_INT, r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    (
        _FLOAT,
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
        "-+0123456789.",
    ),
)
for _tag, _pattern, _first in _YAML_1_2:
    _Loader.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), list(_first))


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting a text that YAML 1.1 or the loader above (YAML 1.2) would
    read as anything but that text: `'yes'` as before, and now `'09'`, `'0o17'`, `'1e5'`."""


for _tag, _pattern, _first in _YAML_1_2:
    _Dumper.add_implicit_resolver(_tag, re.compile(f"^(?:{_pattern})$"), list(_first))


def dump_yaml(value: Any, flow: bool | None = False, width: int | None = None) -> str:
    """YAML text that load_yaml reads back as `value`: keys in order, UTF-8; `flow`: in flow
    style (`{a: 1}`), on lines of at most `width` characters; None: flow style for the lists
    and mappings that hold no list or mapping (a learned recipe's trees, a line per array)."""
    return yaml.dump(
        thaw(value),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=flow,
        width=width,
    )


def _yaml_1_2_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if _LEADING_ZERO.fullmatch(text):
        digits = text.lstrip("+-").lstrip("0") or "0"
        sign = "-" if text.startswith("-") else ""
        octal = "" if sign or set(digits) - set("01234567") else f", or 0o{digits} for octal"
        raise AmbiguousNumber(
            None,
            None,
            f"{text} has a leading zero, which YAML 1.1 and YAML 1.2 read differently: "
            f"write {sign}{digits}{octal} (quote it for text)",
            node.start_mark,
        )
    for pattern, base in _INT_FORMS:
        if pattern.fullmatch(text):
            return int(text if base == 10 else text[2:], base)
    raise yaml.constructor.ConstructorError(
        None, None, f"{text!r} is not a YAML 1.2 integer", node.start_mark
    )


_Loader.add_constructor(_INT, _yaml_1_2_int)


def _mapping_without_repeats(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    """A mapping whose keys are unique: PyYAML keeps the last of a repeated key silently."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_repeats)


def load_yaml(text: str) -> Any:
    """YAML as duckscore reads every policy, rule file and KEY=VALUE value (see _Loader); an
    integer with a leading zero raises AmbiguousNumber, whose `problem` is one line."""
    return yaml.load(text, Loader=_Loader)


@dataclass(frozen=True)
class PolicyKind:
    """What one capability's policies look like."""

    capability: str
    version_key: str
    spec: Spec
    cross_checks: tuple[Callable[[dict[str, Any]], None], ...] = ()
    flat: bool = False  # parameters at the top level of the file (recipes, seed 003 §8)
    folder: str = "policies"  # where the packaged files live, under sql/<capability>/
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # before validation
    override_option: str = "--set"  # the command-line option that overrides these files
    # one file's parameters in the spec's words (seed 003 §8's spellings), before bases merge
    read_as: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # the overrides ({dotted key: value}) in the spec's words, as read_as reads a file
    read_overrides_as: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # the base of a file that names none and leaves out keys or its version (recipes: hybrid_v1)
    default_base: str | None = None
    # a file's (or the overrides') parameters with the files they name read, relative to the
    # folder given (the file's; the working directory's for overrides): a recipe's plugins
    locate_files: Callable[[dict[str, Any], Path], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Policy:
    """A loaded policy. Its `parameters` are a read-only view (core/frozen.py): a consumer
    reads them and builds a changed policy from `parameters.thawed()`, a plain copy."""

    kind: PolicyKind
    base_version: str
    version: str
    source: str
    description: str
    parameters: FrozenMap
    overrides: dict[str, Any] = field(default_factory=dict)
    parent_version: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    bases: tuple[tuple[str, str], ...] = ()  # (version, source) of each base, the nearest first

    @property
    def parameters_sha256(self) -> str:
        return hashlib.sha256(canonical_json(self.parameters).encode()).hexdigest()

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "capability": self.kind.capability,
            self.kind.version_key: self.version,
            "base_version": self.base_version,
            "parent_version": self.parent_version,
            "source": self.source,
            "overrides": self.overrides,
            "parameters": self.parameters.thawed(),
            "parameters_sha256": self.parameters_sha256,
        }
        if self.bases:
            record["extends"] = [{"version": v, "source": s} for v, s in self.bases]
        return record


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8: what a sha256 of parameters hashes (frozen views as the
    plain values they view)."""
    return json.dumps(thaw(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def available_policies(kind: PolicyKind) -> list[str]:
    folder = policies_dir(kind.capability, kind.folder)
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def load_policy(kind: PolicyKind, name_or_path: str, overrides: list[str] | None = None) -> Policy:
    """Load a policy by packaged name (`overall_v1`) or by file path, over the bases it names,
    apply overrides, validate."""
    layers = _chain(kind, name_or_path)
    top = layers[-1]
    label = top.label
    versions = _versions(kind, layers)
    parameters = reduce(deep_merge, (layer.parameters for layer in layers))
    prefix = "" if kind.flat else "parameters."
    parsed_overrides = parse_overrides(
        overrides or [], strip_prefix=not kind.flat, option=kind.override_option
    )
    if kind.read_overrides_as is not None:
        parsed_overrides = _prepared(kind.read_overrides_as, kind.override_option, parsed_overrides)
    locate = kind.locate_files
    if locate is not None:
        parsed_overrides = _prepared(
            lambda given: locate(given, Path.cwd()), kind.override_option, parsed_overrides
        )
    for dotted, value in parsed_overrides.items():
        apply_override(label, parameters, kind.spec, kind.override_option, dotted, value, prefix)
    if kind.prepare is not None:
        parameters = _prepared(kind.prepare, label, parameters)
    validated = validate_tree(label, parameters, kind.spec, prefix="", root=prefix)
    for check in kind.cross_checks:
        try:
            check(validated)
        except PolicyError as exc:
            raise PolicyError(f"{label}: {exc}") from None
    version, base_version = versions[-1]
    return Policy(
        kind=kind,
        base_version=base_version,
        version=version + _suffix(parsed_overrides),
        source=label,
        description=top.description,
        parameters=FrozenMap(validated),
        overrides=parsed_overrides,
        parent_version=top.parent_version,
        metadata=top.metadata,
        bases=tuple((v, layer.label) for layer, (v, _) in zip(layers[-2::-1], versions[-2::-1])),
    )


def policy_from_parameters(
    kind: PolicyKind,
    version: str,
    parameters: dict[str, Any],
    source: str,
    parent_version: str | None = None,
) -> Policy:
    """A validated policy built in code (calibrate's candidates), checked like a file; frozen
    views among `parameters` (a copy of another policy's) are read as the plain values."""
    validated = validate_tree(source, thaw(parameters), kind.spec, prefix="", root="parameters.")
    for check in kind.cross_checks:
        try:
            check(validated)
        except PolicyError as exc:
            raise PolicyError(f"{source}: {exc}") from None
    return Policy(
        kind=kind,
        base_version=version,
        version=version,
        source=source,
        description="",
        parameters=FrozenMap(validated),
        parent_version=parent_version,
    )


@dataclass(frozen=True)
class _Layer:
    """One file of a policy and its bases: its own keys, its parameters in the spec's words."""

    path: Path
    label: str
    version: str | None
    base: str | None  # what it extends: named, or its kind's default
    parameters: dict[str, Any]
    description: str
    parent_version: str | None
    metadata: dict[str, Any]


def _chain(kind: PolicyKind, name_or_path: str) -> list[_Layer]:
    """The file and its bases, the root (the file without a base) first."""
    layers = [_read_layer(kind, _locate(kind, name_or_path))]
    while (base := layers[-1].base) is not None:
        below = layers[-1]
        try:
            path = _locate(kind, base, beside=below.path.parent)
        except PolicyError as exc:
            raise PolicyError(f"{below.label}: extends: {exc}") from None
        if any(path.resolve() == layer.path.resolve() for layer in layers):
            trail = " -> ".join([layer.label for layer in layers] + [_label(kind, path)])
            raise PolicyError(f"{below.label}: extends {base!r} makes a cycle: {trail}")
        layers.append(_read_layer(kind, path))
    return layers[::-1]


def _label(kind: PolicyKind, path: Path) -> str:
    packaged = path.parent == policies_dir(kind.capability, kind.folder)
    return f"{kind.capability} policy {path.stem}" if packaged else str(path)


def _read_layer(kind: PolicyKind, path: Path) -> _Layer:
    document = _read_yaml(path)
    label = _label(kind, path)
    meta_keys = {kind.version_key, "description", "parent_version", "metadata", "extends"}
    parameters: Any
    if kind.flat:
        parameters = {k: v for k, v in document.items() if k not in meta_keys}
    else:
        reject_unknown(label, document, meta_keys | {"parameters"}, prefix="")
        parameters = document.get("parameters", {} if "extends" in document else None)
    metadata = document.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise PolicyError(f"{label}: `metadata` must be a mapping")
    parent_version = document.get("parent_version")
    if parent_version is not None and not isinstance(parent_version, str):
        raise PolicyError(f"{label}: parent_version must be a version name, got {parent_version!r}")
    version = document.get(kind.version_key)
    if version is not None and not (
        isinstance(version, str) and _VERSION_PATTERN.fullmatch(version)
    ):
        raise PolicyError(f"{label}: {kind.version_key} must be a version name, got {version!r}")
    named = document.get("extends")
    if "extends" in document and not (isinstance(named, str) and named):
        raise PolicyError(f"{label}: extends must be a policy name or a path, got {named!r}")
    if not isinstance(parameters, dict):
        raise PolicyError(f"{label}: `parameters` must be a mapping")
    parameters = lists_to_maps(label, parameters, kind.spec)
    if kind.read_as is not None:
        parameters = _prepared(kind.read_as, label, parameters)
    if kind.locate_files is not None:
        locate = kind.locate_files
        parameters = _prepared(lambda given: locate(given, path.parent), label, parameters)
    if named is None and (version is None or not complete(parameters, kind.spec)):
        named = kind.default_base
    return _Layer(
        path,
        label,
        version,
        named,
        parameters,
        str(document.get("description") or ""),
        parent_version,
        dict(metadata),
    )


def _versions(kind: PolicyKind, layers: list[_Layer]) -> list[tuple[str, str]]:
    """Each layer's (version, base_version) before overrides, the root's first: the name it
    gives, or its base's version + the suffix of its differences, never a base's name."""
    found: list[tuple[str, str]] = []
    for layer in layers:
        if layer.version is None and not found:
            raise PolicyError(f"{layer.label}: {kind.version_key} must be a version name, got None")
        if layer.version is None:
            version, base_version = found[-1]
            found.append((version + _suffix(layer.parameters), base_version))
        elif any(layer.version == version for version, _ in found):
            raise PolicyError(
                f"{layer.label}: {kind.version_key} {layer.version!r} is the version of a base it "
                "extends; give the file a name of its own, or none"
            )
        else:
            found.append((layer.version, layer.version))
    return found


def _suffix(changes: dict[str, Any]) -> str:
    """`+` and 8 hex digits of the changes' sha256 as canonical JSON; nothing for no changes."""
    return "+" + hashlib.sha256(canonical_json(changes).encode()).hexdigest()[:8] if changes else ""


def _prepared(
    step: Callable[[dict[str, Any]], dict[str, Any]], label: str, parameters: dict[str, Any]
) -> dict[str, Any]:
    try:
        return step(parameters)
    except PolicyError as exc:
        raise PolicyError(f"{label}: {exc}") from None


def parse_overrides(
    items: list[str], strip_prefix: bool = True, option: str = "--set"
) -> dict[str, Any]:
    """`key=value` strings to {dotted key: YAML-parsed value}; a leading `parameters.` is optional.
    Errors name `option`, the command-line option the items came from."""
    parsed: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if strip_prefix:
            key = key.removeprefix("parameters.")
        if not sep or not key:
            raise PolicyError(f"{option} {item!r}: expected key=value")
        try:
            parsed[key] = load_yaml(raw) if raw.strip() else None
        except AmbiguousNumber as exc:
            raise PolicyError(f"{option} {item!r}: {exc.problem}") from None
        except yaml.YAMLError:
            raise PolicyError(f"{option} {item!r}: the value is not valid YAML") from None
    return parsed


def _yaml_problem(exc: yaml.YAMLError, text: str) -> tuple[str, str]:
    """`:LINE` and the problem, on one line; a character the reader refuses has no mark but its
    position in the text."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return f":{line}", f"unacceptable character #x{exc.character:04x}: {exc.reason}"
    mark = getattr(exc, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    return where, " ".join(str(getattr(exc, "problem", exc)).split())


def _locate(kind: PolicyKind, name_or_path: str, beside: Path | None = None) -> Path:
    """A packaged name's file, or a path (relative to `beside`, the folder of the file naming it
    as its base, when given)."""
    candidate = Path(name_or_path)
    looks_like_path = candidate.suffix in {".yaml", ".yml"} or len(candidate.parts) > 1
    if looks_like_path:
        path = candidate if beside is None else beside / candidate
        if not path.is_file():
            raise PolicyError(f"policy file not found: {name_or_path if beside is None else path}")
        return path
    packaged = policies_dir(kind.capability, kind.folder) / f"{name_or_path}.yaml"
    if not packaged.is_file():
        known = ", ".join(available_policies(kind)) or "none"
        raise PolicyError(f"unknown {kind.capability} policy {name_or_path!r} (packaged: {known})")
    return packaged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
        document = load_yaml(text)
    except yaml.YAMLError as exc:
        where, problem = _yaml_problem(exc, text)
        if isinstance(exc, AmbiguousNumber):
            raise PolicyError(f"{path}{where}: {problem}") from None
        raise PolicyError(f"{path}{where}: not valid YAML ({problem})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot read ({exc})") from None
    if not isinstance(document, dict):
        raise PolicyError(f"{path}: a policy must be a YAML mapping")
    return document
