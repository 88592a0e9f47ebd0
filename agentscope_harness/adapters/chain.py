"""Freeing what AgentScope's middleware chains hold, once they are done.

AgentScope builds each middleware chain call as a local ``execute_chain``
closure that refers to itself through its own cell: a reference cycle. Its
defaults hold the call's arguments (the messages of a model call, the copied
tool input of a permission check), so they outlive the call until the
garbage collector finds them; under hundreds of concurrent replies those
collections were most of what AgentScope charges for any middleware. The
outermost layer of a chain knows that nothing calls the chain again once it
returns, so it breaks the cycle and reference counting frees it at once.
"""

from __future__ import annotations

from types import CodeType
from typing import Any

_CELLS: dict[CodeType, tuple[int, int] | None] = {}
"""Per handler code: the positions of its ``index`` and ``execute_chain``
cells (``None``: not a chain handler this module knows)."""


def release_chain(next_handler: Any) -> None:
    """Break the self-reference of the chain ``next_handler`` belongs to,
    when the caller is its outermost layer (index 0) and has finished with
    it; a handler of any other shape is left alone."""
    closure = getattr(next_handler, "__closure__", None)
    if not closure:
        return
    code = next_handler.__code__
    try:
        cells = _CELLS[code]
    except KeyError:
        cells = _CELLS[code] = _cell_positions(code)
    if cells is None:
        return
    index, chain = closure[cells[0]], closure[cells[1]]
    try:
        if index.cell_contents == 0:
            chain.cell_contents = None
    except ValueError:  # an empty cell: nothing to release
        return


def _cell_positions(code: CodeType) -> tuple[int, int] | None:
    names = code.co_freevars
    if "index" not in names or "execute_chain" not in names:
        return None
    return names.index("index"), names.index("execute_chain")
