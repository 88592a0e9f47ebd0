"""One model call under the run's limits: served by the budget tier's model,
priced before it is made (an unpriced model never runs on a capped budget,
and a call whose estimated cost would take the run past a cap is not made),
bounded by the time left before the deadline, and counted.

A call cut short by the deadline, or refused for an unpriced model or an
overspend, answers with the run's stop text as the model's final response:
AgentScope then ends the reply normally, and the run's facts say why
(``incomplete``, reason ``deadline``, ``unpriced_model`` or ``budget``; or
``waiting_input`` with the budget question).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import sys
import time
import weakref
from collections.abc import AsyncGenerator, Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from agentscope.agent import Agent
from agentscope.message import TextBlock
from agentscope.model import AnthropicChatModel, ChatResponse, ChatUsage
from agentscope.model._model_response import FinishedReason
from agentscope.tool import ToolChoice
from pydantic import BaseModel

from .chains import close_stream
from .context import REASONS, fallback, found_so_far, time_ran_out
from .errors import HarnessError
from .fleet import estimate_input_tokens, output_bound
from .hooks.budget import Held, Overspend, budget_spent, hold, overspend, release
from .outputs import answer_filter, redact_foreign_hints
from .prefix import observe, over_request_cap
from .report import TerminalState
from .run_state import RunTable, current_run
from .runner import first_step

if TYPE_CHECKING:
    from .config import CostPolicy
    from .harness import Harness
    from .run_state import RunState


class _OutOfCalls(Exception):
    """A retry AgentScope would make past ``max_model_calls``: not made (not
    one of AgentScope's retryable errors, so its retry loop ends here)."""


@dataclass
class _Attempts:
    """The attempts of one model call so far (the first is counted by the
    guard); ``depth``: inside a counted ``_call_api`` (a subclass's override
    calling its parent's is one attempt)."""

    run: RunState
    made: int = 0
    ended: int = 0
    """Attempts that answered or failed (not those cut or cancelled)."""
    depth: int = 0
    unanswered: int = 0
    """Attempts that timed out after their request went out (the client
    gave up; the provider may still work and bill it): each is charged its
    request, as a call cut at the deadline is."""
    usage_seen: Any = None
    """The last whole usage the current attempt's stream reported (the
    run's own call: a final count may come before the stream breaks)."""
    usages: list[Any] | None = None
    """When kept (a compression, charged here, not by ``on_model_call``):
    what each answered attempt served (``_Served``; ``_NOTHING``: a stream
    broken before its first chunk; ``None``: an attempt cut, charged its
    request only)."""

    def cut(self) -> None:
        """The attempt in flight was cut (the deadline, a cancellation): its
        request went out and is charged (a failed retry is not in flight)."""
        self.usages = [*(self.usages or []), *[None] * (self.made - self.ended)]

    def request_out(self) -> bool:
        """Whether an attempt's request is out now (not one cut in the pause
        between a failed attempt and its retry: that sent nothing). A model
        making its calls without ``_call_api`` counts none: assumed out."""
        return self.made == 0 or self.made > self.ended


@dataclass
class _Streaming:
    """A streamed model call in flight: what charging it needs."""

    model: Any
    reservation: str | None
    input_tokens: int
    held: Held | None = None
    """Its estimate, held against the run's caps until it is charged."""
    attempts: _Attempts | None = None
    """Its attempts: the last whole usage its provider reported is read there."""
    chars: int = 0
    """Characters of the chunks passed on so far."""
    charged: bool = False
    stream: AsyncGenerator | None = None
    """The stream handed on: closed when the run settles without reading it
    to its end (its provider stops)."""


_ATTEMPTS: ContextVar[_Attempts | None] = ContextVar("harness_model_attempts", default=None)
_WRAPPED = "__harness_wrapped__"
"""Marks a model method wrapped by ``_wrap_once``."""
_SEEN: weakref.WeakKeyDictionary[type, set[str]] = weakref.WeakKeyDictionary()
"""The methods of each model class ``_wrap_once`` has already dealt with."""


def _wrap_once(cls: type, name: str, wrap: Callable[[Any], Any]) -> None:
    """Replace the coroutine method ``name`` on the class of ``cls``'s
    ancestry that defines it by ``wrap(inner)``, once (a wrapper is marked).
    The class, not an instance: a copy of a model stays a model of its own;
    the wrappers pass through outside a harnessed call."""
    done = _SEEN.get(cls)
    if done is not None and name in done:  # every model call asks: two lookups once the class is done
        return
    owner = next((c for c in cls.__mro__ if name in vars(c)), None)
    inner = None if owner is None else vars(owner)[name]
    if inner is None or getattr(inner, _WRAPPED, False) or not inspect.iscoroutinefunction(inner):
        _SEEN.setdefault(cls, set()).add(name)
        return
    wrapper = functools.wraps(inner)(wrap(inner))
    setattr(wrapper, _WRAPPED, True)
    try:
        setattr(owner, name, wrapper)
    except (AttributeError, TypeError):  # pragma: no cover - a class that cannot be changed
        pass
    _SEEN.setdefault(cls, set()).add(name)


def _count_attempts(model: Any) -> None:
    """AgentScope retries a failed request inside the model's ``__call__``,
    below every middleware. ``model_calls`` counts attempts: the model's
    ``_call_api`` (called once per attempt) counts each retry into the
    harnessed call's run."""

    def wrap(inner: Any) -> Any:
        async def attempt(self: Any, *args: Any, **kwargs: Any) -> Any:
            counting = _ATTEMPTS.get()
            if counting is None:
                return await inner(self, *args, **kwargs)
            if counting.depth == 0:
                counting.made += 1
                if counting.made > 1:  # a retry is a model call: within the cap, as the first was
                    if counting.run.model_calls_spent(enforced_only=True) is not None:
                        raise _OutOfCalls
                    counting.run.add_model_call()
            counting.depth += 1
            try:
                result = await inner(self, *args, **kwargs)
            except Exception as exc:
                counting.ended += counting.depth == 1  # failed: it answered nothing
                if counting.depth == 1 and _timed_out(exc):  # its request went out: charged that
                    if counting.usages is not None:  # a call below on_model_call: charged there
                        counting.usages.append(_Served(ended=False, unanswered=True))
                    else:
                        counting.unanswered += 1
                raise
            finally:
                counting.depth -= 1
            counting.ended += counting.depth == 0
            if counting.usages is None and counting.depth == 0 and inspect.isasyncgen(result):
                counting.usage_seen = None
                return _usage_seen(result, counting)
            if counting.usages is not None and counting.depth == 0:  # each answered attempt was billed
                if inspect.isasyncgen(result):
                    return _usage_of_stream(result, counting.usages)
                if isinstance(result, ChatResponse):
                    counting.usages.append(_Served(result.usage, _chars(result)))
                    result.usage = _counted_out(result.usage)
                else:
                    counting.usages.append(None)
            return result

        return attempt

    _wrap_once(type(model), "_call_api", wrap)


def _timed_out(exc: BaseException) -> bool:
    """Whether an attempt failed waiting for its answer (the client's own
    timeout: asyncio's, httpx's, the provider SDK's), its whole request
    sent: not one that timed out connecting, waiting for a connection or
    writing the request (it never arrived whole), nor one the server
    answered (an HTTP status: a ``504``, Anthropic's request-body timeout, a
    ``408``: a failed call). Its causes are read (``raise ... from``), never
    an exception its caller happened to be handling (``__context__``: a
    call made in an ``except`` block is not judged by the earlier error)."""
    chain = _causes(exc)
    if _not_taken(chain):
        return False
    return any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in chain)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``raise ... from``), at most 16."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 16:
        chain.append(seen)
        seen = seen.__cause__
    return chain


