"""Versioned policy files: load, validate against a declared parameter spec, apply overrides.

A policy is a YAML file with a version key (e.g. `score_policy_version: overall_v1`), an optional
`description`, `parent_version` and free-form `metadata`, and a `parameters` tree. Every
parameter is declared in the capability's spec; unknown, missing and out-of-range keys are
errors that name the key. Overrides (`--set alpha=0.7`, dotted for nested keys) are applied
before validation, and give the effective version a suffix derived from them, so an output
never claims a version whose parameters it did not use.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias

import yaml

from .errors import PolicyError
from .resources import policies_dir

_VERSION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


class _Loader(yaml.SafeLoader):
    """YAML with 1.2-style floats: PyYAML reads `1e-9` (no dot) as a string."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"),
    list("-+0123456789."),
)


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
    return yaml.load(text, Loader=_Loader)


@dataclass(frozen=True)
class Number:
    """A real number within [lo, hi] (either end open when `*_open`)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    nullable: bool = False

    def check(self, key: str, value: Any) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise PolicyError(f"{key}: a number is required, got null")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PolicyError(f"{key}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise PolicyError(f"{key}: expected a finite number, got {value!r}")
        if self.integer and value != int(value):
            raise PolicyError(f"{key}: expected a whole number, got {value!r}")
        too_low = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        too_high = self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi)
        if too_low or too_high:
            raise PolicyError(f"{key}: {value!r} is outside {self.describe_range()}")
        return int(value) if self.integer else float(value)

    def describe_range(self) -> str:
        left = "(" if self.lo_open else "["
        right = ")" if self.hi_open else "]"
        lo = "-inf" if self.lo is None else f"{self.lo:g}"
        hi = "inf" if self.hi is None else f"{self.hi:g}"
        return f"{left}{lo}, {hi}{right}"


@dataclass(frozen=True)
class Choice:
    options: tuple[str, ...]

    def check(self, key: str, value: Any) -> Any:
        if value not in self.options:
            raise PolicyError(f"{key}: {value!r} is not one of {', '.join(self.options)}")
        return value


@dataclass(frozen=True)
class Bounds:
    """A pair [lo, hi] of finite numbers with lo <= hi, or null (lo = hi is a zero spread)."""

    def check(self, key: str, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise PolicyError(f"{key}: expected [lo, hi] or null, got {value!r}")
        lo, hi = (Number().check(f"{key}[{i}]", v) for i, v in enumerate(value))
        if lo > hi:
            raise PolicyError(f"{key}: lo ({lo!r}) must not exceed hi ({hi!r})")
        return [lo, hi]


@dataclass(frozen=True)
class Words:
    """A list of non-empty strings (lexicons, phrase lists)."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise PolicyError(f"{key}: expected a list of non-empty strings")
        return list(value)


