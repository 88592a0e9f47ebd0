"""HarnessAgentAdapter: the model side, translating between AgentScope and
the harness. ``on_reply`` hands the run's life to ``ReplyLifecycle``;
``on_reasoning`` runs ``pre_think``/``post_reflect`` around each model call;
``on_model_call`` serves the call with the tier's model and counts usage;
``on_system_prompt`` appends the stable rules.

It only acts on what hooks decided: hints go into ``agent.state`` before the
model call (prefix-cache safe), ``force_conclude`` narrows ``tool_choice``
through ``mode`` only, a ``fallback_answer`` ends the reply without a model
call, and a request for another round holds back one ``ReplyEndEvent``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from agentscope.event import (
    DataBlockDeltaEvent,
    DataBlockEndEvent,
    DataBlockStartEvent,
    HintBlockEvent,
    ModelCallEndEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agentscope.message import (
    AssistantMsg,
    HintBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agentscope.middleware import MiddlewareBase
from agentscope.tool import ToolChoice
from agentscope.types import ReplyFinishedReason

from ..chains import close_stream, release
from ..context import (
    EXPLORING_HINTS,
    PRUNED,
    STRUCTURED_OUTPUT_TOOL,
    ContextResult,
    HookContext,
    ModelOutputView,
    estimate_tokens,
    is_pruned,
    structured_output_owed,
)
from ..facts import finish_required, owes_finish
from ..hooks.context_shaping import finish_rule
from ..lazy import made
from ..lifecycle import ReplyLifecycle, flush, rounds_left, shape_served_in_context, text_block_events
from ..outcome import (
    answer_is_replaced,
    finish_bypassed,
    overrules_answer,
    structured_output_is_withheld,
)
from ..outputs import HINT_SOURCE, OutputFilter, OutputStream, answer_filter, shown_name
from ..report import TerminalState
from ..run_state import ResultAccount, RunState, current_run

if TYPE_CHECKING:
    from ..harness import Harness

STRUCTURED_ROUNDS = 2


def run_of(harness: Harness, agent: Any) -> RunState | None:
    """The live run of ``agent``'s current reply in ``harness``'s table."""
    run = current_run()
    reply_id = agent.state.reply_id
    if run is not None and run.run_id == reply_id and run.table is harness.table:
        return run
    return harness.table.get(reply_id)


class HarnessMiddleware(MiddlewareBase):
    """Either adapter: under ``HARNESS_ENABLED=0`` AgentScope finds none of
    its hooks, so an adapter built by hand passes everything through
    untouched, at no cost, as ``middlewares()`` returning none does."""

    harness: Harness

    def is_implemented(self, hook_name: str) -> bool:
        """AgentScope's test of whether this middleware has ``hook_name``."""
        return self.harness.enabled and super().is_implemented(hook_name)


