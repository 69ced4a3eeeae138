"""Fusion components (issue 48 §3; seed 003 §2.1, "plug-in first"): normalisers, aligners,
fusion methods and query-analyzer rules, each a name, a one-line description and a declared
parameter schema; and the component file a plugin is.

A component file (read by fusion/component_file.py) is SQL/Jinja holding one macro named like
the component, after a Jinja comment whose YAML declares it (docs/fuse.md, "Writing a component"):

    {#- kind: normalizer, name, description, parameters: {p: {type, min, max, default, …}} -#}
    {% macro name(params) %}…{% endmacro %}

The built-ins are component files too, sql/fuse/components/<kind>/<name>.sql, whose header
gives `recipe_keys` (the recipe keys they read, bound as their params) in place of `parameters`,
and `required_keys`, those of them a recipe using it must set (bounds: normalizer_params.bounds).
fusion.method ltr alone is declared in sql/fuse/components/builtins.yaml: it has no expression a
macro could return, its score being a model computed by stages of fused.sql of its own.

What fused.sql does for a component beyond calling its macro follows its header, never its name:
a normaliser's `needs` (the columns computed for it), `fills_candidates` (every candidate made
present in its lists, at the value its macro gives with `missing`); a fusion method's `ranks`,
`weighted` and `additive` (missing: zero needs no grid). Where components come from, and how a
recipe's are checked: fusion/plugins.py."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import jinja2

from ..core.errors import PolicyError
from ..core.policy import Choice, Flag, Number
from ..core.render import environment

KINDS = ("normalizer", "aligner", "fusion", "query_rule")
BUILTIN = "built-in"
# what each kind's macro takes, after `params`: the SQL it reads (docs/fuse.md); a fusion
# method's may also take `contribution=false`: called true, a list's contribution (norm_score
# when it takes none)
CONTRIBUTION = "contribution"
INPUTS = {
    "normalizer": (),
    "aligner": ("value",),
    "fusion": ("source_sum",),
    "query_rule": ("query_text",),
}
# a component named like a Jinja constant names its macro with a trailing underscore (none_)
_CONSTANTS = ("none", "true", "false", "None", "True", "False")
# what a normaliser may declare it reads beyond the list's own columns, with their types: the
# query's candidates |C| (fused.sql counts them), the list's quantiles at normalizer_params'
# quantile_p_lo and quantile_p_hi (fused.sql windows them)
NEEDS = {"n_candidates": "BIGINT", "s_q_lo": "DOUBLE", "s_q_hi": "DOUBLE"}
# a normaliser's macro's argument after params when it declares fills_candidates: called true,
# the ŝ of a candidate its list does not hold
MISSING = "missing"
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
    # a built-in's recipe keys that must be set (not null) when a recipe uses it
    required_keys: tuple[str, ...] = ()
    default_missing: str = ""  # a fusion method's: zero or skip
    weighted: bool = False  # a fusion method that reads the source weights
    ranks: bool = False  # a fusion method over the lists' ranks: counts ranked hits only
    needs: tuple[str, ...] = ()  # a normaliser's columns beyond the list's: NEEDS
    # a normaliser that makes every candidate present in its lists (for a fusion over scores)
    fills_candidates: bool = False
    additive: bool = False  # a fusion method a list without the item, at ŝ 0, leaves as it is
    text: str | None = None  # None: a built-in without SQL of its own (builtins.yaml)
    location: str = BUILTIN

    @property
    def needs_candidates(self) -> bool:
        return "n_candidates" in self.needs

    @property
    def needs_quantiles(self) -> bool:
        return "s_q_lo" in self.needs or "s_q_hi" in self.needs

    @property
    def source_keys(self) -> tuple[str, ...]:
        """The keys of a source's entry a built-in normaliser reads (its recipe keys
        `sources.<name>.<key>`: minmax's lower_bound, upper_bound)."""
        return tuple(key[len(_SOURCES) :] for key in self.recipe_keys if key.startswith(_SOURCES))

    @property
    def builtin(self) -> bool:
        return self.origin == BUILTIN

    @property
    def where(self) -> str:
        return BUILTIN if self.builtin else self.location

    @property
    def macro_name(self) -> str:
        return f"{self.name}_" if self.name in _CONSTANTS else self.name

    @property
    def sha256(self) -> str | None:
        return None if self.text is None else sha256_of(self.text)

    def macro(self) -> Any:
        """The component's Jinja macro."""
        if self.text is None:
            raise PolicyError(f"{self.kind} {self.name} is built in: it has no macro of its own")
        return _compiled(self.text, self.macro_name, self.location)

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
        if self.required_keys:
            record["required_keys"] = list(self.required_keys)
        if self.kind == "fusion":
            record |= {"default_missing": self.default_missing, "weighted": self.weighted}
            record |= {"ranks": self.ranks} if self.ranks else {}
            record |= {"additive": self.additive} if self.additive else {}
        if self.needs:
            record["needs"] = list(self.needs)
        if self.fills_candidates:
            record["fills_candidates"] = True
        if self.builtin:
            return record | ({"file": self.location} if self.text is not None else {})
        return record | {"sha256": self.sha256}


