"""One model call under the run's limits: served by the budget tier's model,
priced before it is made (an unpriced model never runs on a capped budget),
bounded by the time left before the deadline, and counted.

A call cut short by the deadline, or refused for an unpriced model, answers
with the run's stop text as the model's final response: AgentScope then ends
the reply normally, and the run's facts say why (``incomplete``, reason
``deadline`` or ``unpriced_model``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentscope.message import TextBlock
from agentscope.model import ChatResponse, ChatUsage
from agentscope.model._model_response import FinishedReason

from .context import reason_words
from .prefix import observe, over_request_cap
from .report import TerminalState

if TYPE_CHECKING:
    from .harness import Harness
    from .run_state import RunState


@dataclass
class _Attempts:
    """The attempts of one model call so far (the first is counted by the
    guard); ``depth``: inside a counted ``_call_api`` (a subclass's override
    calling its parent's is one attempt)."""

    run: RunState
    made: int = 0
    depth: int = 0


_ATTEMPTS: ContextVar[_Attempts | None] = ContextVar("harness_model_attempts", default=None)
_COUNTING = "__harness_counts_attempts__"
"""Marks a ``_call_api`` wrapped by ``_count_attempts``."""


def _count_attempts(model: Any) -> None:
    """AgentScope retries a failed request inside the model's ``__call__``,
    below every middleware. ``model_calls`` counts attempts: the class that
    defines the model's ``_call_api`` (called once per attempt) gets it
    wrapped, once, to count each retry into the harnessed call's run. The
    class, not the instance: a copy of the model stays a model of its own;
    outside a harnessed call the wrapper only passes through."""
    owner = next((c for c in type(model).__mro__ if "_call_api" in vars(c)), None)
    if owner is None:
        return
    inner = vars(owner)["_call_api"]
    if getattr(inner, _COUNTING, False) or not inspect.iscoroutinefunction(inner):
        return

    @functools.wraps(inner)
    async def attempt(self: Any, *args: Any, **kwargs: Any) -> Any:
        counting = _ATTEMPTS.get()
        if counting is None:
            return await inner(self, *args, **kwargs)
        if counting.depth == 0:
            counting.made += 1
            if counting.made > 1:
                counting.run.add_model_call()
        counting.depth += 1
        try:
            return await inner(self, *args, **kwargs)
        finally:
            counting.depth -= 1

    setattr(attempt, _COUNTING, True)
    try:
        setattr(owner, "_call_api", attempt)  # noqa: B010 - a class attribute mypy cannot see
    except (AttributeError, TypeError):  # a class that cannot be changed: its retries stay uncounted
        return


class ModelGuard:
    """The harness's side of ``on_model_call`` for one Harness."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    async def call(self, run: RunState, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any]) -> Any:
        """Serve one model call (its retries inside AgentScope are counted by ``_count_attempts``)."""
        swap = self.harness.tier_model(run)
        if swap is not None:
            input_kwargs["current_model"] = swap
        model = input_kwargs.get("current_model") or agent.model
        services = self.harness.services
        tokens = observe(
            services, run, input_kwargs.get("messages") or [], input_kwargs.get("tools"), model, agent.state,
        )
        refusal = over_request_cap(services, run, tokens) or self._unpriced(run, model)
        if refusal is not None:  # not sent: the run answers with its stop text
            return _final(refusal)
        fleet = services.fleet
        admission = await fleet.before_model_call(
            run, model, input_kwargs.get("messages") or [], input_kwargs.get("tools") or [],
        )
        if admission.answer is not None:  # rate limit or quota: no model call
            return _final(admission.answer)
        held = admission.reservation
        run.add_model_call()
        _count_attempts(model)
        attempts = _ATTEMPTS.set(_Attempts(run))
        started = time.monotonic()
        try:
            result = await self._bounded(run, next_handler(**input_kwargs))
        except BaseException:
            if held is not None:  # the call failed: nothing was spent
                await fleet.settle(run, held, 0.0)
            raise
        finally:
            _ATTEMPTS.reset(attempts)
        if isinstance(result, ChatResponse):
            run.note_model_call_s(time.monotonic() - started)
            await self.harness.charge_usage(run, model, self._usage(run, result, tokens), held)
            return result
        return self._counted(run, model, result, started, held, tokens)

    def _unpriced(self, run: RunState, model: Any) -> str | None:
        """The stop text when ``model`` has no price on a capped budget (an
        alias, a typo, a router's choice: never charged at $0)."""
        cost = self.harness.config.cost
        name = str(getattr(model, "model", "") or "")
        if cost is None or (cost.cap_usd is None and cost.daily_quota_usd is None):
            return None
        if name in cost.prices:
            return None
        if name not in run.root.unpriced_seen:
            run.root.unpriced_seen.add(name)
            priced = cost.price_of(name) is not None
            self.harness.services.record(
                run, "budget_router", "on_model_call", "unpriced_model", code="quota_exhausted",
                detail=f"model {name!r} has no price; "
                + ("charged at the stated unpriced price" if priced else "the call is refused"),
            )
        if cost.price_of(name) is not None:
            return None
        return self._stop(run, "unpriced_model")

    def _stop(self, run: RunState, reason: str) -> str:
        facts = run.facts
        facts.conclude(TerminalState.INCOMPLETE, reason)
        if facts.stop_text is None:
            facts.stop_text = self.harness.config.fallback_text.format(reason=reason_words(reason))
        return facts.stop_text

    async def _bounded(self, run: RunState, awaitable: Any) -> Any:
        """The call, cut at the deadline (the answer then is the stop text)."""
        left = run.time_left()
        if left is None:
            return await awaitable
        try:
            async with asyncio.timeout(max(left, 0.0)):
                result = await awaitable
        except TimeoutError:
            return _final(self._deadline_passed(run))
        after = run.time_left()
        cut = after is not None and after <= 0
        if cut and isinstance(result, ChatResponse) and result.finished_reason != FinishedReason.COMPLETED:
            # AgentScope reports a provider call cancelled at the deadline as interrupted
            return _final(self._deadline_passed(run))
        return result

    def _deadline_passed(self, run: RunState) -> str:
        self.harness.services.record(
            run, "liveness_watchdog", "on_model_call", "stop", detail="deadline: the model call was cut short",
            enforced=True,  # shadow mode too: time is not a refusal
        )
        run.facts.time_is_up(self.harness.shadow)
        return self._stop(run, "deadline")

    def _usage(self, run: RunState, response: ChatResponse, input_tokens: int) -> Any:
        """The response's usage; a provider that reports none is charged an
        estimate (the request's, and 4 characters a token of the answer), so
        a capped budget is never spent at $0."""
        if response.usage is not None or self.harness.config.cost is None:
            return response.usage
        output = sum(len(getattr(b, "text", "") or getattr(b, "thinking", "") or getattr(b, "input", "") or "")
                     for b in response.content)
        if not run.root.usage_estimated:
            run.root.usage_estimated = True
            self.harness.services.record(run, "budget_router", "on_model_call", "usage_estimated",
                                         detail="the provider reported no usage: charged an estimate")
        return ChatUsage(input_tokens=input_tokens, output_tokens=output // 4, time=0.0)

    async def _counted(
        self, run: RunState, model: Any, stream: AsyncGenerator, started: float, held: str | None,
        input_tokens: int,
    ) -> AsyncGenerator:
        """The streamed response, each chunk awaited within the time left;
        the call's reservation settled by its last chunk, else (failed, cut,
        abandoned) with nothing spent."""
        iterator = stream.__aiter__()
        try:
            while True:
                left = run.time_left()
                try:
                    if left is None:
                        chunk = await iterator.__anext__()
                    else:
                        async with asyncio.timeout(max(left, 0.0)):
                            chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    await _close(stream)
                    yield _final(self._deadline_passed(run))
                    return
                if chunk.is_last:
                    run.note_model_call_s(time.monotonic() - started)
                    reservation, held = held, None
                    await self.harness.charge_usage(run, model, self._usage(run, chunk, input_tokens), reservation)
                yield chunk
        finally:
            if held is not None:
                await self.harness.services.fleet.settle(run, held, 0.0)

def _final(text: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=text)], is_last=True)


async def _close(stream: AsyncGenerator) -> None:
    try:
        await stream.aclose()
    except (RuntimeError, asyncio.CancelledError):  # a provider stream closed mid-chunk
        pass
