"""Runs the hooks of one point: priority order, a refusal ends the chain, the
escape latch of efficiency gates, the failure policy (safety fails closed,
the rest fail open) and shadow mode (decide and record, enforce nothing)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .context import HookContext
from .registry import HOOK_POINTS, HookRejectSignal, HookSpec
from .sentinels import format_sentinel

log = logging.getLogger("agentscope_harness")

_timeout = getattr(asyncio, "timeout", None)


@dataclass(frozen=True)
class Refusal:
    """A call the chain refused: the sentinel text the model will read."""

    hook: str
    code: str
    text: str


class HookRunner:
    """Per-point hook lists, sorted once at construction."""

    def __init__(
        self,
        specs: Iterable[HookSpec],
        escape_after_rejects: int,
        hook_timeout_s: float | None,
        shadow: bool,
    ) -> None:
        specs = list(specs)
        self.by_point: dict[str, tuple[HookSpec, ...]] = {
            point: tuple(sorted((s for s in specs if s.point == point), key=lambda s: s.sort_key))
            for point in HOOK_POINTS
        }
        self.escape_after_rejects = escape_after_rejects
        self.hook_timeout_s = hook_timeout_s
        self.shadow = shadow

    async def run(self, point: str, ctx: HookContext) -> Refusal | None:
        """Run ``point``'s hooks on ``ctx``; the enforced refusal, if any."""
        for spec in self.by_point[point]:
            ctx.hook_name = spec.name
            try:
                result = spec.fn(ctx)
                if result is not None and inspect.isawaitable(result):
                    await self._settle(result)
            except HookRejectSignal as signal:
                refusal = self._rejected(spec, signal, ctx)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the failure policy
                refusal = self._failed(spec, exc, ctx)
            else:
                continue
            if refusal is not None:
                for undo in reversed(ctx.undo):
                    undo()
                ctx.undo.clear()
                return refusal
        return None

    async def _settle(self, awaitable: Any) -> None:
        """Await an async hook within ``hook_timeout_s``: in this task (no
        extra task per call, as ``wait_for`` would create) where asyncio has
        ``timeout`` (3.11+)."""
        if self.hook_timeout_s is None:
            await awaitable
        elif _timeout is not None:
            async with _timeout(self.hook_timeout_s):
                await awaitable
        else:  # pragma: no cover - Python 3.10
            await asyncio.wait_for(awaitable, self.hook_timeout_s)

    def _rejected(
        self, spec: HookSpec, signal: HookRejectSignal, ctx: HookContext,
    ) -> Refusal | None:
        facts = ctx.run.facts
        tool = ctx.tool.name if ctx.tool else None
        key = spec.escape_key
        if key is not None and not signal.hard:
            if key in facts.latched:
                return None
            if facts.gate_reject_counts[key] >= self.escape_after_rejects:
                facts.latched.add(key)
                ctx.harness._record(
                    ctx.run, spec.name, spec.point, "allow_escape",
                    code=signal.code, tool=tool,
                    detail=f"latched open after {facts.gate_reject_counts[key]} refusals",
                )
                return None
            batch = ctx.tool.batch if ctx.tool else None
            if (key, batch) not in facts.reject_batches:
                facts.reject_batches.add((key, batch))
                facts.gate_reject_counts[key] += 1
        text = signal.message if signal.raw else format_sentinel(
            signal.code, signal.message, signal.ref,
        )
        ctx.harness._record(
            ctx.run, spec.name, spec.point, "refuse",
            code=signal.code, tool=tool, detail=signal.message,
        )
        if self.shadow:
            return None
        return Refusal(hook=spec.name, code=signal.code, text=text)

    def _failed(self, spec: HookSpec, exc: Exception, ctx: HookContext) -> Refusal | None:
        timed_out = isinstance(exc, (asyncio.TimeoutError, TimeoutError))
        what = (
            f"timed out after {self.hook_timeout_s}s" if timed_out
            else f"raised {type(exc).__name__}: {exc}"
        )
        log.warning("harness hook %s at %s %s", spec.name, spec.point, what)
        tool = ctx.tool.name if ctx.tool else None
        ctx.harness._record(
            ctx.run, spec.name, spec.point, "error",
            code="policy_error", tool=tool, detail=what,
        )
        if not spec.fail_closed:
            return None  # fail open
        text = format_sentinel(
            "policy_error",
            f"The safety check {spec.name} could not run, so this was withheld. "
            "Do not retry it; tell the user it could not be done now.",
        )
        ctx.harness._record(
            ctx.run, spec.name, spec.point, "refuse",
            code="policy_error", tool=tool, detail="fail-closed",
        )
        if self.shadow:
            return None
        return Refusal(hook=spec.name, code="policy_error", text=text)