class HarnessAgentAdapter(HarnessMiddleware):
    """The model-side middleware (first of ``harness.middlewares()``)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self._plain_filters: tuple[OutputFilter, OutputFilter] | None = None

    async def get_middleware_key(self) -> str:
        """Distinct from other middlewares' keys in ``middle_context``."""
        return "agentscope_harness.agent"

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        """Append the harness rules: a pure function of the config, cached;
        less the finishing tool's rule for an agent not held to it (a
        sub-agent without one answers its lead in text)."""
        addition = await self.harness.system_prompt_addition()
        run = run_of(self.harness, agent)
        if run is not None and run.parent is not None:  # a root run is held to what its config requires
            rule = finish_rule(self.harness.config)
            if rule is not None and not finish_required(run, self.harness.config):
                addition = addition.replace(f"\n- {rule}", "")
        return current_prompt + addition

    # ----------------------------------------------------------------- reply

    def on_reply(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """Hand the run's whole life to its lifecycle: its generator is this
        layer of the reply chain."""
        return ReplyLifecycle(self.harness, agent).reply(input_kwargs, next_handler)

    # ------------------------------------------------------------- reasoning

    async def on_reasoning(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """``pre_think`` before the model call, ``post_reflect`` after it. In
        a run with a finishing tool a text answer may be replaced by another
        round, and once the fallback replaces any answer (``answer_is_replaced``)
        so is the model's: its text is shown only once it is known to stand,
        and a structured output's made-up arguments never. One generator
        layer: the model's events pass through no other here."""
        inner = None  # the model's events, closed with this layer (its provider's stream with them)
        shown: _Shown | None = None
        try:
            run = run_of(self.harness, agent)
            if run is None:
                inner = next_handler(**input_kwargs)
                async for item in inner:
                    yield item
                return
            if run.reopen is not None:  # a round after an end a middleware before the harness's swallowed
                run.reopen()
            run.candidate = run.harness_answer = None  # this round's answer is still to come
            run.harness_choice = None  # this round's narrowing, if the harness makes one
            run.turns += 1
            pre = await self._pre_think(agent, run)
            for event in pre.events:
                yield event
            if pre.answer is not None:
                narrowed = self._structured_conclusion(agent, run, input_kwargs)
                if narrowed is None:
                    run.answer_owed = None
                    if structured_output_owed(agent):
                        _last_iteration(agent)
                        run.ended_at_cap = True
                    async for item in self._answer(agent, run, pre.answer):
                        yield item
                    return
                run.answer_owed = self._said(run, pre.answer)  # the reply's text once the output is made
                run.harness_answer = None if pre.answer == run.facts.tool_answer else run.answer_owed
                for event in narrowed:
                    yield event
            if run.facts.force_conclude and input_kwargs.get("tool_choice") is None and not self.harness.shadow:
                input_kwargs["tool_choice"] = run.harness_choice = self._conclude_choice(agent, run)
            before = _tail_of_reply(agent)
            held: Msg | None = None
            enforcing = not self.harness.shadow
            replaced = answer_is_replaced(run) and enforcing
            # held back until the round is known to call tools: a text answer
            # another round replaces, or the fallback replaces whatever it says
            finish = self.harness.finish_tools
            interim = replaced or (enforcing and bool(finish) and owes_finish(run, finish))
            owed = enforcing and structured_output_owed(agent)
            outputs = _OutputCalls(structured_output_is_withheld(run)) if owed else None
            silent = enforcing and run.answer_owed is not None  # a narrowed round's text: the answer owed is
            in_place: set[str] = set()  # text blocks the harness answered this call with
            said_in_place: set[str] = set()  # the same, of text held back
            text_events: list[Any] = []
            shown = self._shown(run)
            try:
                inner = next_handler(**input_kwargs)
                async for whole in inner:
                    for raw in _pieces(whole):
                        if raw is not whole:  # a megabyte delta (a model that does not stream): the loop turns between
                            await asyncio.sleep(0)
                        for item in shown(raw) if shown is not None else (raw,):
                            if isinstance(item, Msg):  # the candidate final answer, held for post_reflect
                                held = run.candidate = item
                            elif type(item) in _TEXT_EVENTS and owed and _answered_in_place(item, run, in_place):
                                continue
                            elif (interim or silent) and type(item) in _ANSWER_EVENTS:
                                _answered_in_place(item, run, said_in_place)
                                text_events.append(item)
                            else:
                                if interim and not silent and type(item) is ToolCallStartEvent and not (
                                    outputs is not None and outputs.withheld
                                    and item.tool_call_name == STRUCTURED_OUTPUT_TOOL
                                ):
                                    # a round that calls tools is not replaced: its text goes first
                                    interim = False
                                    for event in text_events:
                                        yield event
                                    text_events = []
                                if outputs is not None:
                                    if outputs.held(item, everything=not interim):
                                        continue
                                    if type(item) is ToolCallStartEvent:
                                        outputs.beside = True
                                    elif type(item) is ModelCallEndEvent:  # the round's calls are all known
                                        for event in outputs.shown():
                                            yield event
                                yield item
            except Exception:
                answer = self.harness.model_guard.model_failed(run)
                if answer is None:
                    raise
                withheld = {_id_of(e) for e in (*text_events, *(outputs.events if outputs is not None else ()))}
                for event in shown.broken() if shown is not None else ():  # the blocks it showed open end
                    if _id_of(event) not in withheld:
                        yield event
                async for item in self._answer(agent, run, answer):
                    yield item
                return
            if outputs is not None:
                for event in outputs.shown():
                    yield event
            # the model itself answered where the fallback replaces it (not a
            # stop during the call, such as the deadline's, in its place)
            made_up = replaced and run.facts.terminal is None and (held is not None or bool(outputs and outputs.ids))
            config = self.harness.config
            answered = enforcing and held is not None and run.facts.terminal is None  # not a stop in its place
            message, start = _round_in_context(agent, before)
            added = message.content[start:] if message is not None else []
            calls = [(b.name, b.input) for b in added if isinstance(b, ToolCallBlock)]
            events, another_round = await self._post_reflect(agent, run, held, calls)
            if in_place and held is not None and message is not None:
                _forget_said(message, start, held)  # the stop's text: a later round says it, once
            if shown is not None:  # stored as the user saw it (an answer that stands: its text is the audit's)
                text = held is None or another_round
                if message is not None:
                    _filter_round(message, start, held, shown.answer, text)
                elif held is not None:  # not in the context (a middleware took it out): the message alone
                    _filter_round(held, 0, None, shown.answer, text)
            overruled = answered and overrules_answer(run, config)  # a rule's stop on this very answer stands
            if (made_up and not another_round) or overruled:
                run.answer_made_up = True  # whatever ended the run in this round, corrected_answer replaces it
                if made_up and not calls and structured_output_owed(agent):
                    # AgentScope would ask again for an output that is withheld whatever it says: ended here
                    _last_iteration(agent)
                    run.ended_at_cap = True
            not_given = answer_is_replaced(run) or finish_bypassed(run, config) or overruled
            if said_in_place:  # cut mid-answer, the stop's text said in its place: the cut text never stands
                text_events = [e for e in text_events if e.block_id in said_in_place]
            if not (another_round or made_up or (enforcing and not_given) or silent):
                events = text_events + events  # else the user never sees an answer the run replaced
            for event in events:
                yield event
            if held is not None:
                yield held
        finally:
            if shown is not None:
                shown.taken = False
            await close_stream(inner)
            release(next_handler)

    async def _answer(self, agent: Any, run: RunState, text: str) -> AsyncGenerator:
        """The harness answers in the model's place (filtered like the model's own)."""
        said = self._said(run, text)
        # its own words (a stop's text, the fallback and what the run found)
        # claim nothing; a finishing tool's answer is the model's
        run.harness_answer = None if text == run.facts.tool_answer else said
        async for item in _answer_without_model(agent, said):
            if isinstance(item, Msg):
                run.candidate = item
            yield item

    async def _pre_think(self, agent: Any, run: RunState) -> _PreThink:
        """Run ``pre_think``; apply pruning and hints; the fallback answer."""
        harness = self.harness
        events: list[Any] = flush(run)
        if run.admitted:  # served results whose end was not read (the reply stopped at a question)
            await shape_served_in_context(harness, run, agent)
        account = _results_in_context(agent, run.results)
        ctx = HookContext(
            "pre_think", run, harness.services, agent, results_in_context=account.snapshot,
        )
        await harness.runner.run("pre_think", ctx)
        if harness.shadow:
            return _PreThink(events + flush(run), _shadow_answer(ctx, run))
        if ctx.prune:
            _prune_results(run, ctx.prune)
        # post_reflect hints of a round that called tools come first; none where no model call
        # follows (the fallback answers): the context keeps them, and a later reply's model
        # would read a stale status line ("0s left") as its own
        hints, deferred = ctx.hints, made(run, "deferred_hints")
        if deferred:
            hints, run.deferred_hints = deferred + hints, []
        if ctx.fallback_answer is None:
            events += _add_hints(agent, _deliverable(run, hints))
        return _PreThink(events + flush(run), ctx.fallback_answer)

    def _shown(self, run: RunState) -> _Shown | None:
        """The filter of this round's model events (``None``: no final-answer
        audit, nothing to filter): the run's, started afresh, when no other
        round holds it and its filters are the same (a new one each round
        would outlive the collections made while the model answers, and each
        would promote it); a round run beside another (a middleware's
        best-of-two) gets one of its own."""
        if not self.harness.stream_redaction:
            return None
        answer, args = self._filters(run)
        shown = run.shown
        if shown is None or shown.taken or shown.answer is not answer or shown.args is not args:
            shown = run.shown = _Shown(answer, args)
        else:
            shown.afresh()
        shown.taken = True
        return shown

    def _filters(self, run: RunState) -> tuple[OutputFilter, OutputFilter]:
        """The filters of the answer and of every call's arguments (the
        README's ``pii`` covers all of them, a finishing tool's or not).
        Built once per harness; with ``pii`` configured both depend on the
        run (its hash salt) and are
        built per round."""
        if self._plain_filters is not None:
            return self._plain_filters
        answer = answer_filter(self.harness.services, run)
        filters = answer, OutputFilter(self.harness.args_redactor, answer.pii, answer.salt, json_args=True)
        if not answer.pii:
            self._plain_filters = filters
        return filters

    async def _post_reflect(
        self, agent: Any, run: RunState, held: Msg | None, calls: list[tuple[str, str]],
    ) -> tuple[list[Any], bool]:
        """Run ``post_reflect`` on what the model produced: its hints'
        events, and whether a hook asked for one more round."""
        harness = self.harness
        text = (held.get_text_content() or "") if held is not None else ""
        post = HookContext(
            "post_reflect", run, harness.services, agent, model_output=ModelOutputView(text, calls),
        )
        await harness.runner.run("post_reflect", post)
        events: list[Any] = []
        if not harness.shadow:
            if calls:
                # a hint between the tool calls and their results would break
                # the provider's message order: give it before the next call
                if post.hints:
                    run.deferred_hints.extend(post.hints)
            else:
                events += _add_hints(agent, _deliverable(run, post.hints))
            if post.another_round is not None and held is not None:
                run.hold_reply_end = True
                return events + flush(run), rounds_left(agent, in_round=True)
        return events + flush(run), False

    def _structured_conclusion(self, agent: Any, run: RunState, input_kwargs: dict) -> list[Any] | None:
        """A reply that owes a structured output cannot end with a text
        answer (AgentScope would loop to its iteration cap): a stopped run
        gets up to two model rounds narrowed to the structured-output tool,
        unless a dependency it needed went down (an output made without its
        data is never delivered: the reply ends with the stop text). The
        hint's events, or ``None`` when the text answer stands."""
        if not structured_output_owed(agent) or run.structured_rounds >= STRUCTURED_ROUNDS:
            return None
        if run.past_deadline():
            return None  # a narrowed round cannot reach the model past the deadline
        if run.facts.dependency_down or run.model_cap_reached_above():
            return None  # no output made without its data; no rounds past a cap the lead holds
        if run.ended_callless():
            return None
        run.structured_rounds += 1
        run.narrowed_round = True
        input_kwargs["tool_choice"] = run.harness_choice = ToolChoice(mode=STRUCTURED_OUTPUT_TOOL)
        self.harness.services.record(run, "liveness_watchdog", "pre_think", "constrain", enforced=True,
                                     detail=f"stopped: one round narrowed to {STRUCTURED_OUTPUT_TOOL}")
        hint = f"Conclude now: call {STRUCTURED_OUTPUT_TOOL} with your final answer, from what you have."
        return [*_add_hints(agent, [("structured", hint)]), *flush(run)]

    def _said(self, run: RunState, text: str) -> str:
        """An answer the harness gives in the model's place (a fallback, the
        finishing tool's answer) takes the one output path the model's own
        answers take: it is streamed, so it is filtered before it is; a
        ``block`` kind found in it is the audit's to withhold it for
        (``RunState.answer_blocked``)."""
        said, found = answer_filter(self.harness.services, run).apply(text)
        if found.blocked_kinds:
            run.answer_blocked = tuple(found.blocked_kinds)
        return said

    def _conclude_choice(self, agent: Any, run: RunState) -> ToolChoice:
        """Narrow to the finishing tool (by ``mode``, never ``tools=``): the
        structured-output tool when the reply owes one."""
        if structured_output_owed(agent):
            return ToolChoice(mode=STRUCTURED_OUTPUT_TOOL)
        finish = sorted(self.harness.finish_tools)
        if run.facts.terminal is not None or not finish or not owes_finish(run, finish):
            return ToolChoice(mode="none")
        return ToolChoice(mode=finish[0] if len(finish) == 1 else "required")

    # ------------------------------------------------------------ model call

    async def on_model_call(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any],
    ) -> Any:
        """Serve the call with the tier's model, priced, within the deadline;
        count calls, tokens and USD (``model_guard.ModelGuard``)."""
        try:
            run = run_of(self.harness, agent)
            if run is None:
                return await next_handler(**input_kwargs)
            return await self.harness.model_guard.call(run, agent, input_kwargs, next_handler)
        finally:
            release(next_handler)

    async def on_compress_context(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any],
    ) -> None:
        """AgentScope's context compression makes a model call of its own:
        the run's deadline and budget hold for it (``ModelGuard.compress``)."""
        try:
            run = run_of(self.harness, agent)
            if run is None:
                await next_handler(**input_kwargs)
                return
            await self.harness.model_guard.compress(run, agent, input_kwargs, next_handler)
        finally:
            release(next_handler)


