"""Where fusion's components come from (issue 48 §3): the built-ins (the component files of
sql/fuse/components/<kind>/, and builtins.yaml's ltr, without SQL of its own), the entry
points of the group `duckscore.components`, and a recipe's `plugins` (files or folders,
relative to the recipe). A plugin's text is kept by its
sha256 when the recipe is read (`locate_plugins`): what a recipe records is what renders. And
the check of a recipe's components: every name registered, every value within its schema, every
used plugin's SQL through the templates' checks (`recipe_components`)."""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2

from ..core.check import check_sql
from ..core.errors import DuckscoreError, PolicyError
from ..core.policy import load_yaml
from ..core.render import RenderedSQL
from ..core.resources import sql_dir
from .component_file import component_files, declared_component, read_component
from .components import (
    BUILTIN,
    CONTRIBUTION,
    KINDS,
    NEEDS,
    Call,
    Component,
    builtin_call,
    sha256_of,
)

ENTRY_POINT_GROUP = "duckscore.components"
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Registry:
    """Every registered component by (kind, name): built-ins, entry points, a recipe's plugins."""

    components: dict[tuple[str, str], Component] = field(default_factory=dict)

    def get(self, kind: str, name: str, key: str) -> Component:
        """The `kind` named `name` at recipe key `key`, or an error listing the registered ones."""
        found = self.components.get((kind, name))
        if found is None:
            raise PolicyError(f"{key}: {name!r} is not one of {', '.join(self.names(kind))}")
        return found

    def names(self, kind: str) -> list[str]:
        return [name for k, name in self.components if k == kind]

    def plugin(self, name: str, key: str) -> Component:
        """The plugin named `name` (component_params' keys), of any kind."""
        for component in self.components.values():
            if component.name == name and not component.builtin:
                return component
        if any(c.name == name for c in self.components.values()):
            raise PolicyError(
                f"{key}: {name} is built in; it reads the recipe's own keys "
                f"({', '.join(self._recipe_keys(name)) or 'none'}), not component_params"
            )
        plugins = [c.name for c in self.components.values() if not c.builtin]
        raise PolicyError(
            f"{key}: no plugin is named {name!r} (plugins: {', '.join(plugins) or 'none'})"
        )

    def _recipe_keys(self, name: str) -> list[str]:
        return [k for c in self.components.values() if c.name == name for k in c.recipe_keys]

    def with_plugins(self, plugins: Iterable[Component]) -> Registry:
        """This registry and `plugins`; a plugin named like a registered component is refused
        (the same file named twice, or from a recipe and a package, is the one component)."""
        components = dict(self.components)
        for plugin in plugins:
            known = components.get((plugin.kind, plugin.name))
            if known is not None and known.text == plugin.text:
                continue
            for other in components.values():
                if other.name == plugin.name:
                    raise PolicyError(
                        f"{plugin.kind} {plugin.name} ({plugin.location}) has the name of "
                        f"{other.kind} {other.name} ({other.where}): rename one"
                    )
            components[(plugin.kind, plugin.name)] = plugin
        return Registry(components)


def registry(plugins: Iterable[Mapping[str, str]] = ()) -> Registry:
    """The built-ins, the entry points' components and a recipe's `plugins` (its recorded
    {path, sha256} entries, read by locate_plugins)."""
    return (
        builtins()
        .with_plugins(entry_point_components())
        .with_plugins(_stored(entry) for entry in plugins)
    )


@lru_cache(maxsize=1)
def builtins() -> Registry:
    """The component files of sql/fuse/components/<kind>/<name>.sql, by kind and name, then
    builtins.yaml's (no SQL of its own: ltr)."""
    folder = sql_dir() / "fuse" / "components"
    found = [_builtin_file(path) for kind in KINDS for path in sorted(folder.glob(f"{kind}/*.sql"))]
    listed = folder / "builtins.yaml"
    for entry in load_yaml(listed.read_text(encoding="utf-8")):
        declared = declared_component(entry, str(listed), BUILTIN, builtin=True)
        found.append(replace(declared, location=BUILTIN))
    return Registry({(c.kind, c.name): c for c in found})


def _builtin_file(path: Path) -> Component:
    location = path.relative_to(sql_dir().parent).as_posix()
    component = read_component(path, BUILTIN, location)
    if (component.kind, component.name) != (path.parent.name, path.stem):
        raise PolicyError(f"{location}: declares {component.kind} {component.name}")
    return component


