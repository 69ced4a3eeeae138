"""The component registry (issue 48 §3; seed 003 §2.1, "plug-in first"): normalisers, aligners,
fusion methods and query-analyzer rules by name, each with a declared parameter schema and a
one-line description.

A component file is SQL/Jinja holding one macro named like the component, after a Jinja comment
whose YAML declares it (docs/fuse.md, "Writing a component"):

    {#- kind: normalizer, name, description, parameters: {p: {type, min, max, default, …}} -#}
    {% macro name(params) %}…{% endmacro %}

The built-ins are declared the same way in sql/fuse/components/builtins.yaml (their SQL is the
branch of their name in sql/fuse/_normalizers.sql and sql/fuse/fused.sql). Plugins come from a
recipe's `plugins` (files or folders, relative to the recipe) and from the entry points of the
group `duckscore.components` of installed packages. A plugin's text is kept by its sha256 when
read (`locate_plugins`): what a recipe records is what renders."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
import yaml

from ..core.check import check_sql
from ..core.errors import DuckscoreError, PolicyError
from ..core.policy import Choice, Flag, Number, load_yaml
from ..core.render import RenderedSQL, environment
from ..core.resources import sql_dir

KINDS = ("normalizer", "aligner", "fusion", "query_rule")
ENTRY_POINT_GROUP = "duckscore.components"
BUILTIN = "built-in"
PARAMETER_TYPES = ("number", "integer", "boolean", "choice")
MISSING_POLICIES = ("zero", "skip")
# what each kind's macro takes, after `params`: the SQL it reads (docs/fuse.md)
INPUTS = {
    "normalizer": (),
    "aligner": ("value",),
    "fusion": ("source_sum",),
    "query_rule": ("query_text",),
}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER = re.compile(r"\s*\{#-?(.*?)-?#\}", re.DOTALL)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_HEADER_KEYS = {"kind", "name", "description", "parameters", "default_missing", "weighted"}
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
_REQUIRED = object()  # a parameter without a default


@dataclass(frozen=True)
class Parameter:
    """One declared parameter of a component: its type, bounds or choices, and default."""

    name: str
    type: str
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    choices: tuple[str, ...] = ()
    default: Any = _REQUIRED
    description: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def check(self, key: str, value: Any) -> Any:
        if self.type == "boolean":
            return Flag().check(key, value)
        if self.type == "choice":
            return Choice(self.choices).check(key, value)
        integer = self.type == "integer"
        return Number(self.min, self.max, self.min_open, self.max_open, integer).check(key, value)

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.type in ("number", "integer"):
            record |= {"min": self.min, "max": self.max}
            record |= {"min_open": self.min_open, "max_open": self.max_open}
        if self.choices:
            record["choices"] = list(self.choices)
        record["required"] = self.required
        record["default"] = None if self.required else self.default
        return record | ({"description": self.description} if self.description else {})


@dataclass(frozen=True)
class Component:
    """A registered component. `origin`: built-in, the plugin path as the recipe gives it, or the
    entry point; `location`: where its text was read (for messages only)."""

    kind: str
    name: str
    description: str
    origin: str
    parameters: tuple[Parameter, ...] = ()
    recipe_keys: tuple[str, ...] = ()  # a built-in's parameters: the recipe keys it reads
    default_missing: str = ""  # a fusion method's: zero or skip
    weighted: bool = False  # a fusion method that reads the source weights
    text: str | None = None  # None for a built-in
    location: str = BUILTIN

    @property
    def builtin(self) -> bool:
        return self.text is None

    @property
    def sha256(self) -> str | None:
        return None if self.text is None else _sha256(self.text)

    def macro(self) -> Any:
        """The component's Jinja macro (a built-in has none: its SQL is a template's branch)."""
        if self.text is None:
            raise PolicyError(f"{self.kind} {self.name} is built in: it has no macro of its own")
        return _compiled(self.text, self.name, self.location)

    def resolved(self, given: Mapping[str, Any], key: str) -> dict[str, Any]:
        """`given` (the recipe's values, at `key`) checked against the schema, defaults added."""
        declared = {p.name: p for p in self.parameters}
        for name in given:
            if name not in declared:
                known = ", ".join(declared) or "none"
                raise PolicyError(
                    f"{key}.{name}: {self.kind} {self.name} has no parameter {name!r} "
                    f"(parameters: {known})"
                )
        values: dict[str, Any] = {}
        for parameter in self.parameters:
            if parameter.name in given:
                values[parameter.name] = parameter.check(
                    f"{key}.{parameter.name}", given[parameter.name]
                )
            elif parameter.required:
                raise PolicyError(
                    f"{key}.{parameter.name} is required by {self.kind} {self.name} "
                    f"({self.location}), which gives it no default"
                )
            else:
                values[parameter.name] = parameter.default
        return values

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "origin": self.origin,
            "description": self.description,
            "parameters": [p.as_record() for p in self.parameters],
        }
        if self.recipe_keys:
            record["recipe_keys"] = list(self.recipe_keys)
        if self.kind == "fusion":
            record |= {"default_missing": self.default_missing, "weighted": self.weighted}
        return record | ({"sha256": self.sha256} if self.sha256 else {})