_DELTAS = (TextBlockDeltaEvent, ThinkingBlockDeltaEvent, ToolCallDeltaEvent)
_TEXT_EVENTS = (TextBlockStartEvent, TextBlockDeltaEvent, TextBlockEndEvent)
_ANSWER_EVENTS = (*_TEXT_EVENTS, DataBlockStartEvent, DataBlockDeltaEvent, DataBlockEndEvent)
"""An answer's text and what the model gave with it (its speech): held, shown and dropped together."""
_ENDS = (TextBlockEndEvent, ThinkingBlockEndEvent, ToolCallEndEvent)


class _Shown:
    """The model's events as the user may see them, through the output filter
    the final answer goes through (one output path): text and thinking
    deltas (markers stripped, secrets redacted, ``HarnessConfig.pii``
    applied), every tool call's argument deltas (secrets redacted, ``pii``
    applied). One filter per stream of
    the model's message: its text, its thinking, each call's arguments.
    AgentScope ends and reopens a block whenever a chunk lacks it (a
    thinking delta amid the text, parallel calls' argument pieces taking
    turns): a stream's end is held until it goes on (the block is shown as
    one, under its first id) or the model call ends, so a secret across the
    break is judged whole. An end whose stream holds back nothing that more
    text could change is shown where it came (AgentScope's order). Each
    stream holds back only as long as what it ends with could still change.
    A call per event, not a generator layer per round."""

    __slots__ = ("aliases", "answer", "args", "ends", "opened", "released", "streams", "taken")

    def __init__(self, answer: OutputFilter, args: OutputFilter) -> None:
        self.answer, self.args = answer, args
        self.streams: dict[str, OutputStream] = {}
        self.ends: dict[str, Any] = {}
        """Per stream, its end event, held (while what the stream holds back
        may still change) until it goes on or the call ends."""
        self.aliases: dict[str, str] = {}
        """A reopened text or thinking block's id: the id it is shown under."""
        self.opened: dict[str | None, Any] = {}
        """The start of each block shown and not yet ended, by its shown id."""
        self.released: tuple[Any, ...] = ()
        """The ends a cut gave up, shown before whatever comes next."""
        self.taken = False
        """Whether a round is filtering with it (until its layer closes)."""

    def afresh(self) -> None:
        """As a new one: no stream, nothing held, for the next model call."""
        self.streams.clear()
        self.ends.clear()
        self.aliases.clear()
        self.opened.clear()
        self.released = ()

    def cut(self) -> None:
        """The model call was cut short (the deadline): what each stream holds
        back, a secret's opening the cut left unfinished among it, is dropped,
        never sent, and the ends held for it are given before what follows
        (the fallback answer is a block of its own, never more of a cut one)."""
        self._dropped()
        self.released = (*self.released, *self._ended())

    def _dropped(self) -> None:
        """Every stream starts afresh: what each held back is gone."""
        for key, stream in self.streams.items():
            self.streams[key] = stream.source.stream()

    def __call__(self, item: Any) -> tuple[Any, ...]:
        """What the user receives for ``item``: nothing (a delta held back,
        a block's end or reopening), the item (filtered), or, at the model
        call's end, each stream's held-back rest and end before it."""
        if self.released:
            released, self.released = self.released, ()
            return (*released, *self(item))
        cls = type(item)
        if cls in _DELTAS:
            return self._delta(item, cls)
        if cls is ToolCallStartEvent:
            key = item.tool_call_id
            if self.ends.pop(key, None) is not None:  # the call's arguments go on
                return ()
            if key not in self.streams:
                self.streams[key] = self.args.stream()
            self.opened[key] = item
            return (shown_name(self.args, item),)
        if cls in _STARTS:
            ended = self.ends.pop(_STREAM_OF[cls], None)
            if ended is None:
                self.opened[item.block_id] = item
                return (item,)
            self.aliases[item.block_id] = ended.block_id  # the same text goes on: one block
            return ()
        if cls in _ENDS:
            key = item.tool_call_id if cls is ToolCallEndEvent else _STREAM_OF[cls]
            filtered = self.streams.get(key)
            if cls is not ToolCallEndEvent:
                item = _shown_as(item, self.aliases)
            if filtered is None or not filtered.open():  # nothing held could change: ended here
                rest = filtered.flush() if filtered is not None else ""
                self.opened.pop(_id_of(item), None)
                return (_delta_for(item, rest), item) if rest else (item,)
            self.ends[key] = item
            return ()
        if cls is ModelCallEndEvent:
            ended = self._ended()
            if not self.opened:  # every block ended, its stream flushed: none is kept past the call
                self.streams.clear()
            return (*ended, item)
        return (item,)  # the final message: its thinking is filtered before it is given (``_filter_round``)

    def _delta(self, item: Any, cls: type) -> tuple[Any, ...]:
        key = item.tool_call_id if cls is ToolCallDeltaEvent else _STREAM_OF[cls]
        filtered = self.streams.get(key)
        if filtered is None:
            filtered = self.streams[key] = (self.args if cls is ToolCallDeltaEvent else self.answer).stream()
        safe = filtered.feed(item.delta)
        if not safe:
            return ()
        shown = item if safe == item.delta else item.model_copy(update={"delta": safe})
        return (_shown_as(shown, self.aliases) if cls is not ToolCallDeltaEvent else shown,)

    def broken(self) -> list[Any]:
        """The model's stream broke (the harness answers in its place): the
        end of every block it showed open, without what its stream held back
        (a secret's opening the break left unfinished is never sent, as at
        ``cut``)."""
        self._dropped()
        events = [*self.released, *self._ended()]
        self.released = ()
        events += [_end_of(start) for start in self.opened.values()]
        self.opened.clear()
        return events

    def _ended(self) -> list[Any]:
        """Each ended stream's held-back rest, then its end."""
        events: list[Any] = []
        for key, end in self.ends.items():
            rest = self.streams[key].flush()
            events += (_delta_for(end, rest), end) if rest else (end,)
            self.opened.pop(_id_of(end), None)
        self.ends.clear()
        return events