def entry_point_components() -> list[Component]:
    """The components of the entry points of ENTRY_POINT_GROUP: each loads to a file or folder
    of component files (a str or Path), or to a callable returning one."""
    found: list[Component] = []
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        origin = f"entry point {point.name} ({point.value})"
        try:
            target = point.load()
            located = target() if callable(target) else target
        except Exception as exc:  # a third party's import: any error, reported in one line
            raise PolicyError(f"{origin}: cannot load ({type(exc).__name__}: {exc})") from None
        if not isinstance(located, str | Path):
            raise PolicyError(f"{origin}: gives {located!r}, not a path of component files")
        for path in component_files(Path(located), origin):
            found.append(read_component(path, f"{origin}: {path.name}"))
    return found


# plugin texts by sha256, as locate_plugins read them: a recipe's recorded {path, sha256}
_STORE: dict[str, Component] = {}
# where each text was read (one text may be read from several copies)
_LOCATIONS: dict[str, set[Path]] = {}


def locate_plugins(parameters: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A recipe file's (or --set-recipe's) `plugins`, each a file or folder relative to
    `folder` (absolute allowed), read and recorded as {path, sha256} per component file: the
    path as given, so outputs do not depend on where the checkout is. An entry already
    recorded ({path, sha256}) must still have that sha256."""
    if "plugins" not in parameters:
        return parameters
    given = parameters["plugins"]
    if not isinstance(given, list):
        raise PolicyError(f"plugins: expected a list of component files or folders, got {given!r}")
    located: list[dict[str, str]] = []
    for index, entry in enumerate(given):
        path_text, expected = _plugin_entry(entry, f"plugins[{index}]")
        path = Path(path_text)
        full = path if path.is_absolute() else folder / path
        for file in component_files(full, f"plugins[{index}]"):
            recorded = path_text if file == full else str(PurePosixPath(path_text) / file.name)
            component = read_component(file, recorded)
            digest = sha256_of(component.text or "")
            if expected is not None and expected != digest:
                raise PolicyError(
                    f"plugins[{index}]: {file} has sha256 {digest[:12]}…, not the "
                    f"{expected[:12]}… recorded: the file changed since"
                )
            _STORE.setdefault(digest, component)
            _LOCATIONS.setdefault(digest, set()).add(file.resolve())
            located.append({"path": recorded, "sha256": digest})
    return parameters | {"plugins": located}


def plugins_relative_to(parameters: dict[str, Any], written: Path) -> dict[str, Any]:
    """A recipe's recorded `plugins` for a copy of it written to the file `written` (tune, learn):
    each path made relative to that file's folder, so the copy finds the files its original
    found (an absolute path stays absolute)."""
    if "plugins" not in parameters:
        return parameters
    rebased = []
    for entry in parameters["plugins"]:
        if PurePosixPath(entry["path"]).is_absolute():
            rebased.append(dict(entry))
            continue
        relative = os.path.relpath(_read_from(entry), Path(written).resolve().parent)
        rebased.append({"path": Path(relative).as_posix(), "sha256": entry["sha256"]})
    return parameters | {"plugins": rebased}


def _read_from(entry: Mapping[str, str]) -> Path:
    """The file a recorded entry was read from: of the copies of its text read in this process,
    the first whose path ends with the entry's (its `..` and `.` parts aside)."""
    _stored(entry)  # refused if this process never read it
    tail = [part for part in PurePosixPath(entry["path"]).parts if part not in ("..", ".")]
    copies = sorted(_LOCATIONS[entry["sha256"]])
    matching = [c for c in copies if list(c.parts[-len(tail) :]) == tail]
    return (matching or copies)[0]


def _is_recorded(entry: Any) -> bool:
    """A plugin entry as a loaded recipe records it: {path, sha256}."""
    return (
        isinstance(entry, dict)
        and set(entry) == {"path", "sha256"}
        and all(isinstance(entry[key], str) for key in entry)
    )


def _plugin_entry(entry: Any, key: str) -> tuple[str, str | None]:
    if isinstance(entry, str) and entry:
        return entry, None
    if _is_recorded(entry):
        return entry["path"], entry["sha256"]
    raise PolicyError(f"{key}: expected a path of a component file or folder, got {entry!r}")


def _stored(entry: Mapping[str, str]) -> Component:
    component = _STORE.get(entry["sha256"])
    if component is None:
        raise PolicyError(
            f"plugin {entry['path']} (sha256 {entry['sha256'][:12]}…) was not read in this "
            "process: load the recipe from its file"
        )
    return component


