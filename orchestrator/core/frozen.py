"""Read-only views of a loaded policy's parameter tree: a FrozenMap for each mapping and a
FrozenList for each list, all the way down, so no consumer can change what another reads.

A view equals the plain value it was made from (`FrozenMap == dict`, `FrozenList == list`), and
`thaw` gives that plain value back, a new copy: what templates, canonical JSON, YAML dumps,
manifests and bound query parameters read. A changed policy is built from an explicit copy
(`parameters.thawed() | {...}`), never by writing into the view."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, SupportsIndex, overload


class FrozenMap(Mapping[str, Any]):
    """A mapping that cannot be changed, its values frozen too (see `freeze`); printed as the
    plain mapping."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = {key: freeze(value) for key, value in (items or {}).items()}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(self._items)  # as the plain mapping prints

    def thawed(self) -> dict[str, Any]:
        """The plain tree: dicts and lists, a new copy."""
        return {key: thaw(value) for key, value in self._items.items()}


class FrozenList(tuple[Any, ...]):
    """A list that cannot be changed, its items frozen too; equal to (and printed as) the list
    it was made from, a slice of it a FrozenList."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return list(self) == other
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> FrozenList: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        found = tuple.__getitem__(self, index)
        return FrozenList(found) if isinstance(index, slice) else found

    def __repr__(self) -> str:
        return repr(list(self))  # as the plain list prints

    def thawed(self) -> list[Any]:
        """The plain list, its items plain too, a new copy."""
        return [thaw(item) for item in self]


def freeze(value: Any) -> Any:
    """`value` with every mapping a FrozenMap and every list (or tuple) a FrozenList; what is
    frozen already is returned as it is."""
    if isinstance(value, FrozenMap | FrozenList):
        return value
    if isinstance(value, Mapping):
        return FrozenMap(value)
    if isinstance(value, list | tuple):
        return FrozenList(freeze(item) for item in value)
    return value


def thaw(value: Any) -> Any:
    """`value` with every FrozenMap a dict and every FrozenList a list, inside plain dicts and
    lists too: a new plain tree (other objects, plain tuples among them, as they are)."""
    if isinstance(value, FrozenMap):
        return value.thawed()
    if isinstance(value, FrozenList):
        return value.thawed()
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value