PIECE_CHARS = 16_384
"""The most of one model delta the output filter reads in one step: a model
that does not stream gives its whole answer (or its arguments) as one delta."""


def _pieces(event: Any) -> tuple[Any, ...]:
    """``event``, or a delta of more than ``PIECE_CHARS`` in pieces of that
    size (as a streaming model would have sent it)."""
    if type(event) not in _DELTAS or len(event.delta) <= PIECE_CHARS:
        return (event,)
    fields = event.model_dump(exclude={"id", "delta"})  # each piece an event of its own: its own id
    return (event.model_copy(update={"delta": event.delta[:PIECE_CHARS]}), *(
        type(event).model_validate({**fields, "delta": event.delta[at:at + PIECE_CHARS]})
        for at in range(PIECE_CHARS, len(event.delta), PIECE_CHARS)))


_STARTS = (TextBlockStartEvent, ThinkingBlockStartEvent)
_STREAM_OF: dict[type, str] = {
    TextBlockStartEvent: "text", TextBlockDeltaEvent: "text", TextBlockEndEvent: "text",
    ThinkingBlockStartEvent: "thinking", ThinkingBlockDeltaEvent: "thinking", ThinkingBlockEndEvent: "thinking",
}
"""The stream of a text or thinking event: one each per model call, as the
model's message has one of each."""


