"""Parameter trees against a spec: the list form of a mapping of names, completeness, merging
a file over its base, validation and overrides. Every error names the key."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from .errors import PolicyError
from .rules import ListOf, MapOf, Omissible, Spec


def lists_to_maps(label: str, tree: dict[str, Any], spec: Spec) -> dict[str, Any]:
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
            converted[key] = lists_to_maps(label, value, rule)
    return converted


def complete(tree: dict[str, Any], spec: Spec) -> bool:
    """Whether a file spells every key of the spec (the entries of a mapping of names aside)."""
    for key, rule in spec.items():
        if isinstance(rule, Omissible):
            continue
        if key not in tree:
            return False
        value = tree[key]
        if isinstance(rule, Mapping) and isinstance(value, dict) and not complete(value, rule):
            return False
    return True


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """`top` over `base`: mappings merged key by key, anything else (lists too) replaced whole."""
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        if isinstance(below, dict) and isinstance(value, dict):
            merged[key] = deep_merge(below, value)
        else:
            merged[key] = value
    return merged


def reject_unknown(label: str, tree: Mapping[str, Any], allowed: set[str], prefix: str) -> None:
    for key in tree:
        if key not in allowed:
            hint = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            suggestion = f" (did you mean '{prefix}{hint[0]}'?)" if hint else ""
            raise PolicyError(f"{label}: unknown key '{prefix}{key}'{suggestion}")


def validate_tree(label: str, tree: Any, spec: Spec, prefix: str, root: str) -> dict[str, Any]:
    if not isinstance(tree, dict):
        raise PolicyError(f"{label}: {root}{prefix.rstrip('.')} must be a mapping")
    reject_unknown(label, tree, set(spec), prefix=f"{root}{prefix}")
    validated: dict[str, Any] = {}
    for key, rule in spec.items():
        dotted = f"{prefix}{key}"
        if key not in tree and isinstance(rule, Omissible):
            continue
        if key not in tree:
            raise PolicyError(f"{label}: missing key {root}{dotted}")
        validated[key] = _validate_node(label, tree[key], rule, dotted, root)
    return validated


def _validate_node(label: str, value: Any, rule: Any, dotted: str, root: str) -> Any:
    if isinstance(rule, Omissible):
        rule = rule.rule
    if isinstance(rule, Mapping):
        return validate_tree(label, value, rule, prefix=f"{dotted}.", root=root)
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
            validate_tree(label, entry, rule.entry, f"{dotted}[{i}].", root)
            for i, entry in enumerate(value)
        ]
    try:
        return rule.check(f"{root}{dotted}", value)
    except PolicyError as exc:
        raise PolicyError(f"{label}: {exc}") from None


def apply_override(
    label: str, tree: dict[str, Any], spec: Spec, option: str, dotted: str, value: Any, root: str
) -> None:
    """Set `dotted` (`option`'s KEY=VALUE) in `tree`; a group is set key by key. `root` prefixes
    keys in messages, as validate_tree's (`parameters.`, or nothing in a flat file)."""
    parts = dotted.split(".")
    node: Any = tree
    rules: Any = spec
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
        if isinstance(rules, Omissible):
            rules = rules.rule
        if getattr(rules, "keyed_values", False) and depth == len(parts) - 2:
            # a mapping checked as a whole (a component's parameters): one of its keys set
            values = node.setdefault(part, {})
            if not isinstance(values, dict):
                raise PolicyError(
                    f"{label}: {root}{'.'.join(parts[: depth + 1])} must be a mapping"
                )
            values[parts[-1]] = value
            return
        if depth == len(parts) - 1:
            if isinstance(rules, Mapping):
                if not isinstance(value, dict):
                    raise PolicyError(
                        f"{option} {dotted}: is a group; give a mapping or set one of its keys"
                    )
                for key, item in value.items():
                    apply_override(label, tree, spec, option, f"{dotted}.{key}", item, root)
                return
            node[part] = value
        else:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise PolicyError(
                    f"{label}: {root}{'.'.join(parts[: depth + 1])} must be a mapping"
                )