@dataclass(frozen=True)
class Flag:
    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, bool):
            raise PolicyError(f"{key}: expected true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class Text:
    """A free string (a rule pattern, a label)."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, str) or not value:
            raise PolicyError(f"{key}: expected a non-empty string, got {value!r}")
        return value


@dataclass(frozen=True)
class MapOf:
    """A mapping from free names (e.g. source names) to entries of one rule."""

    entry: Rule
    name_pattern: str = r"[A-Za-z0-9_.\-]+"


@dataclass(frozen=True)
class ListOf:
    """A list of entries of one spec (e.g. query-analyzer rules)."""

    entry: Spec


class Leaf(Protocol):
    """A parameter's rule (Number, Choice, Bounds …, or a capability's own): the checked value."""

    def check(self, key: str, value: Any) -> Any: ...


Spec: TypeAlias = Mapping[str, "Rule"]
Rule: TypeAlias = "Leaf | Spec | MapOf | ListOf"  # what a key of a policy may be


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


@dataclass(frozen=True)
class Policy:
    kind: PolicyKind
    base_version: str
    version: str
    source: str
    description: str
    parameters: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)
    parent_version: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def parameters_sha256(self) -> str:
        return hashlib.sha256(canonical_json(self.parameters).encode()).hexdigest()

    def as_record(self) -> dict[str, Any]:
        return {
            "capability": self.kind.capability,
            self.kind.version_key: self.version,
            "base_version": self.base_version,
            "parent_version": self.parent_version,
            "source": self.source,
            "overrides": self.overrides,
            "parameters": self.parameters,
            "parameters_sha256": self.parameters_sha256,
        }


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def available_policies(kind: PolicyKind) -> list[str]:
    folder = policies_dir(kind.capability, kind.folder)
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def load_policy(kind: PolicyKind, name_or_path: str, overrides: list[str] | None = None) -> Policy:
    """Load a policy by packaged name (`overall_v1`) or by file path, apply overrides, validate."""
    path = _locate(kind, name_or_path)
    document = _read_yaml(path)
    packaged = path.parent == policies_dir(kind.capability, kind.folder)
    label = f"{kind.capability} policy {path.stem}" if packaged else str(path)
    meta_keys = {kind.version_key, "description", "parent_version", "metadata"}
    parameters: Any
    if kind.flat:
        parameters = {k: v for k, v in document.items() if k not in meta_keys}
    else:
        _reject_unknown(label, document, meta_keys | {"parameters"}, prefix="")
        parameters = document.get("parameters")
    version = document.get(kind.version_key)
    metadata = document.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise PolicyError(f"{label}: `metadata` must be a mapping")
    parent_version = document.get("parent_version")
    if parent_version is not None and not isinstance(parent_version, str):
        raise PolicyError(f"{label}: parent_version must be a version name, got {parent_version!r}")
    if not isinstance(version, str) or not _VERSION_PATTERN.fullmatch(version):
        raise PolicyError(f"{label}: {kind.version_key} must be a version name, got {version!r}")
    if not isinstance(parameters, dict):
        raise PolicyError(f"{label}: `parameters` must be a mapping")
    prefix = "" if kind.flat else "parameters."
    parameters = _lists_to_maps(label, parameters, kind.spec)
    parsed_overrides = parse_overrides(
        overrides or [], strip_prefix=not kind.flat, option=kind.override_option
    )
    for dotted, value in parsed_overrides.items():
        _apply_override(label, parameters, kind, dotted, value)
    if kind.prepare is not None:
        parameters = _prepared(kind, label, parameters)
    validated = _validate_tree(label, parameters, kind.spec, prefix="", root=prefix)
    for check in kind.cross_checks:
        try:
            check(validated)
        except PolicyError as exc:
            raise PolicyError(f"{label}: {exc}") from None
    effective = version
    if parsed_overrides:
        effective += "+" + hashlib.sha256(canonical_json(parsed_overrides).encode()).hexdigest()[:8]
    return Policy(
        kind=kind,
        base_version=version,
        version=effective,
        source=label,
        description=str(document.get("description") or ""),
        parameters=validated,
        overrides=parsed_overrides,
        parent_version=parent_version,
        metadata=dict(metadata),
    )


def policy_from_parameters(
    kind: PolicyKind,
    version: str,
    parameters: dict[str, Any],
    source: str,
    parent_version: str | None = None,
) -> Policy:
    """A validated policy built in code (calibrate's candidates), checked like a file."""
    validated = _validate_tree(source, parameters, kind.spec, prefix="", root="parameters.")
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
        parameters=validated,
        parent_version=parent_version,
    )


def _lists_to_maps(label: str, tree: dict[str, Any], spec: Spec) -> dict[str, Any]:
    """Accept `- name: x` lists where the spec has a mapping of names (seed 003 §8 `sources:`)."""
    converted = dict(tree)
    for key, rule in spec.items():
        value = converted.get(key)
        if isinstance(rule, MapOf) and isinstance(value, list):
            mapping: dict[str, Any] = {}
            for entry in value:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise PolicyError(f"{label}: every entry of {key} needs a name")
                name = entry["name"]
                if name in mapping:
                    raise PolicyError(f"{label}: {key}: {name!r} is declared twice")
                mapping[name] = {k: v for k, v in entry.items() if k != "name"}
            converted[key] = mapping
        elif isinstance(rule, Mapping) and isinstance(value, dict):
            converted[key] = _lists_to_maps(label, value, rule)
    return converted


def _prepared(kind: PolicyKind, label: str, parameters: dict[str, Any]) -> dict[str, Any]:
    assert kind.prepare is not None
    try:
        return kind.prepare(parameters)
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
        except yaml.YAMLError:
            raise PolicyError(f"{option} {item!r}: the value is not valid YAML") from None
    return parsed