def _id_of(event: Any) -> str | None:
    """The block or call id of any model event (``None``: it has none)."""
    return getattr(event, "tool_call_id", None) or getattr(event, "block_id", None)


def _end_of(start: Any) -> Any:
    """The end event of the block ``start`` opened."""
    if type(start) is ToolCallStartEvent:
        return ToolCallEndEvent(reply_id=start.reply_id, tool_call_id=start.tool_call_id)
    cls = ThinkingBlockEndEvent if type(start) is ThinkingBlockStartEvent else TextBlockEndEvent
    return cls(reply_id=start.reply_id, block_id=start.block_id)


def _shown_as(event: Any, aliases: dict[str, str]) -> Any:
    """A text or thinking event under the id its block is shown with."""
    shown = aliases.get(event.block_id)
    return event if shown is None else event.model_copy(update={"block_id": shown})


class _OutputCalls:
    """A structured reply's ``GenerateStructuredOutput`` calls in one model
    round, held to the end of its call: their arguments are shown only when
    the output can stand, that is, it is not withheld already and no other
    call of the round runs first (a dependency that goes down there leaves
    the output made without its data, and withheld). Where nothing else of
    the round is held back, whatever follows an output call's start is held
    with it, so the events keep the model's order."""

    __slots__ = ("beside", "events", "ids", "withheld")

    def __init__(self, withheld: bool) -> None:
        self.withheld = withheld
        self.beside = False
        self.ids: set[str] = set()
        self.events: list[Any] = []

    def held(self, item: Any, everything: bool) -> bool:
        """Whether ``item`` is held: an event of an output call, or, with
        ``everything``, any event after one started (to the call's end)."""
        cls = type(item)
        if cls is ToolCallStartEvent and item.tool_call_name == STRUCTURED_OUTPUT_TOOL:
            self.ids.add(item.tool_call_id)
        elif (cls is ToolCallDeltaEvent or cls is ToolCallEndEvent) and item.tool_call_id in self.ids:
            pass
        elif everything and self.ids and cls is not ModelCallEndEvent:
            self.beside = self.beside or cls is ToolCallStartEvent
        else:
            return False
        self.events.append(item)
        return True

    def shown(self) -> list[Any]:
        """The held events the stream shows (once: they are given up), at
        the end of the model's call, in the model's order: the output's
        arguments only when it can stand."""
        events, self.events = self.events, []
        if self.withheld or self.beside:
            return [e for e in events if not (type(e) is ToolCallDeltaEvent and e.tool_call_id in self.ids)]
        return events


