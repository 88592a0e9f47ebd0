"""Container fields made on first use.

A run's state holds some sixty containers (sets of ids, counters, lists of
refusals), and a run touches few of them. A set, a list, a counter or a
deque is tracked by the garbage collector from the moment it exists, empty
or not, and a run lives long enough under concurrent replies for its state
to reach the oldest generation: each empty container is then walked at
every full collection (100 more per run cost a full collection more over
500 concurrent replies). A ``lazy`` field exists only once the run reads or
writes it; reading it is reading an attribute, as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

T = TypeVar("T")

_FACTORY = "agentscope_harness.lazy"
"""The key of a lazy field's factory in its ``dataclasses.field`` metadata."""


def lazy(factory: Callable[[], T]) -> T:
    """A dataclass field of a ``LazyFields`` class made by ``factory`` on
    its first read (not an argument of the constructor)."""
    return dataclasses.field(init=False, metadata={_FACTORY: factory})


def lazy_names(cls: type) -> frozenset[str]:
    """The names of ``cls``'s lazy fields."""
    return frozenset(_factories(cls))


def made(instance: LazyFields, name: str) -> Any:
    """The lazy field ``name`` of ``instance`` if it was made, else ``None``:
    a read on the hot path that must not make an empty container the run
    then keeps (one more object every full collection walks)."""
    return instance.__dict__.get(name)


_BY_CLASS: dict[type, dict[str, Callable[[], Any]]] = {}


def _factories(cls: type) -> dict[str, Callable[[], Any]]:
    found = _BY_CLASS.get(cls)
    if found is None:
        found = _BY_CLASS[cls] = {
            f.name: f.metadata[_FACTORY] for f in dataclasses.fields(cls) if _FACTORY in f.metadata
        }
    return found


class LazyFields:
    """Base of a dataclass with ``lazy`` fields: a missing one is made, kept
    and returned (any other missing attribute is an ``AttributeError``)."""

    __slots__ = ()

    if not TYPE_CHECKING:  # to the type checker, a misspelt attribute stays an error

        def __getattr__(self, name: str) -> Any:
            factory = _factories(type(self)).get(name)
            if factory is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            value = factory()
            object.__setattr__(self, name, value)
            return value


__all__ = ["LazyFields", "lazy", "lazy_names", "made"]
