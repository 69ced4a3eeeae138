"""A setting declared once, with its field: the flag that gives it on the command line, its help
and its constraints (issue 48 §2). `cli/declared.py: dataclass_options` builds the click options
of a dataclass from these; `check_settings` holds a built one to the same constraints, however
it was built (flags, Python keywords, JSON), and then to the checks across its fields that the
dataclass names in `cross_checks`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import OptionError

SETTING = "duckscore.setting"  # the key of a field's metadata that holds its Setting

# a check across the fields of a built dataclass: why its values do not go together (one line
# naming the flags), or None
CrossCheck = Callable[[Any], str | None]


@dataclass(frozen=True)
class Setting:
    """`flag` (`--explain/--no-explain`: a switch with its negation), `help`, `metavar`; the
    bounds of the value (`minimum`, `maximum`; `min_open`, `max_open`: the bound itself is
    refused) or the values allowed (`choices`); `repeated`: a tuple of values, the flag given
    once for each; `inverted`: a flag that, given, makes the field False (`--unsorted` for
    `sorted_outputs`)."""

    flag: str
    help: str
    metavar: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_open: bool = False
    max_open: bool = False
    choices: tuple[str, ...] | None = None
    repeated: bool = False
    inverted: bool = False

    @property
    def option(self) -> str:
        """The flag's first spelling: what an error names."""
        return self.flag.split("/")[0]

    def refusal(self, value: Any) -> str | None:
        """Why `value` is not one this setting takes (one line), or None."""
        if value is not None and not self._within_bounds(value):
            return f"{self.option} must be {self._bounds()}, got {value}"
        if self.choices is not None and value not in self.choices:
            return f"{self.option} {value!r}: one of {', '.join(self.choices)}"
        return None

    def _within_bounds(self, value: Any) -> bool:
        low, high = self.minimum, self.maximum
        above = low is None or (value > low if self.min_open else value >= low)
        below = high is None or (value < high if self.max_open else value <= high)
        return above and below

    def _bounds(self) -> str:
        """The bounds in words: `at least 1`, `below 1`, `in (0, 1]`."""
        low, high = self.minimum, self.maximum
        if high is None:
            return f"above {low}" if self.min_open else f"at least {low}"
        if low is None:
            return f"below {high}" if self.max_open else f"at most {high}"
        return f"in {'(' if self.min_open else '['}{low}, {high}{')' if self.max_open else ']'}"


def setting(default: Any, flag: str, help: str, **how: Any) -> Any:
    """A dataclass field with its default, declared as a Setting (see Setting)."""
    return field(default=default, metadata={SETTING: Setting(flag, help, **how)})


def settings_of(cls: Any) -> dict[str, Setting]:
    """The declared settings of a dataclass, by field name, in the fields' order."""
    return {f.name: f.metadata[SETTING] for f in dataclasses.fields(cls) if SETTING in f.metadata}


def check_setting(cls: Any, name: str, value: Any) -> None:
    """`value` held to the Setting of the field `name` of `cls`: for a function that takes that
    setting alone (`recalibrate` a calibration's --folds and --seed)."""
    _refuse(settings_of(cls)[name].refusal(value))


def check_settings(instance: Any) -> None:
    """The first value of `instance` its Setting refuses, then the first of its `cross_checks`
    that refuses the values together, raised as one line (OptionError)."""
    for name, declared in settings_of(instance).items():
        _refuse(declared.refusal(getattr(instance, name)))
    check: CrossCheck
    for check in getattr(instance, "cross_checks", ()):
        _refuse(check(instance))


def _refuse(refusal: str | None) -> None:
    if refusal is not None:
        raise OptionError(refusal)