def _delta_for(end: Any, rest: str) -> Any:
    """The delta event carrying a block's held-back rest, before its end."""
    if isinstance(end, ToolCallEndEvent):
        return ToolCallDeltaEvent(reply_id=end.reply_id, tool_call_id=end.tool_call_id, delta=rest)
    cls = ThinkingBlockDeltaEvent if isinstance(end, ThinkingBlockEndEvent) else TextBlockDeltaEvent
    return cls(reply_id=end.reply_id, block_id=end.block_id, delta=rest)


def _last_iteration(agent: Any) -> None:
    """A stopped reply that owes a structured output it did not get in its
    narrowed rounds: AgentScope would ask for it again every round up to
    its iteration cap (no model call is made, but each round is a round);
    its iteration count is set at the cap, so its next decision ends the reply."""
    config = agent.react_config
    agent.state.cur_iter = max(agent.state.cur_iter, config.max_iters + config.structured_output_grace_iters)


def _shadow_answer(ctx: HookContext, run: RunState) -> str | None:
    """Shadow mode enforces nothing but the deadline (time is not a
    refusal): a run the deadline stopped ends with its fallback answer, and
    one whose finishing tool completed, past the deadline, with that tool's
    answer (no model call past the deadline; ``liveness_watchdog`` decides both).
    Nor is a provider's failure a refusal: a compression that failed for
    good answers ``model_error_text`` at the next step, as a failed model
    call does (``ModelGuard.model_failed``)."""
    facts = run.facts
    terminal = facts.terminal
    if terminal is not None and terminal.reason == "model_error" and facts.stop_text is not None:
        return facts.stop_text
    finished = terminal is not None and terminal.state == TerminalState.COMPLETED.value
    # the deadline itself, passed: the wrap-up's end (recorded ``deadline`` before it) is not
    return ctx.fallback_answer if run.past_deadline() and (facts.out_of_time() or finished) else None