@dataclass(frozen=True)
class Call:
    """A component's macro with its params bound, as fused.sql calls it: `call(*inputs)`. A
    plugin's params are its parameters' values; a built-in's, the recipe keys it reads, each by
    its last part (`normalizer_params.eps`: `eps`)."""

    component: Component
    params: dict[str, Any]

    def __call__(self, *inputs: Any) -> str:
        return str(self.component.macro()(self.params, *inputs))

    def of_source(self, source: Mapping[str, Any]) -> Call:
        """This normaliser for the source whose recipe entry is `source`: a built-in's params
        and the keys of it the built-in reads (`sources.<name>.lower_bound`)."""
        keys = self.component.source_keys
        return replace(
            self, params=self.params | {key: source[key] for key in keys if key in source}
        )

    def contribution(self) -> str:
        """A fusion method's contribution of a list (per_source's), a score or rank term."""
        if self.component.text is None or CONTRIBUTION not in self.component.macro().arguments:
            return "norm_score"
        return str(self.component.macro()(self.params, **{CONTRIBUTION: True}))

    def missing_score(self) -> str:
        """A normaliser's ŝ of a candidate its list does not hold (fills_candidates): an
        expression over the list's row `ql` of fused.sql's query_lists."""
        return str(self.component.macro()(self.params, **{MISSING: True}))


_SOURCES = "sources.<name>."


def builtin_call(component: Component, recipe: Mapping[str, Any]) -> Call:
    """A built-in bound to the values of recipe parameters `recipe` at its recipe keys (those
    left out left out; a source's own keys are bound by Call.of_source)."""
    params: dict[str, Any] = {}
    for key in component.recipe_keys:
        *parents, last = key.split(".")
        section = _section(recipe, parents)
        if not key.startswith(_SOURCES) and last in section:
            params[last] = section[last]
    return Call(component, params)


def recipe_value(recipe: Mapping[str, Any], key: str) -> Any:
    """The value of recipe parameters `recipe` at dotted `key` (None when left out)."""
    *parents, last = key.split(".")
    return _section(recipe, parents).get(last)


def _section(recipe: Mapping[str, Any], parents: list[str]) -> Mapping[str, Any]:
    section: Any = recipe
    for part in parents:
        section = section.get(part, {}) if isinstance(section, Mapping) else {}
    return section if isinstance(section, Mapping) else {}


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_compiled_modules: dict[str, Any] = {}  # by the sha256 of their text


def _compiled(text: str, name: str, location: str) -> Any:
    """The macro `name` of a component's text, compiled once per text, in the environment of
    every template (StrictUndefined, `lit`, `ident`)."""
    digest = sha256_of(text)
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