@dataclass(frozen=True)
class PluginFiles:
    """`plugins` once located: a list of {path, sha256}."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or not all(
            _is_recorded(e) and _SHA256.fullmatch(e["sha256"]) for e in value
        ):
            raise PolicyError(f"{key}: expected a list of component files or folders")
        return [dict(e) for e in value]


@dataclass(frozen=True)
class ParameterValues:
    """A component's parameter values (checked against its schema once the registry is known);
    --set-recipe and --grid may set one: component_params.<component>.<parameter>."""

    keyed_values = True

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, dict):
            raise PolicyError(f"{key}: expected a mapping of parameter names to values")
        for name, item in value.items():
            if not isinstance(name, str) or not isinstance(item, bool | int | float | str):
                raise PolicyError(f"{key}.{name}: expected a number, true/false or a choice")
        return dict(value)


def _probe_source_sum(value: Any, condition: Any = None) -> str:
    return f"sum({value})" + (f" FILTER (WHERE {condition})" if condition else "")


_STATS = {
    "query_id": "VARCHAR",
    "source": "VARCHAR",
    "target_id": "VARCHAR",
    "parent_id": "VARCHAR",
    "raw_score": "DOUBLE",
    "best_rank": "BIGINT",
    "weight": "DOUBLE",
    "list_rank": "BIGINT",
    "list_n": "BIGINT",
    "s_min": "DOUBLE",
    "s_max": "DOUBLE",
    "s_mean": "DOUBLE",
    "s_sum": "DOUBLE",
    "s_l2": "DOUBLE",
    "s_sd_z": "DOUBLE",
    "s_sd_dbsf": "DOUBLE",
    "s_softmax_sum": "DOUBLE",
}
_PER_SOURCE = {
    "query_id": "VARCHAR",
    "target_id": "VARCHAR",
    "source": "VARCHAR",
    "present": "BOOLEAN",
    "counted": "BOOLEAN",
    "weight": "DOUBLE",
    "raw_score": "DOUBLE",
    "list_rank": "BIGINT",
    "norm_score": "DOUBLE",
    "contribution": "DOUBLE",
}
# an aligner and a query rule read their input alone (`value`, `query_text`): an aligner's group
# is a (query, source, parent)'s hits, or a parent's fused blocks (aligner.order: after_fusion)
_VALUES = {"score": "DOUBLE"}
_LOG = {"query_text": "VARCHAR"}
# a plugin rendered alone, as fused.sql reads it, to check it before it runs: the query, the
# relation it reads and the inputs its macro is given
_PROBES: dict[str, tuple[str, dict[str, dict[str, str]], tuple[Any, ...]]] = {
    "normalizer": ("SELECT {sql} AS norm_score FROM list_stats", {"list_stats": _STATS}, ()),
    "aligner": ("SELECT {sql} AS raw_score FROM hits", {"hits": _VALUES}, ("score",)),
    "fusion": (
        "SELECT query_id, target_id, {sql} AS fused_score FROM per_source "
        "GROUP BY query_id, target_id",
        {"per_source": _PER_SOURCE},
        (_probe_source_sum,),
    ),
    "query_rule": (
        "SELECT {sql} AS matched FROM retrieval_log",
        {"retrieval_log": _LOG},
        ("coalesce(query_text, '')",),
    ),
}


# a fusion method's list contribution, rendered alone: what per_source computes it from
_CONTRIBUTION_PROBE = "SELECT {sql} AS contribution FROM grid"
# a normaliser's ŝ of a candidate missing from a list (fills_candidates), as fused.sql's grid
# reads it: over the list's row `ql`, the candidate's (none) of that list beside it
_MISSING_PROBE = (
    "SELECT {sql} AS norm_score FROM candidates AS c "
    "JOIN query_lists AS ql ON ql.query_id = c.query_id "
    "LEFT JOIN normalized AS n ON n.query_id = c.query_id AND n.source = ql.source "
    "AND n.target_id = c.target_id"
)
_QUERY_LISTS = {
    "query_id": "VARCHAR",
    "source": "VARCHAR",
    "weight": "DOUBLE",
    "list_n": "BIGINT",
    "last_rank": "BIGINT",
    "n_candidates": "BIGINT",
    "list_min_score": "DOUBLE",
}
_GRID_INPUTS = {
    "candidates": {"query_id": "VARCHAR", "target_id": "VARCHAR", "n_lists": "BIGINT"},
    "query_lists": _QUERY_LISTS,
    "normalized": _STATS | NEEDS | {"norm_score": "DOUBLE"},
}
_GRID = {
    "weight": "DOUBLE",
    "raw_score": "DOUBLE",
    "list_rank": "BIGINT",
    "norm_score": "DOUBLE",
    "rank_for_fusion": "BIGINT",
}


def check_call(call: Call, key: str) -> None:
    """Render `call`'s plugin alone, as fused.sql would, and put it through the checks of every
    template (parse, lint, qualify against the columns its kind may read): an error names the
    plugin's file and the recipe key that uses it."""
    component = call.component
    template, schema, inputs = _PROBES[component.kind]
    if component.needs:
        schema = {"list_stats": _STATS | {column: NEEDS[column] for column in component.needs}}
    _check_probe(component, lambda: call(*inputs), template, schema, key)
    if component.kind == "fusion" and CONTRIBUTION in component.macro().arguments:
        _check_probe(component, call.contribution, _CONTRIBUTION_PROBE, {"grid": _GRID}, key)
    if component.fills_candidates:
        _check_probe(component, call.missing_score, _MISSING_PROBE, _GRID_INPUTS, key)