@dataclass(frozen=True)
class Call:
    """A plugin's macro with its parameters bound, as fused.sql calls it: `call(*inputs)`."""

    component: Component
    params: dict[str, Any]

    def __call__(self, *inputs: Any) -> str:
        return str(self.component.macro()(self.params, *inputs))


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
        """This registry and `plugins`; a plugin named like a registered component is refused."""
        components = dict(self.components)
        for plugin in plugins:
            for other in components.values():
                if other.name == plugin.name:
                    raise PolicyError(
                        f"{plugin.kind} {plugin.name} ({plugin.location}) has the name of "
                        f"{other.kind} {other.name} ({other.location}): rename one"
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
    path = sql_dir() / "fuse" / "components" / "builtins.yaml"
    declared = load_yaml(path.read_text(encoding="utf-8"))
    components = (_declared(entry, str(path), BUILTIN, builtin=True) for entry in declared)
    return Registry({(c.kind, c.name): replace(c, location=BUILTIN) for c in components})


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


def read_component(path: Path, origin: str) -> Component:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot read ({exc})") from None
    return parse_component(text, str(path), origin)


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
    component = _declared(header, location, origin, builtin=False, text=text)
    _compiled(text, component.name, location)
    macro = component.macro()
    expected = ("params", *INPUTS[component.kind])
    if len(macro.arguments) != len(expected):
        raise PolicyError(
            f"{location}: macro {component.name}({', '.join(macro.arguments)}) must take "
            f"({', '.join(expected)}), as a {component.kind} does"
        )
    return component


def _declared(
    header: Any, location: str, origin: str, *, builtin: bool, text: str | None = None
) -> Component:
    if not isinstance(header, dict):
        raise PolicyError(f"{location}: the header must be a YAML mapping")
    allowed = _HEADER_KEYS | ({"recipe_keys"} if builtin else set())
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
    fusion_only = [key for key in ("default_missing", "weighted") if key in header]
    if kind != "fusion" and fusion_only:
        raise PolicyError(f"{location}: {fusion_only[0]} is declared by a fusion method only")
    if kind == "fusion" and "default_missing" not in header:
        raise PolicyError(f"{location}: a fusion method declares default_missing (zero or skip)")
    return Component(
        kind=kind,
        name=name,
        description=description.strip(),
        origin=origin,
        parameters=_parameters(header.get("parameters") or {}, location),
        recipe_keys=tuple(header.get("recipe_keys") or ()),
        default_missing=(
            Choice(MISSING_POLICIES).check(
                f"{location}: default_missing", header["default_missing"]
            )
            if kind == "fusion"
            else ""
        ),
        weighted=Flag().check(f"{location}: weighted", header.get("weighted", False)),
        text=text,
        location=location,
    )


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


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# plugin texts by sha256, as locate_plugins read them: a recipe's recorded {path, sha256}
_STORE: dict[str, Component] = {}


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
            digest = _sha256(component.text or "")
            if expected is not None and expected != digest:
                raise PolicyError(
                    f"plugins[{index}]: {file} has sha256 {digest[:12]}…, not the "
                    f"{expected[:12]}… recorded: the file changed since"
                )
            _STORE.setdefault(digest, component)
            located.append({"path": recorded, "sha256": digest})
    return parameters | {"plugins": located}


def _plugin_entry(entry: Any, key: str) -> tuple[str, str | None]:
    if isinstance(entry, str) and entry:
        return entry, None
    if (
        isinstance(entry, dict)
        and set(entry) == {"path", "sha256"}
        and isinstance(entry["path"], str)
        and isinstance(entry["sha256"], str)
    ):
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
            isinstance(e, dict)
            and set(e) == {"path", "sha256"}
            and isinstance(e["path"], str)
            and isinstance(e["sha256"], str)
            and _SHA256.fullmatch(e["sha256"])
            for e in value
        ):
            raise PolicyError(f"{key}: expected a list of component files or folders")
        return [dict(e) for e in value]


