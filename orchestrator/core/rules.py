"""What a policy's parameters may be: the rules a capability's spec is written in (a key's
rule checks its value and returns it as the policy holds it)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from .errors import PolicyError


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
    """A pair [lo, hi] of finite numbers with lo <= hi, or null (lo = hi is a zero spread);
    `spread`: lo < hi (a range something is divided by)."""

    spread: bool = False

    def check(self, key: str, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise PolicyError(f"{key}: expected [lo, hi] or null, got {value!r}")
        lo, hi = (Number().check(f"{key}[{i}]", v) for i, v in enumerate(value))
        if lo > hi or (self.spread and lo == hi):
            relation = "be below" if self.spread else "not exceed"
            raise PolicyError(f"{key}: lo ({lo!r}) must {relation} hi ({hi!r})")
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


@dataclass(frozen=True)
class Omissible:
    """A key a file may leave out, and is then absent from the parameters (a recipe source's
    `index_dir`, which describes the source and computes nothing)."""

    rule: Rule


class Leaf(Protocol):
    """A parameter's rule (Number, Choice, Bounds …, or a capability's own): the checked value."""

    def check(self, key: str, value: Any) -> Any: ...


Spec: TypeAlias = Mapping[str, "Rule"]
Rule: TypeAlias = "Leaf | Spec | MapOf | ListOf | Omissible"  # what a key of a policy may be