def _not_taken(chain: list[BaseException]) -> bool:
    """A failure that shows its request was never taken whole (a timeout
    connecting or writing it) or was answered with an HTTP error status."""
    return any(type(e).__name__ in _NOT_SENT or getattr(e, "status_code", None) is not None for e in chain)


_NOT_SENT = frozenset({"ConnectTimeout", "PoolTimeout", "ConnectError", "WriteTimeout"})
"""httpx's timeouts before a request is written whole (the provider SDKs wrap them)."""


def _counted_out(usage: Any) -> Any:
    """A usage with a count left out (``null``) given 0 in its place:
    AgentScope's compression reads its counts as whole numbers and fails on
    none (what it is charged is found from the usage as reported)."""
    if not isinstance(usage, ChatUsage) or (usage.input_tokens is not None and usage.output_tokens is not None):
        return usage
    return replace(usage, input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0)


@dataclass
class _Served:
    """What one attempt of a call below ``on_model_call`` served: the usage
    its provider reported (``None``: none; a whole one wins over a partial
    one) and the characters of its answer; ``ended``: it answered to its end
    (else it was stopped: cut, cancelled, broken, or ``unanswered``: the
    client's own timeout gave up on its request)."""

    usage: Any = None
    chars: int = 0
    ended: bool = True
    unanswered: bool = False


async def _usage_seen(stream: Any, counting: _Attempts) -> AsyncGenerator:
    """A streamed attempt of the run's own call passed on, the last whole
    usage a chunk reports kept on ``counting`` (a stream that breaks after
    its final count is charged that count, not an estimate)."""
    try:
        async for chunk in stream:
            usage = getattr(chunk, "usage", None)
            if isinstance(usage, ChatUsage) and _billable(usage):
                counting.usage_seen = usage
            yield chunk
    finally:
        await close_stream(stream)  # closed here, or cancelled: the provider's stream too


async def _usage_of_stream(stream: Any, usages: list[Any]) -> AsyncGenerator:
    """A streamed attempt passed on, what it served recorded in ``usages``:
    the last usage a chunk reports (a raw provider stream never marks its
    last chunk; usage comes with the final one) and the characters
    streamed. A stream the provider broke before its first chunk served
    nothing (is charged nothing); one stopped later, or one the client's
    own timeout gave up on after its request went out, is charged its
    request and what streamed, estimated."""
    served = _Served()
    slot = len(usages)
    usages.append(served)
    try:
        async for chunk in stream:
            usage = getattr(chunk, "usage", None)
            if isinstance(usage, ChatUsage) and (_billable(usage) or not _billable(served.usage)):
                served.usage = usage
                chunk.usage = _counted_out(usage)
            served.chars += _chars(chunk) or 1
            yield chunk
    except Exception as exc:
        timed_out = _timed_out(exc)
        if not served.chars and not timed_out:
            usages[slot] = _NOTHING
        served.ended, served.unanswered = False, timed_out and not served.chars
        raise
    except BaseException:  # cancelled or closed mid-stream: its request and what streamed, estimated
        served.ended = False
        await close_stream(stream)  # the provider's stream too
        raise


def _billable(usage: Any) -> bool:
    """A usage a provider reported that can be charged: every count a whole
    number, 0 or more (a negative one, from a broken or hostile server, would
    be credit against the cap and the day's quota; an infinite one no number),
    and some input (every request has a prompt: a usage of none is no report).
    Anything else is charged an estimate."""
    if not isinstance(usage, ChatUsage) or usage.input_tokens is None or usage.output_tokens is None:
        return False  # a count left out (``null``) is no report of it, and AgentScope's events refuse it
    counts = (usage.input_tokens, usage.output_tokens, usage.cache_input_tokens, usage.cache_creation_input_tokens)
    for count in counts:  # a loop, not all(): no generator per model call
        if token_count(count) is None:
            return False
    return (
        (usage.input_tokens or 0) + (usage.cache_input_tokens or 0) + (usage.cache_creation_input_tokens or 0) > 0
    )


MAX_TOKEN_COUNT = 10**9
"""The most tokens one response may report: no request or answer comes near
it, and a count past it (``10**400`` from a broken proxy) would overflow
its price."""


def token_count(value: Any) -> int | None:
    """A reported token count as a whole number from 0 to
    ``MAX_TOKEN_COUNT`` (``None`` and 0 alike are none); ``None`` for
    anything else: negative, fractional, infinite, absurd or not a number."""
    if type(value) is int and 0 <= value <= MAX_TOKEN_COUNT:  # the common whole count: read at once
        return value
    value = value or 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if 0 <= value <= MAX_TOKEN_COUNT else None


def billed_tokens(model: Any, usage: Any) -> tuple[int, int, int]:
    """A response's ``(input, cached input, output)`` tokens, its input
    counting every token sent: AgentScope's Anthropic model reports the
    prompt cache's reads and writes beside ``input_tokens``, the others
    (OpenAI's ``cached_tokens``) within it, unless they report more cached
    than sent (a proxy reporting them beside it, as Anthropic does: never
    charged as nothing). A count that is no whole number
    of 0 or more counts 0 (callers charge only billable usage or estimates;
    this is the last line, never a credit nor a crash)."""
    def count(name: str) -> int:
        return token_count(getattr(usage, name, 0)) or 0

    input_tokens, cached = count("input_tokens"), count("cache_input_tokens")
    if isinstance(model, AnthropicChatModel):
        input_tokens += cached + count("cache_creation_input_tokens")
    elif cached > input_tokens:  # more cached than sent: reported beside the input (a proxy), so both are charged
        input_tokens += cached
    return input_tokens, cached, count("output_tokens")


def _stopped_usage(reported: Any, estimate: ChatUsage) -> tuple[ChatUsage, str]:
    """What a call stopped before its end is charged: the provider's usage
    when it reported a whole one covering what streamed (its final count
    came before the break), else the estimate (a count so far, Anthropic's
    first event's, is no final one); and how it was found."""
    if _billable(reported) and (reported.output_tokens or 0) >= estimate.output_tokens:
        return reported, "reported"
    return estimate, "estimated"


