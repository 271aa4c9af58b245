"""A small name -> object registry: raises on duplicates, sorted listing, did-you-mean on a miss."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from nagkit.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, hint: str | None = None):
        self.kind = kind
        self.hint = hint
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        """``reg.register("x", obj)`` or as a decorator ``@reg.register("x")``."""

        def _add(o: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = o
            return o

        return _add(obj) if obj is not None else _add

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._items, hint=self.hint) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
