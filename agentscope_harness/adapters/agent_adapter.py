"""HarnessAgentAdapter: the model side. Owns the run slot's lifetime
(``on_reply``), runs ``pre_think``/``post_reflect`` around each model call
(``on_reasoning``), swaps the model per tier and counts usage
(``on_model_call``) and appends the stable rules (``on_system_prompt``).

It only acts on what hooks decided: hints go into ``agent.state`` before the
model call (prefix-cache safe), ``force_conclude`` narrows ``tool_choice``
through ``mode`` only, a ``fallback_answer`` ends the reply without a model
call, and a request for another round holds back one ``ReplyEndEvent``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextvars import Token
from typing import TYPE_CHECKING, Any

from agentscope.event import (
    CustomEvent,
    ExternalExecutionResultEvent,
    HintBlockEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from agentscope.message import (
    AssistantMsg,
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
)
from agentscope.middleware import MiddlewareBase
from agentscope.model import ChatResponse
from agentscope.tool import ToolChoice
from agentscope.types import ReplyFinishedReason

from ..context import ContextResult, HookContext, ModelOutputView, estimate_tokens
from ..deadline import _DEADLINE, tighter
from ..errors import DependencyDown
from ..report import TerminalState
from ..run_state import CURRENT_RUN, RunState
from ..stores import daily_left

if TYPE_CHECKING:
    from ..harness import Harness

log = logging.getLogger("agentscope_harness")

_RESUME_EVENTS = (UserConfirmResultEvent, ExternalExecutionResultEvent, UserInterruptEvent)
HINT_SOURCE = "harness"
WITHHELD_ANSWER = (
    "I'm sorry, I could not produce an answer I can stand behind. "
    "Please try again."
)


def run_of(harness: "Harness", agent: Any) -> RunState | None:
    """The live run of ``agent``'s current reply in ``harness``'s table."""
    run = CURRENT_RUN.get()
    reply_id = agent.state.reply_id
    if run is not None and run.run_id == reply_id and run.table is harness.table:
        return run
    return harness.table.get(reply_id)


class HarnessAgentAdapter(MiddlewareBase):
    """The model-side middleware (first of ``harness.middlewares()``)."""

    def __init__(self, harness: "Harness") -> None:
        self.harness = harness

    async def get_middleware_key(self) -> str:
        """Distinct from other middlewares' keys in ``middle_context``."""
        return "agentscope_harness.agent"

    # --------------------------------------------------------- system prompt

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        """Append the harness rules: a pure function of the config, cached."""
        harness = self.harness
        if not harness.enabled or harness.shadow:
            return current_prompt
        return current_prompt + await harness.system_prompt_addition()

    # ----------------------------------------------------------------- reply

    async def on_reply(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """Own the run slot: open it on ``ReplyStartEvent``, keep it across a
        HITL park, settle and drop it in ``finally``."""
        harness = self.harness
        if not harness.enabled:
            async for item in next_handler(**input_kwargs):
                yield item
            return

        run: RunState | None = None
        tokens: list[tuple[Any, Token]] = []
        if isinstance(input_kwargs.get("inputs"), _RESUME_EVENTS):
            run = harness.table.get(agent.state.reply_id)
            if run is not None:
                run.report = None  # the park's provisional report is superseded
                tokens = _enter(run)
        end_reason: str | None = None
        parked = False
        failure: BaseException | None = None
        try:
            async for item in next_handler(**input_kwargs):
                kind = _REPLY_KINDS.get(type(item))
                if kind is None:
                    kind = _kind_of(type(item), _REPLY_KINDS, _REPLY_CLASSES)
                if kind == 0:  # most events: nothing to do
                    yield item
                    continue
                if kind == 1:  # ReplyStartEvent
                    if run is None or run.run_id != item.reply_id:
                        run = await self._open(agent, item)
                        tokens = _enter(run)
                    yield item
                    continue
                if run is None:
                    yield item
                    continue
                if kind == 2:  # ReplyEndEvent
                    if self._hold(agent, run, item):
                        continue
                    # Settle before the end event: consumers expect the final
                    # Msg right after it. The candidate answer is the very
                    # object the agent yields next, so rewriting it here
                    # rewrites what the caller receives.
                    end_reason = str(getattr(item.finished_reason, "value", item.finished_reason))
                    await self._session_end(agent, run, run.candidate, end_reason)
                    for event in _closing_events(run):
                        yield event
                    yield item
                    continue
                if kind == 3 and end_reason is None:  # parked on HITL
                    parked = True
                    harness.remember_parked(agent, run)
                    await harness.settle(run, agent, TerminalState.WAITING_INPUT, _park_reason(agent))
                    for event in _closing_events(run):
                        yield event
                yield item
        except BaseException as exc:
            failure = exc
            raise
        finally:
            _exit(tokens)
            if run is not None and not parked:
                try:
                    if failure is not None and not isinstance(failure, GeneratorExit):
                        _close_dangling_tool_calls(agent, failure)
                    if run.report is None:
                        state, reason = _abnormal_end(failure, harness, run, end_reason)
                        await harness.settle(run, agent, state, reason)
                finally:
                    harness.table.drop(run.run_id)

    async def _open(self, agent: Any, start: ReplyStartEvent) -> RunState:
        harness = self.harness
        config = harness.config
        parent = CURRENT_RUN.get()
        if parent is not None and parent.run_id == start.reply_id:
            parent = None
        principal = harness.current_principal()
        if principal is None and parent is not None:
            principal = parent.principal
        deadline = None
        if harness.env.deadline_enabled:
            if config.deadline_s is not None:
                deadline = time.monotonic() + config.deadline_s
            deadline = tighter(deadline, _DEADLINE.get())
            if parent is not None:
                deadline = tighter(deadline, parent.deadline)
        harness.forget_parked(agent)
        run = harness.table.open(
            run_id=start.reply_id,
            agent_name=getattr(agent, "name", "agent"),
            session_id=getattr(start, "session_id", None),
            principal=principal,
            deadline=deadline,
            parent=parent,
            mode=config.mode,
        )
        cost = config.cost
        # a nested run spends its root's quota: only a root reads the store
        if parent is None and principal is not None and cost is not None and (
            cost.daily_quota_usd is not None
        ):
            try:
                spent = await harness.store.get_spend(principal.key)
                run.daily_left_usd = daily_left(cost.daily_quota_usd, spent)
            except Exception as exc:  # noqa: BLE001 - fail the budget closed
                run.daily_left_usd = 0.0
                run.store_error = str(DependencyDown("spend store", exc))
        return run

    def _hold(self, agent: Any, run: RunState, end: ReplyEndEvent) -> bool:
        """Hold back one completed ``ReplyEndEvent`` when a hook asked for
        another round (and the loop can make one)."""
        if not run.hold_reply_end:
            return False
        run.hold_reply_end = False
        return (
            end.finished_reason == ReplyFinishedReason.COMPLETED
            and agent.state.cur_iter < agent.react_config.max_iters
        )

    async def _session_end(
        self, agent: Any, run: RunState, msg: Msg | None, end_reason: str,
    ) -> None:
        """``on_session_end`` hooks on the final answer, then settle."""
        harness = self.harness
        original = (msg.get_text_content() or "") if msg is not None else ""
        ctx = HookContext("on_session_end", run, harness, agent, final_text=original)
        ctx.end_reason = end_reason
        refusal = await harness.runner.run("on_session_end", ctx)
        if refusal is not None:
            ctx.final_text = WITHHELD_ANSWER
            run.facts.conclude(TerminalState.INCOMPLETE, "audit_failed", override=True)
        if msg is not None and not harness.shadow and ctx.final_text != original:
            _rewrite_text(msg, ctx.final_text or "")
        if run.report is None:
            state, reason = harness.terminal_from_facts(run, end_reason)
            await harness.settle(run, agent, state, reason)

    # ------------------------------------------------------------- reasoning

    async def on_reasoning(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """``pre_think`` before the model call, ``post_reflect`` after it."""
        harness = self.harness
        run = run_of(harness, agent) if harness.enabled else None
        if run is None:
            async for item in next_handler(**input_kwargs):
                yield item
            return
        enforce = not harness.shadow
        run.candidate = None
        for event in _flush(run):
            yield event

        ctx = HookContext(
            "pre_think", run, harness, agent,
            results_in_context=lambda: _results_in_context(agent, run.result_sizes),
        )
        await harness.runner.run("pre_think", ctx)
        if enforce:
            if ctx.prune:
                _prune_results(agent, run, set(ctx.prune))
            # post_reflect hints of a round that called tools come first
            if run.deferred_hints or ctx.hints:
                deferred, run.deferred_hints = run.deferred_hints, []
                for event in _add_hints(agent, run, deferred + ctx.hints):
                    yield event
            if ctx.fallback_answer is not None:
                for event in _flush(run):
                    yield event
                async for item in _answer_without_model(agent, ctx.fallback_answer):
                    if isinstance(item, Msg):
                        run.candidate = item
                    yield item
                return
            if run.facts.force_conclude and input_kwargs.get("tool_choice") is None:
                input_kwargs["tool_choice"] = self._conclude_choice(run)

        held: Msg | None = None
        before = _tail_of_reply(agent)
        redact = harness.redactor.stream if harness.stream_redaction else None
        streams: dict[str, Any] = {}
        async for item in next_handler(**input_kwargs):
            kind = _REASONING_KINDS.get(type(item))
            if kind is None:
                kind = _kind_of(type(item), _REASONING_KINDS, _REASONING_CLASSES)
            if kind == 0:
                yield item
                continue
            if kind == 1:  # Msg: the candidate final answer, held for post_reflect
                held = run.candidate = item
                continue
            if redact is not None:
                if kind == 2:  # TextBlockDeltaEvent
                    stream = streams.get(item.block_id)
                    if stream is None:
                        stream = streams[item.block_id] = redact()
                    safe = stream.feed(item.delta)
                    if safe:
                        yield item.model_copy(update={"delta": safe})
                    continue
                if kind == 3 and item.block_id in streams:  # TextBlockEndEvent
                    rest = streams.pop(item.block_id).flush()
                    if rest:
                        yield TextBlockDeltaEvent(
                            reply_id=item.reply_id, block_id=item.block_id, delta=rest,
                        )
            yield item

        calls = _new_tool_calls(agent, before)
        text = held.get_text_content() or "" if held is not None else ""
        post = HookContext(
            "post_reflect", run, harness, agent, model_output=ModelOutputView(text, calls),
        )
        await harness.runner.run("post_reflect", post)
        if enforce:
            if calls:
                # a hint between the tool calls and their results would break
                # the provider's message order: give it before the next call
                run.deferred_hints.extend(post.hints)
            else:
                for event in _add_hints(agent, run, post.hints):
                    yield event
            if post.another_round is not None and held is not None:
                run.hold_reply_end = True
        for event in _flush(run):
            yield event
        if held is not None:
            yield held

    def _conclude_choice(self, run: RunState) -> ToolChoice:
        """Narrow to the finishing tool (by ``mode``, never ``tools=``)."""
        finish = sorted(self.harness.finish_tools)
        if run.facts.terminal is not None or not finish:
            return ToolChoice(mode="none")
        return ToolChoice(mode=finish[0] if len(finish) == 1 else "required")

    # ------------------------------------------------------------ model call

    async def on_model_call(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any],
    ) -> Any:
        """Serve the call with the tier's model; count calls, tokens and USD."""
        harness = self.harness
        run = run_of(harness, agent) if harness.enabled else None
        if run is None:
            return await next_handler(**input_kwargs)
        cost = harness.config.cost
        tier = run.root.facts.tier
        if cost is not None and tier != "full" and not harness.shadow:
            swap = cost.tier_models.get(tier) or cost.tier_models.get("lite")
            if swap is not None:
                input_kwargs["current_model"] = swap
        model = input_kwargs.get("current_model") or agent.model
        run.add_model_call()
        result = await next_handler(**input_kwargs)
        if isinstance(result, ChatResponse):
            await harness.charge_usage(run, model, result.usage)
            return result

        async def counted() -> AsyncGenerator:
            async for chunk in result:
                if chunk.is_last:
                    await harness.charge_usage(run, model, chunk.usage)
                yield chunk

        return counted()


# ------------------------------------------------------------------ helpers


# What the adapter does with a streamed item, cached by type: ``isinstance``
# on pydantic models goes through ABCMeta, and every event of a reply passes
# here. Index in the tuple + 1; 0 = pass through untouched.
_REPLY_CLASSES: tuple[type, ...] = (ReplyStartEvent, ReplyEndEvent, Msg)
_REASONING_CLASSES: tuple[type, ...] = (Msg, TextBlockDeltaEvent, TextBlockEndEvent)
_REPLY_KINDS: dict[type, int] = {}
_REASONING_KINDS: dict[type, int] = {}


def _kind_of(cls: type, cache: dict[type, int], classes: tuple[type, ...]) -> int:
    kind = next((i + 1 for i, c in enumerate(classes) if issubclass(cls, c)), 0)
    cache[cls] = kind
    return kind


def _enter(run: RunState) -> list[tuple[Any, Token]]:
    return [(CURRENT_RUN, CURRENT_RUN.set(run)), (_DEADLINE, _DEADLINE.set(run.deadline))]


def _exit(tokens: list[tuple[Any, Token]]) -> None:
    # A generator finalised from another context (GC after an abandoned
    # stream) cannot reset there; the values die with that context anyway.
    for var, token in reversed(tokens):
        try:
            var.reset(token)
        except ValueError:
            pass


def _closing_events(run: RunState) -> list[CustomEvent]:
    """The last decisions and the report, emitted once the run settled."""
    events = _flush(run)
    if run.report is not None:
        events.append(CustomEvent(name="harness.report", value=run.report.model_dump(mode="json")))
    return events


def _park_reason(agent: Any) -> str:
    """Why a reply parked: a user confirmation or an outside answer (e.g.
    AgentScope's ``AskUser``)."""
    awaiting = agent.state.get_awaiting_tool_calls(agent.name)
    if any(call.state == ToolCallState.ASKING for call in awaiting):
        return "awaiting_confirmation"
    return "awaiting_input"


def _flush(run: RunState) -> list[CustomEvent]:
    if not run.unflushed:
        return []
    return [
        CustomEvent(name="harness.decision", value=d.as_event_value(run.run_id))
        for d in run.take_unflushed()
    ]


def _add_hints(agent: Any, run: RunState, hints: list[tuple[str, str]]) -> list[HintBlockEvent]:
    """Persist hints in the reply's message before the model call (where
    the next payload only extends the last one)."""
    events = []
    for _, text in hints:
        block = HintBlock(hint=f"<system-reminder>{text}</system-reminder>", source=HINT_SOURCE)
        agent.state.append_context(agent.name, [block])
        events.append(
            HintBlockEvent(
                reply_id=agent.state.reply_id, block_id=block.id,
                source=block.source, hint=block.hint,
            ),
        )
    return events


async def _answer_without_model(agent: Any, answer: str) -> AsyncGenerator:
    """End the reply with ``answer`` as if the model had said it."""
    block = TextBlock(text=answer)
    reply_id = agent.state.reply_id
    agent.state.append_context(agent.name, [block])
    yield TextBlockStartEvent(reply_id=reply_id, block_id=block.id)
    yield TextBlockDeltaEvent(reply_id=reply_id, block_id=block.id, delta=answer)
    yield TextBlockEndEvent(reply_id=reply_id, block_id=block.id)
    yield AssistantMsg(
        id=reply_id,
        name=agent.name,
        content=[block],
        usage=agent._get_reply_usage(),
        finished_reason=ReplyFinishedReason.COMPLETED,
    )


PRUNED = "[pruned: an earlier result of {name} ({tokens} tokens), kept as ref {ref}]"


def _result_text(block: ToolResultBlock) -> str:
    output = block.output
    if isinstance(output, str):
        return output
    if len(output) == 1 and type(output[0]) is TextBlock:  # the usual result
        return output[0].text
    return "".join(b.text for b in output if isinstance(b, TextBlock))


def _context_result(block: ToolResultBlock) -> ContextResult:
    text = _result_text(block)
    return ContextResult(
        id=block.id, name=block.name, tokens=estimate_tokens(text),
        pruned=text.startswith("[pruned: "),
    )


def _results_in_context(agent: Any, sizes: dict[str, ContextResult]) -> list[ContextResult]:
    """The tool results in the agent's context, oldest first. ``sizes`` (the
    run's cache by result id) spares re-reading a result's text every round;
    pruning, the only rewrite of a stored result, refreshes its entry."""
    out: list[ContextResult] = []
    for msg in agent.state.context:
        if isinstance(msg.content, str):
            continue
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                entry = sizes.get(block.id)
                if entry is None:
                    entry = sizes[block.id] = _context_result(block)
                out.append(entry)
    return out


def _new_tool_calls(agent: Any, before: tuple[Any, int]) -> list[tuple[str, str]]:
    """``(name, input)`` of the tool calls the model call just added to this
    reply's message (blocks appended since ``before``), without rescanning
    the whole reply."""
    state = agent.state
    if not state.context:
        return []
    last = state.context[-1]
    if last.role != "assistant" or last.name != agent.name or last.id != state.reply_id:
        return []
    if isinstance(last.content, str):
        return []
    start = before[1] if last is before[0] else 0
    return [(b.name, b.input) for b in last.content[start:] if isinstance(b, ToolCallBlock)]


def _tail_of_reply(agent: Any) -> tuple[Any, int]:
    """The reply's message and its block count, before a model call."""
    state = agent.state
    if state.context:
        last = state.context[-1]
        if last.id == state.reply_id and not isinstance(last.content, str):
            return last, len(last.content)
    return None, 0


def _prune_results(agent: Any, run: RunState, ids: set[str]) -> None:
    """Replace the chosen results with a placeholder; the full text stays in
    the run's artifacts under its ref."""
    for msg in agent.state.context:
        if isinstance(msg.content, str):
            continue
        for block in msg.content:
            if isinstance(block, ToolResultBlock) and block.id in ids:
                text = _result_text(block)
                run.artifacts.setdefault(block.id, text)
                block.output = PRUNED.format(
                    name=block.name, tokens=estimate_tokens(text), ref=block.id,
                )
                run.result_sizes[block.id] = _context_result(block)


def _rewrite_text(msg: Msg, text: str) -> None:
    """Replace the text of the final message in place: its blocks are the
    stored context's, so history is rewritten too."""
    if isinstance(msg.content, str):
        msg.content = text
        return
    blocks = [b for b in msg.content if isinstance(b, TextBlock)]
    if not blocks:
        msg.content.append(TextBlock(text=text))
        return
    blocks[0].text = text
    for block in blocks[1:]:
        block.text = ""


def _close_dangling_tool_calls(agent: Any, failure: BaseException) -> None:
    """A reply that raised may leave tool calls without a result; providers
    reject such a history, so close them with an error result."""
    try:
        dangling = agent.state.get_unfinished_tool_calls(agent.name)
    except Exception:  # noqa: BLE001
        return
    for call in dangling:
        if call.state in (ToolCallState.ASKING, ToolCallState.SUBMITTED):
            continue
        call.state = ToolCallState.FINISHED
        agent.state.append_context(
            agent.name,
            [
                ToolResultBlock(
                    id=call.id,
                    name=call.name,
                    output=f"The call did not complete: the reply failed ({type(failure).__name__}).",
                    state=ToolResultState.ERROR,
                ),
            ],
        )


def _abnormal_end(
    failure: BaseException | None, harness: "Harness", run: RunState, end_reason: str | None,
) -> tuple[TerminalState, str]:
    if isinstance(failure, (asyncio.CancelledError, GeneratorExit)):
        return TerminalState.CANCELLED, "cancelled"
    if failure is not None:
        return TerminalState.FAILED, f"error: {type(failure).__name__}: {failure}"[:300]
    return harness.terminal_from_facts(run, end_reason)