@dataclass(frozen=True)
class ParameterValues:
    """A component's parameter values (checked against its schema once the registry is known)."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, dict):
            raise PolicyError(f"{key}: expected a mapping of parameter names to values")
        for name, item in value.items():
            if not isinstance(name, str) or not isinstance(item, bool | int | float | str):
                raise PolicyError(f"{key}.{name}: expected a number, true/false or a choice")
        return dict(value)


_compiled_modules: dict[str, Any] = {}


def _compiled(text: str, name: str, location: str) -> Any:
    """The macro `name` of a component's text, compiled once per text, in the environment of
    every template (StrictUndefined, `lit`, `ident`)."""
    digest = _sha256(text)
    if digest not in _compiled_modules:
        _compiled_modules[digest] = _module(text, location)
    module = _compiled_modules[digest]
    macros = sorted(n for n in dir(module) if isinstance(getattr(module, n), jinja2.runtime.Macro))
    if macros != [name]:
        raise PolicyError(
            f"{location}: must define one macro, {name} (private helpers start with _), "
            f"not {', '.join(macros) or 'none'}"
        )
    return getattr(module, name)


def _module(text: str, location: str) -> Any:
    try:
        module = environment().from_string(text).module
    except jinja2.TemplateSyntaxError as exc:
        raise PolicyError(f"{location}:{exc.lineno}: {exc.message}") from None
    except jinja2.TemplateError as exc:
        raise PolicyError(f"{location}: {exc}") from None
    if str(module).strip():
        raise PolicyError(f"{location}: renders text outside its macro")
    return module


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
_CUT = {"query_id": "VARCHAR", "source": "VARCHAR", "parent_id": "VARCHAR", "score": "DOUBLE"}
_LOG = {"query_id": "VARCHAR", "query_text": "VARCHAR"}
# a plugin rendered alone, as fused.sql reads it, to check it before it runs: the query, the
# relation it reads and the inputs its macro is given
_PROBES: dict[str, tuple[str, dict[str, dict[str, str]], tuple[Any, ...]]] = {
    "normalizer": ("SELECT {sql} AS norm_score FROM list_stats", {"list_stats": _STATS}, ()),
    "aligner": (
        "SELECT query_id, source, parent_id, {sql} AS raw_score FROM cut "
        "GROUP BY query_id, source, parent_id",
        {"cut": _CUT},
        ("score",),
    ),
    "fusion": (
        "SELECT query_id, target_id, {sql} AS fused_score FROM per_source "
        "GROUP BY query_id, target_id",
        {"per_source": _PER_SOURCE},
        (_probe_source_sum,),
    ),
    "query_rule": (
        "SELECT query_id, {sql} AS matched FROM retrieval_log",
        {"retrieval_log": _LOG},
        ("coalesce(query_text, '')",),
    ),
}
# the columns a plugin may read, by kind (docs/fuse.md lists them)
COLUMNS: dict[str, tuple[str, ...]] = {
    kind: tuple(next(iter(schema.values()))) for kind, (_, schema, _) in _PROBES.items()
}


def check_call(call: Call, key: str) -> None:
    """Render `call`'s plugin alone, as fused.sql would, and put it through the checks of every
    template (parse, lint, qualify against the columns its kind may read): an error names the
    plugin's file and the recipe key that uses it."""
    component = call.component
    template, schema, inputs = _PROBES[component.kind]
    try:
        sql = call(*inputs)
    except (jinja2.TemplateError, DuckscoreError) as exc:
        message = " ".join(str(exc).split())
        raise PolicyError(f"{key}: {component.location}: {message}") from None
    rendered = RenderedSQL(component.name, template.format(sql=sql), label=component.location)
    try:
        check_sql(rendered, schema)
    except DuckscoreError as exc:
        raise PolicyError(f"{key}: {exc}") from None


def calls(
    registry_: Registry,
    p: Mapping[str, Any],
    used: Iterable[tuple[str, str]],
) -> dict[str, dict[str, Call]]:
    """The used plugins (kind, name) of recipe parameters `p`, with their component_params."""
    given = p.get("component_params") or {}
    bound: dict[str, dict[str, Call]] = {kind: {} for kind in KINDS}
    for kind, name in used:
        component = registry_.components[(kind, name)]
        if not component.builtin:
            params = component.resolved(given.get(name, {}), f"component_params.{name}")
            bound[kind][name] = Call(component, params)
    return bound