def _locate(kind: PolicyKind, name_or_path: str) -> Path:
    candidate = Path(name_or_path)
    looks_like_path = candidate.suffix in {".yaml", ".yml"} or len(candidate.parts) > 1
    if looks_like_path:
        if not candidate.is_file():
            raise PolicyError(f"policy file not found: {name_or_path}")
        return candidate
    packaged = policies_dir(kind.capability, kind.folder) / f"{name_or_path}.yaml"
    if not packaged.is_file():
        known = ", ".join(available_policies(kind)) or "none"
        raise PolicyError(f"unknown {kind.capability} policy {name_or_path!r} (packaged: {known})")
    return packaged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        document = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise PolicyError(
            f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot read ({exc})") from None
    if not isinstance(document, dict):
        raise PolicyError(f"{path}: a policy must be a YAML mapping")
    return document


def _reject_unknown(label: str, tree: Mapping[str, Any], allowed: set[str], prefix: str) -> None:
    for key in tree:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            suggestion = f" (did you mean '{prefix}{hint[0]}'?)" if hint else ""
            raise PolicyError(f"{label}: unknown key '{prefix}{key}'{suggestion}")


def _validate_tree(label: str, tree: Any, spec: Spec, prefix: str, root: str) -> dict[str, Any]:
    if not isinstance(tree, dict):
        raise PolicyError(f"{label}: {root}{prefix.rstrip('.')} must be a mapping")
    _reject_unknown(label, tree, set(spec), prefix=f"{root}{prefix}")
    validated: dict[str, Any] = {}
    for key, rule in spec.items():
        dotted = f"{prefix}{key}"
        if key not in tree:
            raise PolicyError(f"{label}: missing key {root}{dotted}")
        validated[key] = _validate_node(label, tree[key], rule, dotted, root)
    return validated


def _validate_node(label: str, value: Any, rule: Any, dotted: str, root: str) -> Any:
    if isinstance(rule, Mapping):
        return _validate_tree(label, value, rule, prefix=f"{dotted}.", root=root)
    if isinstance(rule, MapOf):
        if not isinstance(value, dict):
            raise PolicyError(f"{label}: {root}{dotted} must be a mapping of names")
        for name in value:
            if not isinstance(name, str) or not re.fullmatch(rule.name_pattern, name):
                raise PolicyError(f"{label}: {root}{dotted}: invalid name {name!r}")
        return {
            name: _validate_node(label, entry, rule.entry, f"{dotted}.{name}", root)
            for name, entry in value.items()
        }
    if isinstance(rule, ListOf):
        if not isinstance(value, list):
            raise PolicyError(f"{label}: {root}{dotted} must be a list")
        return [
            _validate_tree(label, entry, rule.entry, f"{dotted}[{i}].", root)
            for i, entry in enumerate(value)
        ]
    try:
        return rule.check(f"{root}{dotted}", value)
    except PolicyError as exc:
        raise PolicyError(f"{label}: {exc}") from None


def _apply_override(
    label: str, tree: dict[str, Any], kind: PolicyKind, dotted: str, value: Any
) -> None:
    parts = dotted.split(".")
    node: Any = tree
    rules: Any = kind.spec
    option = kind.override_option
    for depth, part in enumerate(parts):
        if isinstance(rules, MapOf):
            rules = {part: rules.entry}
        if not isinstance(rules, Mapping) or part not in rules:
            known = sorted(rules) if isinstance(rules, Mapping) else []
            hint = difflib.get_close_matches(part, known, n=1)
            where = ".".join(parts[: depth + 1])
            suggestion = f" (did you mean {'.'.join(parts[:depth] + [hint[0]])!r}?)" if hint else ""
            raise PolicyError(f"{option} {dotted}: unknown key {where!r}{suggestion}")
        rules = rules[part]
        if depth == len(parts) - 1:
            if isinstance(rules, Mapping):
                if not isinstance(value, dict):
                    raise PolicyError(
                        f"{option} {dotted}: is a group; give a mapping or set one of its keys"
                    )
                for key, item in value.items():
                    _apply_override(label, tree, kind, f"{dotted}.{key}", item)
                return
            node[part] = value
        else:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise PolicyError(
                    f"{label}: parameters.{'.'.join(parts[: depth + 1])} must be a mapping"
                )
