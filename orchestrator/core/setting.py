"""A setting declared once, with its field: the flag that gives it on the command line, its help
and its constraints (issue 48 §2). `cli/options.py: dataclass_options` builds the click options
of a dataclass from these; `check_settings` holds a built one to the same constraints, however
it was built (flags, Python keywords, JSON)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .errors import OptionError

SETTING = "duckscore.setting"  # the key of a field's metadata that holds its Setting


@dataclass(frozen=True)
class Setting:
    """`flag` (`--explain/--no-explain`: a switch with its negation), `help`, `metavar`; the
    least value (`minimum`) or the values allowed (`choices`); `repeated`: a tuple of values,
    the flag given once for each; `inverted`: a flag that, given, makes the field False
    (`--unsorted` for `sorted_outputs`)."""

    flag: str
    help: str
    metavar: str | None = None
    minimum: int | None = None
    choices: tuple[str, ...] | None = None
    repeated: bool = False
    inverted: bool = False

    @property
    def option(self) -> str:
        """The flag's first spelling: what an error names."""
        return self.flag.split("/")[0]

    def refusal(self, value: Any) -> str | None:
        """Why `value` is not one this setting takes (one line), or None."""
        if self.minimum is not None and value is not None and value < self.minimum:
            return f"{self.option} must be at least {self.minimum}, got {value}"
        if self.choices is not None and value not in self.choices:
            return f"{self.option} {value!r}: one of {', '.join(self.choices)}"
        return None


def setting(default: Any, flag: str, help: str, **how: Any) -> Any:
    """A dataclass field with its default, declared as a Setting (see Setting)."""
    return field(default=default, metadata={SETTING: Setting(flag, help, **how)})


def settings_of(cls: Any) -> dict[str, Setting]:
    """The declared settings of a dataclass, by field name, in the fields' order."""
    return {f.name: f.metadata[SETTING] for f in dataclasses.fields(cls) if SETTING in f.metadata}


def check_settings(instance: Any) -> None:
    """The first value of `instance` its Setting refuses, raised as one line (OptionError)."""
    for name, declared in settings_of(instance).items():
        if refusal := declared.refusal(getattr(instance, name)):
            raise OptionError(refusal)