def _as_billed(model: Any, usage: ChatUsage) -> ChatUsage:
    """One attempt's usage with its input counted as it is billed
    (``billed_tokens``: cached tokens a proxy reports beside the input
    added to it), so attempts summed are priced as each would be alone
    (summed first, the rule would no longer see one attempt's cache beside
    another's input). Anthropic's counts are summed as reported: its rule
    adds the cache to the input whatever the counts."""
    if isinstance(model, AnthropicChatModel):
        return usage
    input_tokens, cached, output_tokens = billed_tokens(model, usage)
    return ChatUsage(input_tokens=input_tokens, output_tokens=output_tokens, time=0.0,
                     cache_input_tokens=cached)


_NOTHING = ChatUsage(input_tokens=0, output_tokens=0, time=0.0)
"""The usage of an attempt that served nothing."""


class ModelGuard:
    """The harness's side of ``on_model_call`` for one Harness."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    async def call(self, run: RunState, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any]) -> Any:
        """Serve one model call (its retries inside AgentScope are counted by ``_count_attempts``)."""
        narrowed, run.narrowed_round = run.narrowed_round, False
        stopped = self._stopped_in_round(run, narrowed)
        if stopped is not None:
            return _final(stopped)
        swap = self.harness.tier_model(run)
        if swap is not None and not _fallback_call(agent, input_kwargs):
            input_kwargs["current_model"] = swap
        model = input_kwargs.get("current_model") or agent.model
        choice = input_kwargs.get("tool_choice")
        if choice is not None and choice == run.harness_choice:  # never a choice another middleware forced
            _narrowed_within_table(run, input_kwargs, self.harness.finish_tools)
            if narrowed or run.facts.force_conclude:
                _unforced_while_thinking(input_kwargs, model)
        services = self.harness.services
        _redact_new_hints(services.redactor, run, agent)
        tokens = observe(
            services, run, input_kwargs.get("messages") or [], input_kwargs.get("tools"), model, agent.state,
        )
        name, output = _name(model), _output_estimate(run, model)
        self._candidate_judges(run, name, tokens, output)
        over = overspend(run, name, tokens, output)
        refusal = (
            self._enclosing_ended(run) or self._past_deadline(run) or over_request_cap(services, run, tokens)
            or self._unpriced(run, model)
            or self._over_budget(run, agent, over)
            or (self._enclosing_stop(run) if services.shadow else None)
        )
        if refusal is not None:  # not sent: the run answers with its stop text
            return _final(refusal)
        fleet = services.fleet
        admission = await fleet.before_model_call(
            run, model, input_kwargs.get("messages") or [], input_kwargs.get("tools") or [],
        )
        if admission.too_late:  # a store wait the deadline cut: not made, the run ends at its deadline
            return _final(self._deadline_passed(run, "not made"))
        if admission.answer is not None:  # rate limit or quota: no model call
            return _final(admission.answer)
        held = admission.reservation
        # again, as calls in flight while it waited may have taken the calls, money or time left
        refusal = self._past_deadline(run) or self._out_of_calls(run, narrowed) or (
            self._over_budget(run, agent, overspend(run, name, tokens, output)) if over is None else None
        )
        if refusal is not None:
            await fleet.not_made(run, held)
            return _final(refusal)
        estimate = hold(run, name, tokens, output)  # no await since the check: no call slips between
        run.add_model_call()
        _count_attempts(model)
        counting = _Attempts(run)
        token = _ATTEMPTS.set(counting)
        started = time.monotonic()
        try:
            result = await self._bounded(run, next_handler(**input_kwargs))
        except BaseException as exc:
            release(run, estimate)
            if held is not None:  # the call failed: nothing was spent by its answer
                await fleet.settle(run, held, 0.0)
            await self._charge_unanswered(run, model, counting, tokens)
            if isinstance(exc, _OutOfCalls):  # its retry would pass the cap
                return _final(self._stop(run, "max_model_calls"))
            raise
        finally:
            _ATTEMPTS.reset(token)
        await self._charge_unanswered(run, model, counting, tokens)
        if result is None:  # cut at the deadline before it answered: no output, and its request if one was out
            sent = tokens if counting.request_out() else 0
            result, usage = _final(self._deadline_passed(run)), _estimated_usage(sent, 0, model)
            if sent:
                self._estimated(run, "cut")
        elif isinstance(result, ChatResponse):
            usage = self._usage(run, model, result, tokens)
        else:
            flight = _Streaming(model, held, tokens, estimate, counting)  # in flight: charged even if never read
            run.streaming.append(flight)
            flight.stream = self._counted(run, model, result, started, flight)
            return flight.stream
        run.note_model_call_s(time.monotonic() - started)
        release(run, estimate)
        await self.harness.charge_usage(run, model, usage, held)
        return result

    async def compress(self, run: RunState, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any]) -> None:
        """AgentScope's ``compress_context`` (checked every round; a model
        call only over its threshold) with its model call guarded; a new
        summary is filtered as the model's answer is: it is the model's own
        text, which every later request carries outside any fence (a marker
        it forged, the run's nonce in a fence's close, would read as the
        harness's)."""
        guard_structured_calls(type(agent.model))
        _redact_new_hints(self.harness.services.redactor, run, agent)  # the summary's request reads them
        token = _COMPRESSION.set((self, run))
        summary = agent.state.summary
        try:
            await next_handler(**input_kwargs)
            if agent.state.summary is not summary:
                _filter_summary(agent.state, answer_filter(self.harness.services, run))
        except CompressionRefused:
            pass  # AgentScope's truncation fallback is off: the context stays as it is
        except Exception:
            # with that fallback off, the summary's model call failed for good
            if self.model_failed(run) is None:
                raise  # else the run's next step answers its text
        finally:
            _COMPRESSION.reset(token)

    async def guarded_call(
        self, run: RunState, model: Any, messages: list[Any], call: Callable[[], Any], compression: bool,
        tools: list[Any],
    ) -> Any:
        """A model call made below ``on_model_call`` (a compression request,
        or a middleware's own call: ``guard_structured_calls``) under the
        limits of any model call: not made past the deadline, for a
        concluded run, over the request cap or for a model with no price on
        a capped budget; otherwise reserved and rate limited as any call (a
        refusal stops a compression's run; a middleware's call is refused
        alone), bounded by the time left, counted, and
        charged: every answered attempt (an estimate where the provider
        reports no usage). ``tools``: what is sent beside the messages (the
        output's schema), counted in every estimate. A refused one raises
        ``ModelCallRefused`` (``CompressionRefused`` for a compression)."""
        services = self.harness.services
        fleet = services.fleet
        for message in messages:  # what it sends of the context: other middlewares' hints redacted
            content = getattr(message, "content", None)
            if isinstance(content, list):
                redact_foreign_hints(services.redactor, content)
        side = None if compression else str(next(_SIDE_CALLS))  # a compression is the run's own call
        tokens, output = estimate_input_tokens(messages, tools), _output_estimate(run, model)
        self._candidate_judges(run, _name(model), tokens, output)  # as any model call
        refusal = self._side_call_refusal(run, model, tokens, output)
        if refusal is None:
            admission = await fleet.before_model_call(run, model, messages, tools, side=side)
            refusal = (
                "the run's deadline passed while the store was asked" if admission.too_late
                else None if admission.answer is None else "a rate limit or the daily quota refused it"
            )
            if refusal is None:  # again: other calls ran while it waited (and may have raised the output seen)
                output = _output_estimate(run, model)
                refusal = self._side_call_refusal(run, model, tokens, output)
                if refusal is not None:  # given back even if the caller is cancelled meanwhile
                    await asyncio.shield(fleet.not_made(run, admission.reservation, side))
        if refusal is not None:
            raise self._not_made(run, refusal, compression)
        # held with no await since the check, as any call's estimate
        estimate = hold(run, _name(model), tokens, output)
        run.add_model_call()
        self._uncounted(run, _name(model))  # an uncapped policy's unpriced model: said, as for any call
        _after_end(run)
        _count_attempts(model)
        attempts = _Attempts(run, usages=[])
        token = _ATTEMPTS.set(attempts)
        left = run.time_left()
        bound = asyncio.timeout(None if left is None else max(left, 0.0))
        try:
            async with bound:
                return await call()
        except _OutOfCalls:
            raise self._not_made(run, "a retry would pass max_model_calls", compression) from None
        except TimeoutError:
            if not bound.expired():  # the client's own timeout: a failed call, not the deadline
                raise
            attempts.cut()
            run.facts.time_is_up(self.harness.shadow)
            raise self._not_made(run, "deadline: the call was cut short", compression) from None
        except asyncio.CancelledError:  # its request went out: charged as a cut one
            attempts.cut()
            raise
        finally:
            _ATTEMPTS.reset(token)
            release(run, estimate)
            # every answered attempt (AgentScope tries several strategies) was billed
            await self.harness.charge_usage(run, model, self._attempts_usage(attempts, tokens, model),
                                            admission.reservation, side)

    def model_failed(self, run: RunState) -> str | None:
        """The provider failed for good (after AgentScope's retries): the run
        ends ``failed`` (``model_error``). The user gets ``model_error_text``
        when configured (also the run's stop text: a compression that failed
        ends the run at its next step); otherwise the provider's exception
        reaches the caller. One that fails past the run's deadline failed for
        lack of time (a middleware of yours before the harness's bounding its
        wait with ``clamp_timeout``): the run ends ``deadline``, as a cut does."""
        if run.past_deadline():
            self.harness.services.record(run, "liveness_watchdog", "on_model_call", "stop", code="deadline",
                                         detail="the model call failed past the run's deadline", enforced=True)
            return time_ran_out(run, self.harness.config)
        run.facts.conclude(TerminalState.FAILED, "model_error", override=True)
        self.harness.services.record(run, "liveness_watchdog", "on_model_call", "stop", code="model_error",
                                     detail="the model provider failed after its retries")
        text = self.harness.config.model_error_text
        if text is None:
            return None
        run.facts.stop_text = text.format(reason=REASONS["model_error"])
        return run.facts.stop_text

    def _attempts_usage(self, attempts: _Attempts, input_tokens: int, model: Any) -> ChatUsage | None:
        """What a compression's attempts used, summed; an attempt whose
        provider reported no usage is charged its request's estimate
        (``input_tokens``) and what it streamed (4 characters a token)."""
        usages: list[ChatUsage] = []
        for served in attempts.usages or []:
            if served is _NOTHING:  # broken before its first chunk: nothing served
                usages.append(served)
                continue
            served = served or _Served(ended=False)  # cut: its request only
            if served.ended:
                usage, how = _charged(served.usage, served.chars, input_tokens, model)
            else:
                usage, how = _stopped_usage(served.usage, _estimated_usage(input_tokens, served.chars, model))
                how = how if how == "reported" else "unanswered" if served.unanswered else "cut"
            usages.append(_as_billed(model, usage))
            if how != "reported":
                self._estimated(attempts.run, how)
        if not usages:
            return None
        return ChatUsage(
            input_tokens=sum(u.input_tokens for u in usages),
            output_tokens=sum(u.output_tokens for u in usages),
            time=0.0,
            cache_input_tokens=sum(u.cache_input_tokens or 0 for u in usages),
            cache_creation_input_tokens=sum(u.cache_creation_input_tokens or 0 for u in usages),
        )

    def _candidate_judges(self, run: RunState, name: str, tokens: int, output: int) -> None:
        """The candidate policy's verdict on a model call, judged on what the
        live checks are about to see."""
        candidate = self.harness.candidate
        if candidate is not None:
            services = self.harness.services
            live = precall_stop(run, name, tokens, output, enforced_only=not services.shadow)
            candidate.judge_model_call(run, services, name, tokens, output, live)

    def _side_call_refusal(self, run: RunState, model: Any, tokens: int, output: int) -> str | None:
        """Why a call below ``on_model_call`` of ``tokens`` input (``output``
        estimated) is not made; ``None``: it may be."""
        if run.past_deadline():
            if run.report is None:  # a parked run's time stands still: it is not out of it
                run.facts.time_is_up(self.harness.shadow)
            return "deadline: the run is out of time"
        if run.facts.terminal is not None and not self.harness.shadow:  # a shadow run goes on past its end
            return f"the run has concluded ({run.facts.terminal.reason})"
        spent = run.model_calls_spent(enforced_only=True)  # it is a model call: counted against the cap
        if spent is not None:
            return f"max_model_calls ({spent}) is reached"
        cap = run.request_input_cap(enforced_only=True)  # every enclosing enforcing run's too
        if cap is not None and tokens > cap:
            return f"a request of ~{tokens} input tokens is over max_request_input_tokens ({cap})"
        name = _name(model)
        if _unpriceable(_unlisted(run, name), name, enforced_only=True):  # a shadow Harness's own: recorded
            return f"model {name!r} has no price on a capped budget"
        # not made when it would overspend: the next model call meets the same check and ends the run
        over = overspend(run, name, tokens, output)
        return None if over is None or not over.enforced else over.what

    def _not_made(self, run: RunState, why: str, compression: bool) -> ModelCallRefused:
        """Record a call below ``on_model_call`` not made (or cut); what it raises."""
        _after_end(run)
        point, what = (
            ("on_compress_context", "AgentScope's context compression") if compression
            else ("on_model_call", "a model call a middleware made itself")
        )
        self.harness.services.record(run, "liveness_watchdog", point, "skip",
                                     detail=f"{what} was not made: {why}", enforced=True)
        return CompressionRefused(why) if compression else ModelCallRefused(why)

    def _unpriced(self, run: RunState, model: Any) -> str | None:
        """The stop text when ``model`` has no price on a capped budget of
        this run or of a run it is nested in (an alias, a typo, a router's
        choice, a sub-agent's own Harness: never charged at $0)."""
        name = _name(model)
        unlisted = _unlisted(run, name)
        refused = _unpriceable(unlisted, name, enforced_only=False)
        if refused:
            self._said_unpriced(run, name, "the call is refused", "quota_exhausted")
        # an enforcing cap refuses; a shadow Harness's own ends its run's report as
        # enforcing would (the call is made): never another Harness's run's
        if _unpriceable(unlisted, name, enforced_only=True):
            return self._stop(run, "unpriced_model")
        if refused and self.harness.shadow:
            self._stop(run, "unpriced_model")
        self._uncounted(run, name)
        return None

    def _uncounted(self, run: RunState, name: str) -> None:
        """A call of a model some run's cost policy does not list, made: the
        report of each run it counts in (its own, and every run it is nested
        in, whichever Harness opened it) says once what that run's spend did
        with it. Charged at a capped policy's stated ``unpriced`` price; or
        left out of ``spent_usd`` by a policy that prices models (or is
        capped: a shadow Harness's) and cannot price this one, unless this
        Harness prices it (``add_usage`` charges that price where a run has
        none). A policy of token caps alone prices nothing, and says nothing."""
        own = self.harness.config.cost
        charged = own is not None and own.price_of(name) is not None
        counting: RunState | None = run
        while counting is not None:
            cost = counting.limits.cost
            if cost is not None and name not in cost.prices:
                capped = cost.cap_usd is not None or cost.daily_quota_usd is not None
                if cost.price_of(name) is not None:
                    if capped:
                        self._said_unpriced(counting, name, "charged at the stated unpriced price", "quota_exhausted")
                elif not charged and (capped or cost.prices):
                    self._said_unpriced(counting, name, "its calls are not counted in spent_usd")
            counting = counting.parent

    def _said_unpriced(self, run: RunState, name: str, what: str, code: str | None = None) -> None:
        """An ``unpriced_model`` decision, once per model name in a run's report."""
        if name not in run.unpriced_seen:
            run.unpriced_seen.add(name)
            self.harness.services.record(run, "budget_router", "on_model_call", "unpriced_model", code=code,
                                         detail=f"model {name!r} has no price; {what}")

    def _over_budget(self, run: RunState, agent: Any, over: Overspend | None) -> str | None:
        """The answer in the model's place when this call, at its estimated
        cost (``overspend``, with what calls in flight hold), would take the
        run past a cap it answers to: the run ends as at the ladder's last
        rung (the fallback answer and what the run found, or the budget
        question). ``None``: it fits, or the cap is this Harness's own in
        shadow mode (recorded; an enclosing enforcing Harness's cap binds a
        shadow sub-agent)."""
        if over is None:
            return None
        services = self.harness.services
        made = "was not made" if over.enforced else "would not be made (shadow)"
        services.record(run, "budget_router", "on_model_call", "fallback", code="quota_exhausted",
                        detail=f"the call {made}: {over.what}", enforced=over.enforced)
        if not over.enforced:  # a shadow cap: the report ends as enforcing would, the call is made
            if self.harness.shadow:
                self._budget_end(run, agent, over, park=False)
            return None
        return self._budget_end(run, agent, over, park=True)

    def _budget_end(self, run: RunState, agent: Any, over: Overspend, park: bool) -> str:
        """End the run as the ladder's last rung does (``budget_spent``;
        ``park``: a budget question is kept for the next reply); its text."""
        reason, state, text = budget_spent(self.harness.services, agent, run, over.kind, over.policy,
                                           "on_model_call", park=park)
        if state is TerminalState.WAITING_INPUT and not park:  # shadow mode: the question is recorded, not asked
            return text
        if state is TerminalState.INCOMPLETE:
            return run.facts.stop(reason, text + found_so_far(run))
        run.facts.conclude(state, reason)
        run.facts.stop_text = text
        return text

    def _stopped_in_round(self, run: RunState, narrowed: bool) -> str | None:
        """The stop text of a run a hook stopped after ``pre_think`` let its
        round go on (an ``on_system_prompt`` safety hook, judged while the
        model's request is assembled): the call is not made. A narrowed round
        (a stopped run's structured output) is made, unless the run's end
        leaves it no model call (``RunState.ended_callless``)."""
        facts = run.facts
        if facts.terminal is None or facts.stop_text is None or self.harness.shadow:
            return None
        if narrowed and not run.ended_callless():
            return None
        return facts.stop_text

    def _out_of_calls(self, run: RunState, narrowed: bool) -> str | None:
        """The stop text when an enforcing ``max_model_calls`` this run
        answers to is reached: checked where the call is counted, with no
        await between, so calls that passed ``pre_think`` together (parallel
        sub-agents waiting on the store) cannot all be made. ``narrowed``: one
        of the two rounds a run stopped at its own cap is given for its
        structured output (a cap a run it is nested in holds gives none)."""
        spent = run.model_calls_spent(enforced_only=True)
        if spent is None or (narrowed and not run.model_cap_reached_above()):
            return None
        self.harness.services.record(run, "liveness_watchdog", "on_model_call", "stop", code="max_model_calls",
                                     detail=f"the call was not made: max_model_calls ({spent}) is reached")
        return self._stop(run, "max_model_calls")

    def _enclosing_stop(self, run: RunState) -> str | None:
        """In shadow mode: the stop text when an enclosing enforcing
        Harness's caps end the run (its watchdog is not the one running
        here; a shadow sub-agent spends the live parent's calls): its
        ``max_model_calls`` is reached, or the model met the refusal at its
        ``max_tool_calls`` in two turns (an enforcing run's refusal ladder
        ends it there; the shadow run's own ladder only records)."""
        if run.model_calls_spent(enforced_only=True) is not None:
            return self._stop(run, "max_model_calls")
        if len(run.enclosing_refusals) >= 2:
            return self._stop(run, "refused:quota_exhausted")
        return None

    def _enclosing_ended(self, run: RunState) -> str | None:
        """The stop text of a sub-agent whose lead's run was stopped short of
        its task (``RunState.enclosing_end``): it is part of that stopped
        task, so its call is not made."""
        end = run.enclosing_end()
        if end is None:
            return None
        self.harness.services.record(run, "terminal_reached_gate", "on_model_call", "stop", code="run_concluded",
                                     detail=f"the call was not made: the run it is part of was stopped ({end.reason})",
                                     enforced=True)
        return self._stop(run, "run_concluded")

    def _stop(self, run: RunState, reason: str) -> str:
        """The run ends here: the fallback answer and what the run found."""
        return run.facts.stop(reason, fallback(self.harness.config, reason) + found_so_far(run))

    async def _bounded(self, run: RunState, awaitable: Any) -> Any:
        """The call, cut at the deadline: ``None`` then, not a response (the
        model answered nothing: AgentScope's interrupted response to the cut
        is empty), so the stop text that answers in its place is never
        charged as its output. A call that answers without waiting arms no
        timer."""
        if run.time_left() is None:
            return await awaitable
        done, result = first_step(awaitable) if inspect.iscoroutine(awaitable) else (False, awaitable)
        if not done:
            left = run.time_left()  # after the first step, which may have taken time
            bound = asyncio.timeout(max(left or 0.0, 0.0))
            try:
                async with bound:
                    result = await result
            except TimeoutError:
                if not bound.expired():  # the client's own timeout: a failed call, not the deadline
                    raise
                return None
        if isinstance(result, ChatResponse) and _cut_at_deadline(run, result):
            return None
        return result

    def _past_deadline(self, run: RunState) -> str | None:
        """The stop text when the run's deadline passed before its model call
        was sent (a slow hook or store wait since the watchdog's check): the
        call is not made, nor charged."""
        return self._deadline_passed(run, "not made") if run.past_deadline() else None

    def _deadline_passed(self, run: RunState, what: str = "cut short") -> str:
        self.harness.services.record(
            run, "liveness_watchdog", "on_model_call", "stop", detail=f"deadline: the model call was {what}",
            enforced=True,  # shadow mode too: time is not a refusal
        )
        if run.shown is not None:  # the held-back openings of the cut blocks are never sent
            run.shown.cut()
        return time_ran_out(run, self.harness.config)

    def _usage(self, run: RunState, model: Any, response: ChatResponse, input_tokens: int) -> Any:
        """The response's usage; a provider that reports none is charged an
        estimate (the request's, and 4 characters a token of the answer), so
        a capped budget is never spent at $0: a candidate policy's neither,
        while the live policy prices nothing (then only the candidate is).
        A usage with counts no provider bills (negative, infinite) is
        replaced by the estimate in the response too: AgentScope's events
        carry it, and they take finite counts only."""
        reported = response.usage
        usage, how = _charged(reported, _chars(response), input_tokens, model)
        if how == "reported":
            return usage
        if reported is not None:
            response.usage = usage
        if how == "estimated" and not run.priced():
            # nothing live to price (this run's policy and every enclosing run's): the candidates' estimate only
            run.charge_candidates(usage.input_tokens, usage.output_tokens, 0.0, _name(model))
            return None
        self._estimated(run, how)
        return usage

    async def _charge_unanswered(self, run: RunState, model: Any, counting: _Attempts, tokens: int) -> None:
        """The attempts of a call that timed out after their request went
        out, each charged its request (an estimate, recorded as such)."""
        if not counting.unanswered:
            return
        unanswered, counting.unanswered = counting.unanswered, 0
        self._estimated(run, "unanswered")
        await self.harness.charge_usage(run, model, _estimated_usage(tokens * unanswered, 0, model))

    def _estimated(self, run: RunState, how: str) -> None:
        """The run's first estimated usage is recorded (the report's figures
        are then estimates in part)."""
        if not run.root.usage_estimated and run.priced():
            run.root.usage_estimated = True
            self.harness.services.record(run, "budget_router", "on_model_call", "usage_estimated",
                                         detail=_ESTIMATED[how])

    async def _counted(
        self, run: RunState, model: Any, stream: AsyncGenerator, started: float, flight: _Streaming,
    ) -> AsyncGenerator:
        """The streamed response, each chunk awaited within the time left;
        the call charged by its last chunk; one stopped before it (cut at
        the deadline, cancelled, the stream dropped or broken by the
        provider after it began) is charged its request and what streamed
        (an estimate), the one broken before its first chunk too; one whose
        request was never taken (a timeout connecting or writing it, an HTTP
        error status), nothing. A cut
        call's stream ends with the stop text, as its final message does."""
        iterator = stream.__aiter__()
        held, input_tokens = flight.reservation, flight.input_tokens
        try:
            while True:
                left = run.time_left()
                bound = None if left is None else asyncio.timeout(max(left, 0.0))
                try:
                    if bound is None:
                        chunk = await iterator.__anext__()
                    else:
                        async with bound:
                            chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    if bound is None or not bound.expired():  # the client's own: the stream broke
                        raise
                    await close_stream(stream)
                    await self._charge_stopped(run, flight)
                    for last in _final_stream(self._deadline_passed(run), flight.chars > 0):
                        yield last
                    return
                if chunk.is_last:
                    run.note_model_call_s(time.monotonic() - started)
                    if _cut_at_deadline(run, chunk):  # AgentScope's own last chunk after the cut: no answer
                        await self._charge_stopped(run, flight)
                        for last in _final_stream(self._deadline_passed(run), flight.chars > 0):
                            yield last
                        return
                    if _take(run, flight):  # else the run's end charged it when it stopped reading
                        await self.harness.charge_usage(run, model, self._usage(run, model, chunk, input_tokens), held)
                else:
                    flight.chars += _chars(chunk) or 1
                yield chunk
        except (GeneratorExit, asyncio.CancelledError):  # dropped or cancelled: the provider worked
            await self._charge_stopped(run, flight)
            await close_stream(stream)  # and stops: its HTTP stream closed now, not by the collector
            raise
        except Exception as exc:  # the provider broke the stream: it served (and bills) what it sent
            if flight.chars:
                await self._charge_stopped(run, flight)
            elif not _not_taken(_causes(exc)):  # it began (its request taken), broken before a chunk
                await self._charge_stopped(run, flight, "unanswered" if _timed_out(exc) else "cut")
            raise
        finally:
            if _take(run, flight) and held is not None:  # the call failed: nothing was spent
                await self.harness.services.fleet.settle(run, held, 0.0)

    async def charge_stopped_streams(self, run: RunState) -> None:
        """The streamed calls the run left before their last chunk (the
        stream dropped: AgentScope does not close a model stream it stops
        reading, so the run's end charges them, and closes them: their
        providers stop)."""
        for flight in list(run.streaming):
            await self._charge_stopped(run, flight)
            await close_stream(flight.stream)

    async def _charge_stopped(self, run: RunState, flight: _Streaming, how: str = "cut") -> None:
        """A streamed call stopped before its last chunk (cut at the
        deadline, cancelled, dropped, broken; ``unanswered``: timed out
        before its first), charged once: the final usage it reported before
        the break, else its request and 4 characters a token of what
        streamed (``_stopped_usage``)."""
        if not _take(run, flight):
            return
        estimate = _estimated_usage(flight.input_tokens, flight.chars, flight.model)
        usage, found = _stopped_usage(flight.attempts.usage_seen if flight.attempts else None, estimate)
        if found != "reported":
            self._estimated(run, how)
        await self.harness.charge_usage(run, flight.model, usage, flight.reservation)


def _filter_summary(state: Any, shown: Any) -> None:
    """The summary's text through the answer's filter (markers defanged,
    secrets redacted, ``pii`` applied), each of its text blocks."""
    summary = state.summary
    if isinstance(summary, str):
        state.summary = shown.apply(summary)[0]
        return
    for block in summary:
        if isinstance(block, TextBlock):
            block.text = shown.apply(block.text)[0]


def _narrowed_within_table(run: RunState, input_kwargs: dict, finish_tools: Any) -> None:
    """A round narrowed to the finishing tool (``constrain``) whose tool
    table lacks it (in a tool group not activated, or a toolkit without it:
    one Harness may serve several) is narrowed to text instead: AgentScope
    refuses a choice of a tool it does not send, and the run would fail as
    if the provider had. The ladder goes on from the text answer."""
    choice = input_kwargs.get("tool_choice")
    if choice is None or not run.facts.force_conclude or choice.mode not in (*finish_tools, "required"):
        return
    sent = {tool["function"]["name"] for tool in input_kwargs.get("tools") or ()}
    if sent.isdisjoint(finish_tools) or (choice.mode != "required" and choice.mode not in sent):
        input_kwargs["tool_choice"] = ToolChoice(mode="none")


def _fallback_call(agent: Any, input_kwargs: dict) -> bool:
    """Whether AgentScope calls its ``fallback_model`` (the model it called
    first, the tier's, failed for good): that call stays its own."""
    fallback = getattr(getattr(agent, "model_config", None), "fallback_model", None)
    return fallback is not None and input_kwargs.get("current_model") is fallback


def _unforced_while_thinking(input_kwargs: dict, model: Any) -> None:
    """A round the harness narrowed to one tool (a stopped run's structured
    output, the finishing tool near the deadline), on a model with thinking
    on, is left to the model's choice (``auto``): providers reject a forced
    ``tool_choice`` while it thinks (Anthropic's 400), and the run would
    fail as if the provider had. The hint names the tool; a round that does
    not call it meets the ladder's next step (another narrowed round, the
    fallback)."""
    choice = input_kwargs.get("tool_choice")
    if choice is not None and choice.mode not in ("auto", "none") and _thinks(model):
        input_kwargs["tool_choice"] = ToolChoice(mode="auto")


def _thinks(model: Any) -> bool:
    """Whether ``model`` has thinking on: AgentScope's ``thinking_mode``
    (Anthropic's modern control: ``enabled``, ``adaptive``) when set, else
    the ``thinking_enable`` toggle its models share."""
    parameters = getattr(model, "parameters", None)
    mode = getattr(parameters, "thinking_mode", None)
    if mode is not None:
        return mode != "disabled"
    return bool(getattr(parameters, "thinking_enable", False))


def _name(model: Any) -> str:
    """The name a model is priced by (``ChatModelBase.model``)."""
    return str(getattr(model, "model", "") or "")


def precall_stop(
    run: RunState, model_name: str, input_tokens: int, output_tokens: int, enforced_only: bool = True,
) -> str | None:
    """Why the enforcing policies ``run`` answers to (with ``enforced_only``
    false, shadow ones too: what a shadow policy would have done) would not
    send a call of ``model_name`` estimated at these tokens
    (``unpriced_model``, ``budget``), without recording or stopping
    anything; ``None``: sent."""
    unlisted = _unlisted(run, model_name)
    if unlisted and _unpriceable(unlisted, model_name, enforced_only=enforced_only):
        return "unpriced_model"
    cap = run.request_input_cap(enforced_only=enforced_only)
    if cap is not None and input_tokens > cap:
        return "budget"
    over = overspend(run, model_name, input_tokens, output_tokens)
    return "budget" if over is not None and (over.enforced or not enforced_only) else None


def _unlisted(run: RunState, name: str) -> list[tuple[CostPolicy, bool]]:
    """The capped policies (``cap_usd`` or a daily quota) of the runs ``run``
    answers to that do not list a price for ``name``, each with whether its
    Harness enforces (a shadow one's is recorded only)."""
    return [
        (cost, bound.limits.enforced) for bound in run.bounds
        if (cost := bound.limits.cost) is not None
        and (cost.cap_usd is not None or cost.daily_quota_usd is not None)
        and name not in cost.prices
    ]


def _redact_new_hints(redactor: Any, run: RunState, agent: Any) -> None:
    """Other middlewares' hints written into the context since the run's
    last call (RAG's retrieved text in the reply's message, a memory's
    recall in a message of its own; at a run's first call, all of them: one
    written where no call followed) are redacted before the model reads
    them: the request, and the context that keeps them. Only what is new
    is read: the last message read is found from the end."""
    context = agent.state.context
    if not context:
        return
    read_msg, read = run.hints_read
    at = len(context) - 1
    while at >= 0 and context[at] is not read_msg:
        at -= 1
    first, skip = (0, 0) if at < 0 else (at, read)  # the first call, or a context rewritten since: all of it
    for index in range(first, len(context)):
        content = context[index].content
        if not isinstance(content, str):
            redact_foreign_hints(redactor, content[skip if index == first else 0:])
    last = context[-1]
    run.hints_read = (last, 0 if isinstance(last.content, str) else len(last.content))


def _unpriceable(unlisted: list[tuple[CostPolicy, bool]], name: str, enforced_only: bool) -> bool:
    """Whether a policy of ``unlisted`` (an enforcing one's, with
    ``enforced_only``) has no price at all for ``name``."""
    return any(policy.price_of(name) is None and (enforced or not enforced_only) for policy, enforced in unlisted)


def _output_estimate(run: RunState, model: Any) -> int:
    """A call's output tokens, estimated: the model's ``max_tokens`` when it
    declares one (a bound), else the most one call of the run has produced
    (sub-agents included; 0 before the first answer)."""
    bound = output_bound(model)
    return run.root.largest_output_tokens if bound is None else bound


def _take(run: RunState, flight: _Streaming) -> bool:
    """Mark ``flight`` charged; whether it was not yet (its one charge)."""
    if flight.charged:
        return False
    flight.charged = True
    run.streaming.remove(flight)
    release(run, flight.held)  # charged (or failed) from here: the estimate is no longer held
    return True


def _estimated_usage(input_tokens: int, chars: int, model: Any) -> ChatUsage:
    """The estimated usage of a call its provider reported none for (one
    stopped before its last chunk: cut at the deadline, cancelled, dropped;
    a compression's attempt; an answer without usage): its request
    (``input_tokens``, estimated) and 4 characters a token of the ``chars``
    that streamed, never more than ``model`` can be billed for one call
    (``fleet.output_bound``). A call cut before it answered streamed none: no
    output (the stop text in its place was never the model's)."""
    output, bound = chars // 4, output_bound(model)
    return ChatUsage(input_tokens=input_tokens, output_tokens=output if bound is None else min(output, bound), time=0.0)


def _output_filled(usage: Any, chars: int, model: Any) -> ChatUsage | None:
    """A usage whose input the provider counted but whose output it left out
    (``null``) or counted as none for an answer that has characters (a proxy
    that reports usage on the first chunk only): the input as counted, the
    output estimated (4 characters a token). ``None``: not such a usage."""
    if not chars or not isinstance(usage, ChatUsage) or usage.output_tokens not in (None, 0):
        return None
    filled = replace(usage, output_tokens=_estimated_usage(0, chars, model).output_tokens)
    return filled if _billable(filled) else None


_ESTIMATED = {
    "filled": "the provider left out the output's count: its output was estimated",
    "estimated": "the provider reported no usage (or a negative count): charged an estimate",
    "unanswered": "an attempt timed out after its request went out: charged its request, estimated",
    "cut": "a call stopped before its answer ended: charged its request and what it sent, estimated",
}


def _charged(usage: Any, chars: int, input_tokens: int, model: Any) -> tuple[ChatUsage, str]:
    """What an answer of ``chars`` characters is charged, and how it was
    found: the provider's usage when whole (``"reported"``; an answer with
    characters has an output), else its input with the output estimated
    (``"filled"``), else the request's estimate and the answer's
    (``"estimated"``): never a free call, never less than the provider said."""
    if isinstance(usage, ChatUsage) and _billable(usage) and (usage.output_tokens or not chars):
        return usage, "reported"
    filled = _output_filled(usage, chars, model)
    if filled is not None:
        return filled, "filled"
    return _estimated_usage(input_tokens, chars, model), "estimated"


def _chars(response: ChatResponse) -> int:
    """Characters of a response's text, thinking and tool-call arguments."""
    total = 0
    for block in response.content:
        field = _CHAR_FIELD.get(type(block))
        if field is None:  # a block of a kind not met yet: its field found once (a pydantic miss raises)
            field = _CHAR_FIELD[type(block)] = _char_field(type(block))
        text = getattr(block, field, "") if field else (
            getattr(block, "text", "") or getattr(block, "thinking", "") or getattr(block, "input", "")
        )
        total += len(text) if type(text) is str else len(text or "")
    return total


_CHAR_FIELD: dict[type, str] = {}
"""Per block class: the field whose characters ``_chars`` counts ("" when
the class declares none of them: read generically)."""


def _char_field(cls: type) -> str:
    fields = getattr(cls, "model_fields", None)
    if not isinstance(fields, dict):
        return ""
    return next((name for name in ("text", "thinking", "input") if name in fields), "")


def _cut_at_deadline(run: RunState, response: ChatResponse) -> bool:
    """Whether the deadline cut this response: AgentScope's model wrapper
    swallows the cancellation of a provider call (streamed or not) and
    reports it as an unfinished (``interrupted``) response, not as our
    timeout."""
    return response.finished_reason != FinishedReason.COMPLETED and run.past_deadline()


_COMPRESSION: ContextVar[tuple[ModelGuard, RunState] | None] = ContextVar("harness_compression", default=None)


class ModelCallRefused(HarnessError):
    """A model call made outside the reasoning loop (a middleware's own: a
    router's classifier, a reranker, a memory's retrieval) that the run's
    limits do not allow. AgentScope's middlewares catch it as a failed call
    and go on without it (the agent's model, the vector order)."""


class CompressionRefused(ModelCallRefused):
    """A compression request the run's limits do not allow. AgentScope
    catches it as a failed summary and truncates the context instead (with
    its fallback off, the harness keeps the context as it is)."""


def guard_structured_calls(cls: type) -> None:
    """AgentScope calls a model's ``generate_structured_output`` below
    ``on_model_call``: its context compression, and middlewares of its own
    (a router's classifier, RAG's reranker, agentic memory's retrieval).
    Inside a harnessed ``compress_context`` such a call is the compression's;
    anywhere else in a live run it is the run's (``_live_guard``). Either
    goes through ``ModelGuard.guarded_call``, once (a call inside a
    harnessed or guarded one, an override calling ``super()``, passes
    through): no model call of a run escapes its limits. Installed on
    ``cls``'s own method (``ChatModelBase``'s, at the Harness's
    construction; an agent model's override, at its compression)."""

    def wrap(inner: Any) -> Any:
        async def generate(self: Any, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            if _ATTEMPTS.get() is not None:  # within a harnessed or guarded call: counted there
                return await inner(self, messages, *args, **kwargs)
            guarded = _COMPRESSION.get()
            compression = guarded is not None
            if guarded is None:
                guarded = _live_guard()
            if guarded is None:
                return await inner(self, messages, *args, **kwargs)
            guard, run = guarded
            schema = _schema_sent(kwargs.get("structured_model", args[0] if args else None))
            return await guard.guarded_call(
                run, self, messages, lambda: inner(self, messages, *args, **kwargs), compression, schema,
            )

        return generate

    _wrap_once(cls, "generate_structured_output", wrap)


def _schema_sent(structured_model: Any) -> list[Any]:
    """What AgentScope sends beside the messages of a structured call: the
    output's JSON schema, as a tool of the request (its size counts)."""
    if isinstance(structured_model, dict):
        return [structured_model]
    if isinstance(structured_model, type) and issubclass(structured_model, BaseModel):
        return [structured_model.model_json_schema()]
    return []


_SIDE_CALLS = itertools.count()
"""Ids of a middleware's own calls (their rate units are their own: several
may be in flight beside the run's own call)."""

_REPLY_CODE = Agent._reply.__code__
"""The code of AgentScope's reply chain: a frame running it is an agent replying."""


def _live_guard() -> tuple[ModelGuard, RunState] | None:
    """The guard and run a call made here belongs to: the live run of the
    innermost agent replying on this task's stack (a middleware's own call
    inside its reply, even outside the harness's steps: a router placed
    before the harness's middlewares; a sub-agent's, never its lead's), else
    the run bound in the context (a task a step started). ``None``: no
    run, or one that has settled (a task that outlived it). A stream the
    caller stopped reading is on no stack: it claims none of its calls."""
    run = _replying() or current_run()
    if run is None or not _open_to_calls(run) or run.table.guard is None:
        return None
    return run.table.guard, run


def _after_end(run: RunState) -> None:
    """A call of a run past its end, made or refused, changes its books: the
    reply's close says it again (``RunState.said_after_end``)."""
    if run.reopen is not None and run.report is not None:
        run.said_after_end = True


def _open_to_calls(run: RunState) -> bool:
    """Whether a call made now belongs to ``run``: it is live, parked for a
    human (a task it started runs on: its call is judged, and refused, as
    the run's), or past its end with its reply still open (a judge of the
    answer, a grader of the final message: ``RunState.said_after_end``);
    not settled (a task that outlived it)."""
    report = run.report
    return run.table.get(run.run_id) is run and (
        report is None or report.terminal_state is TerminalState.WAITING_INPUT or run.reopen is not None
    )


def _replying() -> RunState | None:
    """The live run of the innermost harnessed agent whose reply chain is
    running on this stack (read only for a model call a middleware makes
    itself: a few dozen frames, rarely)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code is _REPLY_CODE:
            agent = frame.f_locals.get("self")
            for middleware in getattr(agent, "_reply_middlewares", ()):
                table = getattr(getattr(middleware, "harness", None), "table", None)
                run = table.current.get(agent) if isinstance(table, RunTable) else None
                if run is not None and _open_to_calls(run):  # a settled one: the agent replies in its caller's run
                    return run
        frame = frame.f_back
    return None


def _final(text: str) -> ChatResponse:
    return ChatResponse(content=[TextBlock(text=text)], is_last=True)


def _final_stream(text: str, streamed: bool) -> tuple[ChatResponse, ...]:
    """A stream's end that answers ``text``: AgentScope streams the chunks
    before the last one, and keeps the last one as the message. After text
    already shown, a chunk of nothing first ends the blocks the cut left
    open (AgentScope ends a stream a chunk lacks), so the answer follows as
    a text block of its own, never as more of the cut one."""
    answer = ChatResponse(content=[TextBlock(text=text)], is_last=False)
    if streamed:
        return ChatResponse(content=[], is_last=False), answer, _final(text)
    return answer, _final(text)