class _PreThink:
    """What ``pre_think`` leaves for the adapter: events to emit first, and
    the answer to give without a model call (if any)."""

    __slots__ = ("answer", "events")

    def __init__(self, events: list[Any], answer: str | None) -> None:
        self.events = events
        self.answer = answer


def _deliverable(run: RunState, hints: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The hints the model reads: one inviting to explore, given before a
    later hook of its round constrained the run, is dropped (its ``hint``
    decision stays in the report)."""
    if not run.facts.force_conclude:
        return hints
    return [hint for hint in hints if hint[0] not in EXPLORING_HINTS]


def _add_hints(agent: Any, hints: list[tuple[str, str]]) -> list[HintBlockEvent]:
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
    for event in text_block_events(reply_id, block.id, answer):
        yield event
    yield AssistantMsg(
        id=reply_id,
        name=agent.name,
        content=[block],
        usage=agent._get_reply_usage(),
        finished_reason=ReplyFinishedReason.COMPLETED,
    )


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
        pruned=is_pruned(text),
    )


def _results_in_context(agent: Any, account: ResultAccount) -> ResultAccount:
    """Bring the run's account up to date with the tool results appended to
    the agent's context since the last round (one more round counted): only
    new blocks are read. A context replaced or rewritten since (compression,
    a cleared history) is read again from the start."""
    account.rounds += 1
    context = agent.state.context
    resume = account.scanned_to(context)
    if resume is None:
        account.reset()
        resume = (0, 0)
    account.fresh = 0
    first, skip = resume
    for i in range(first, len(context)):
        content = context[i].content
        if isinstance(content, str):
            continue
        for j in range(skip if i == first else 0, len(content)):
            block = content[j]
            if isinstance(block, ToolResultBlock):
                account.add(_context_result(block), block)
    account.mark(context)
    return account


def _round_in_context(agent: Any, before: tuple[Any, int]) -> tuple[Msg | None, int]:
    """The reply's message in the context and where the blocks the model
    call just added to it start (appended since ``before``), without
    rescanning the whole reply; ``(None, 0)``: it added none there."""
    state = agent.state
    if not state.context:
        return None, 0
    last = state.context[-1]
    if last.role != "assistant" or last.name != agent.name or last.id != state.reply_id:
        return None, 0
    if isinstance(last.content, str):
        return None, 0
    return last, before[1] if last is before[0] else 0


def _answered_in_place(item: Any, run: RunState, blocks: set[str]) -> bool:
    """Whether a text event of a structured reply's model call is of the
    answer the harness gave in the model's place (the call refused or cut:
    its stop's text, which a later round says once the output is settled):
    a block opened once the run had ended. A block the model opened before
    goes on as it was shown (its end too)."""
    if run.facts.terminal is None:
        return False
    if type(item) is TextBlockStartEvent:
        blocks.add(item.block_id)
    return item.block_id in blocks


def _forget_said(message: Msg, start: int, held: Msg) -> None:
    """Take the text the harness answered a round with in the model's place
    (a structured reply's call refused or cut: its stop's text) out of what
    the round stored: the reply still owes its output, so a later round
    gives that text (the user is told once, and the model reads it once)."""
    said = held.get_text_content()
    message.content[start:] = [
        b for b in message.content[start:] if not (type(b) is TextBlock and b.text == said)
    ]


def _filter_round(message: Msg, start: int, held: Msg | None, answer: OutputFilter, text: bool) -> None:
    """Filter in place what a round stored of the model's thinking and,
    with ``text`` (a round whose answer does not stand: text before its tool
    calls, a thinking-only step, an answer another round replaces), its
    text: AgentScope keeps them as they streamed, and the context is read
    again (the next request, a saved state). Each is filtered joined, as
    the stream showed it: a secret across two blocks (a thinking delta amid
    the text) is judged whole, and the blocks after the first are then
    dropped from the message (and from ``held``, the final message that
    shares them), their text in the first."""
    kinds = ((TextBlock, "text"), (ThinkingBlock, "thinking")) if text else ((ThinkingBlock, "thinking"),)
    for cls, attr in kinds:
        parts = [b for b in message.content[start:] if type(b) is cls and getattr(b, attr)]
        dropped = _filter_joined(parts, attr, answer)
        if dropped:
            for owner in (message, held):
                if owner is not None and not isinstance(owner.content, str):
                    owner.content = [b for b in owner.content if all(b is not d for d in dropped)]


def _filter_joined(parts: list[Any], attr: str, answer: OutputFilter) -> list[Any]:
    """Filter the ``attr`` text of ``parts`` (one stream's blocks, in order)
    as one text; the blocks whose text went into the first (none unless
    something crossed a boundary)."""
    texts = [getattr(b, attr) for b in parts]
    each = [answer.apply(t)[0] for t in texts]
    if len(parts) > 1:
        whole = answer.apply("".join(texts))[0]
        if whole != "".join(each):
            setattr(parts[0], attr, whole)
            return parts[1:]
    for block, before, after in zip(parts, texts, each, strict=True):
        if after != before:
            setattr(block, attr, after)
    return []


def _tail_of_reply(agent: Any) -> tuple[Any, int]:
    """The reply's message and its block count, before a model call."""
    state = agent.state
    if state.context:
        last = state.context[-1]
        if last.id == state.reply_id and not isinstance(last.content, str):
            return last, len(last.content)
    return None, 0


def _prune_results(run: RunState, ids: list[str]) -> None:
    """Replace the chosen live results with a placeholder; the full text
    stays in the run's artifacts under its ref."""
    for result_id in ids:
        block = run.results.take(result_id)
        if block is None:  # already pruned, or no longer in context
            continue
        text = _result_text(block)
        run.artifacts.setdefault(block.id, text)
        run.results.pruned.add(block.id)
        block.output = PRUNED.format(name=block.name, tokens=estimate_tokens(text), ref=block.id)
