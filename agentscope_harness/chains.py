"""AgentScope's middleware chains, freed by reference counting.

AgentScope builds each middleware chain call as a local ``execute_chain``
closure that refers to itself through its own cell: a reference cycle. It
holds the call's arguments (its defaults: the messages of a model call, the
copied tool input of a permission check) until the garbage collector finds
it; under hundreds of concurrent replies those collections were most of what
AgentScope charges for any middleware.

When a harness layer has finished with a chain, ``release`` puts in the
chain's own cell, in place of the closure, a ``_Rebuilt``: an object that
runs the same code with the same arguments and cells, but holds no
reference to that cell. The closure is then referenced only by the frames
still running it, and everything is freed when they end. The chain stays
callable: an inner middleware may still call it after the harness's layer
returned (a lazily read or retried stream, a tool run by a background task,
an adapter subclass retrying through ``super()``); such a call runs the same
code, rebuilt for the call. One difference remains, for a handler made by
such a late call: it runs the released chain, not one AgentScope's model-call
loop defined later for a retry or a fallback (it differs only for a
middleware that leaves ``current_model`` to the chain's default).
"""

from __future__ import annotations

import asyncio
from types import CellType, CodeType, FunctionType
from typing import Any, NamedTuple

_SELF_CELL: dict[CodeType, int | None] = {}
"""Per code object: the position of its ``execute_chain`` cell, if any."""


class _Rebuilt(NamedTuple):
    """A chain closure's code, arguments and cells, but for the cell that
    refers to the chain: each call runs a function built afresh, whose own
    cell holds this object. Nothing here holds the function, so it is freed
    with its frames (no cycle, even when the chain is called again). A
    tuple: made in one step, as every chain call a harness layer makes
    releases one."""

    code: CodeType
    globals: dict[str, Any]
    defaults: tuple[Any, ...] | None
    kwdefaults: dict[str, Any] | None
    qualname: str
    before: tuple[CellType, ...]
    """The cells before the chain's own, and after it."""
    after: tuple[CellType, ...]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function = FunctionType(
            self.code, self.globals, self.code.co_name, self.defaults,
            (*self.before, CellType(self), *self.after),
        )
        function.__kwdefaults__ = self.kwdefaults
        function.__qualname__ = self.qualname
        return function(*args, **kwargs)


def release(next_handler: Any) -> None:
    """Put a ``_Rebuilt`` in place of the chain ``next_handler`` calls,
    once this layer has finished with it (any other shape of handler, or a
    chain already released, is left as it is)."""
    cell = _cell(next_handler)
    if cell is None:
        return
    try:
        chain = cell.cell_contents
    except ValueError:  # an empty cell
        return
    if type(chain) is not FunctionType or _cell(chain) is not cell:  # not a closure referring to itself
        return
    cells, at = chain.__closure__ or (), _SELF_CELL[chain.__code__]
    assert at is not None  # its own cell was found there
    cell.cell_contents = _Rebuilt(
        chain.__code__, chain.__globals__, chain.__defaults__, chain.__kwdefaults__, chain.__qualname__,
        cells[:at], cells[at + 1:],
    )


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


async def close_stream(stream: Any) -> None:
    """Close the stream a harness layer stops reading (its own stream
    closed, cancelled, or settled), as AgentScope closes its own layers': a
    provider's HTTP stream left to the collector goes on generating, and
    billing, after its run was settled. One that another task is reading,
    or that breaks as it closes, is left as it is."""
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except RuntimeError:  # running (read elsewhere) or closed mid-chunk
        pass
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise  # this task's own cancellation