def _check_probe(
    component: Component,
    rendered_sql: Callable[[], str],
    template: str,
    schema: dict[str, dict[str, str]],
    key: str,
) -> None:
    try:
        sql = rendered_sql()
    except (jinja2.TemplateError, DuckscoreError) as exc:
        message = " ".join(str(exc).split())
        raise PolicyError(f"{key}: {component.location}: {message}") from None
    rendered = RenderedSQL(component.name, template.format(sql=sql), label=component.location)
    try:
        check_sql(rendered, schema)
    except DuckscoreError as exc:
        raise PolicyError(f"{key}: {exc}") from None


@dataclass(frozen=True)
class Components:
    """The components a recipe uses: the registry, each used plugin bound to its parameters (by
    kind and name) and each query-analyzer rule's component bound to its values (a `match`
    pattern's: the built-in `match`, bound to the pattern)."""

    registry: Registry
    plugins: dict[str, dict[str, Call]]
    query_rules: list[Call]

    def records(self) -> list[dict[str, str]]:
        """The used plugins, as the manifest records them."""
        used = [call for named in self.plugins.values() for call in named.values()]
        used += [call for call in self.query_rules if not call.component.builtin]
        unique = {(c.component.kind, c.component.name): c.component for c in used}
        return [
            {"kind": c.kind, "name": c.name, "origin": c.origin, "sha256": c.sha256 or ""}
            for c in unique.values()
        ]

    def calls(self, p: dict[str, Any]) -> dict[str, dict[str, Call]]:
        """What fused.sql calls, by kind and name: the bound plugins, and the built-ins recipe
        parameters `p` use, each bound to its recipe keys' values in `p`."""
        bound = {kind: dict(named) for kind, named in self.plugins.items()}
        for kind, _, name in used_components(p):
            component = self.registry.components[(kind, name)]
            if component.builtin:
                bound[kind][name] = builtin_call(component, p)
        return bound


def used_components(p: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The (kind, recipe key, name) of each normaliser, aligner and fusion method `p` names."""
    used = [("normalizer", "source_defaults.normalize", p["source_defaults"]["normalize"])]
    used += [
        ("normalizer", f"sources.{n}.normalize", s["normalize"]) for n, s in p["sources"].items()
    ]
    used += [("aligner", "aligner.method", p["aligner"]["method"])]
    return used + [("fusion", "fusion.method", p["fusion"]["method"])]


def recipe_components(p: dict[str, Any]) -> Components:
    """The registry of recipe parameters `p` and the plugins they use, checked: every name
    registered, every parameter within its schema, every used plugin's SQL through the checks
    of the templates. Errors name the recipe key."""
    found = registry(p.get("plugins") or ())
    used = used_components(p)
    for kind, key, name in used:
        found.get(kind, name, key)
    for name, values in (p.get("component_params") or {}).items():
        component = found.plugin(name, "component_params")
        if component.kind == "query_rule":
            raise PolicyError(
                f"component_params.{name}: a query rule takes its values from the rule's "
                "params (query_analyzer.rules[i].params)"
            )
        component.resolved(values, f"component_params.{name}")
    given = p.get("component_params") or {}
    bound: dict[str, dict[str, Call]] = {kind: {} for kind in KINDS}
    for kind, key, name in used:
        component = found.components[(kind, name)]
        if not component.builtin:
            params = component.resolved(given.get(name, {}), f"component_params.{name}")
            bound[kind][name] = Call(component, params)
            check_call(bound[kind][name], key)
    rules = [_query_rule(found, rule, i) for i, rule in enumerate(p["query_analyzer"]["rules"])]
    return Components(found, bound, rules)


def _query_rule(found: Registry, rule: dict[str, Any], index: int) -> Call:
    key = f"query_analyzer.rules[{index}]"
    if ("match" in rule) == ("rule" in rule):
        raise PolicyError(f"{key}: give `match` (an RE2 pattern) or `rule` (a query rule), one")
    if "rule" not in rule:
        if "params" in rule:
            raise PolicyError(f"{key}.params: a `match` rule takes no params")
        return Call(found.get("query_rule", "match", key), {"match": rule["match"]})
    component = found.get("query_rule", rule["rule"], f"{key}.rule")
    if component.builtin:
        raise PolicyError(f"{key}.rule: {rule['rule']} is built in: write `match: PATTERN`")
    call = Call(component, component.resolved(rule.get("params") or {}, f"{key}.params"))
    check_call(call, f"{key}.rule")
    return call
