"""Freeing AgentScope's middleware chains as soon as nothing can call them.

AgentScope builds each middleware chain call as a local ``execute_chain``
closure that refers to itself through its own cell: a reference cycle. Its
defaults hold the call's arguments (the messages of a model call, the copied
tool input of a permission check), so they outlive the call until the
garbage collector finds them; under hundreds of concurrent replies those
collections were most of what AgentScope charges for any middleware.

A chain may be called after the layer that saw it has returned (an inner
middleware reading a stream lazily, retrying it, or running the tool in a
background task), so no layer can tell when the chain is done. Reference
counts can: once the function is referenced by its own cell alone and the
cell by the function alone, no frame, handler or task can reach the chain
any more, and it is garbage the collector would free. The harness notes the
chains of a run it takes part in and, at each of the run's harness steps and
at the reply's end, breaks the cycle of those that have become such garbage,
so reference counting frees them at once. (The reply's own chain outlives
the reply's last harness step and is left to the collector: one per reply.)
"""

from __future__ import annotations

import sys
import weakref
from types import CodeType
from typing import Any

_COUNTED = sys.implementation.name == "cpython"
"""Only CPython's reference counts say that nothing else holds the chain."""

_UNREACHABLE = 3
"""``sys.getrefcount`` of a chain function or its cell inside ``_free`` when
only the other holds it: that one reference, ``_free``'s local, the argument."""

_SELF_CELL: dict[CodeType, int | None] = {}
"""Per code object: the position of its ``execute_chain`` cell, if any."""


class Chains:
    """The middleware chains of one run, until each is freed."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[weakref.ref[Any]] = []

    def note(self, next_handler: Any) -> None:
        """Free the chains that have become garbage since the run's last
        harness step (the sooner, the less a collection has to traverse),
        and remember the chain ``next_handler`` belongs to (any other shape
        of handler is ignored)."""
        if not _COUNTED:
            return
        self.sweep()
        cell = _cell(next_handler)
        chain = cell.cell_contents if cell is not None else None
        # its defaults (the call's arguments) stay: a middleware that drops a
        # key from ``input_kwargs`` gets the default from the chain
        if chain is not None and _cell(chain) is cell:  # refers to itself: AgentScope's chain
            self._pending.append(weakref.ref(chain))

    def sweep(self) -> None:
        """Free the noted chains that nothing can call any more."""
        if self._pending:
            self._pending = [ref for ref in self._pending if not _free(ref)]


def _cell(function: Any) -> Any:
    """``function``'s closure cell named ``execute_chain`` (``None``: none)."""
    closure = getattr(function, "__closure__", None)
    if not closure:
        return None
    code = function.__code__
    try:
        at = _SELF_CELL[code]
    except KeyError:
        names = code.co_freevars
        at = _SELF_CELL[code] = names.index("execute_chain") if "execute_chain" in names else None
    return None if at is None else closure[at]


def _free(ref: weakref.ref[Any]) -> bool:
    """Whether the chain is gone: already freed, or unreachable but for its
    own cycle, which is then broken."""
    chain = ref()
    if chain is None:
        return True
    cell = _cell(chain)
    if sys.getrefcount(chain) != _UNREACHABLE or sys.getrefcount(cell) != _UNREACHABLE:
        return False
    cell.cell_contents = None
    return True
