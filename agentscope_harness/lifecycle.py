"""One run's life: open, park, resume, settle, drop. Every exit of a reply
goes through here: its normal end, an exception, cancellation at any await
(store reads during opening included), a consumer that stops reading the
stream (``aclose`` or garbage collection) and a human-in-the-loop park.

The run handle (a context variable; the run's deadline is read through it)
is set around each step of AgentScope's reply generator and reset before the
step's item is handed to the consumer, in the same task and context: tools
and sub-agents started inside a step inherit it, and nothing leaks to the
consumer, even when it abandons the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import itertools
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agentscope.event import (
    CustomEvent,
    ExternalExecutionResultEvent,
    HintBlockEvent,
    ReplyEndEvent,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ToolResultDataDeltaEvent,
    ToolResultEndEvent,
    ToolResultStartEvent,
    ToolResultTextDeltaEvent,
    UserConfirmResultEvent,
    UserInterruptEvent,
)
from agentscope.message import (
    AssistantMsg,
    DataBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolCallState,
    ToolResultBlock,
    ToolResultState,
    URLSource,
)
from agentscope.types import ReplyFinishedReason

from . import park_record
from .approvals import approval_digest
from .arguments import guide_invalid_arguments, quotes_the_call, refusal_shown
from .calls import CallFlow, read_as_agentscope, result_view
from .chains import close_stream, release
from .context import HookContext, fallback, is_pruned, time_ran_out
from .deadline import current_deadline, tighter
from .errors import METADATA_KEY, DependencyDown, HarnessConfigError
from .facts import OUT_OF_TIME, finish_required
from .hooks.drift import judged_text
from .injection import shows_nothing
from .lazy import made
from .outcome import (
    WITHHELD_ANSWER,
    build_report,
    corrected_answer,
    overrules_answer,
    structured_output_is_withheld,
    terminal_state,
    unanswered,
)
from .outputs import (
    answer_filter,
    cleaned_args,
    data_digests,
    data_names,
    filter_result,
    foreign_hint_shown,
    read_names,
    readable_metadata,
    result_pii,
    result_text,
    shaped_data,
    shaped_link,
    shown_name,
)
from .report import RunReport, TerminalState
from .run_state import RUN_HANDLE, TOOL_CALL, RunHandle, RunState, live_parent, set_aside_depth
from .runner import AUDIT_HOOK, OUTCOME_HOOK, being_cancelled
from .sentinels import neutralise_markers
from .stores import PARK_TTL_S, ParkRecords, give_back_soon, store_call

if TYPE_CHECKING:
    from .approvals import ApprovalBook
    from .harness import Harness
    from .services import Services

log = logging.getLogger("agentscope_harness")
T = TypeVar("T")

_RESUME_EVENTS = (UserConfirmResultEvent, ExternalExecutionResultEvent, UserInterruptEvent)

CANDIDATE_READ_WAIT_S = 0.1
"""The longest a run waits for the principal's spend today when only its
candidate policy keeps a daily quota (a store answers in milliseconds; one
that hangs must not hold the live run: the read goes on beside it)."""

# What the lifecycle does with a streamed item, cached by type: ``isinstance``
# on pydantic models goes through ABCMeta, and every event passes here.
_CLASSES: tuple[type | tuple[type, ...], ...] = (
    ReplyStartEvent, ReplyEndEvent, Msg, ToolResultEndEvent, ToolResultTextDeltaEvent, ToolResultStartEvent,
    (RequireUserConfirmEvent, RequireExternalExecutionEvent), HintBlockEvent, ToolResultDataDeltaEvent,
)
_KINDS: dict[type, int] = {}
_OTHER, _START, _END, _MSG, _TOOL_END, _TOOL_TEXT, _TOOL_START, _ASK, _HINT, _TOOL_DATA = range(10)


def _kind(item: Any) -> int:
    """The kind of a type not seen yet, now cached."""
    cls = type(item)
    kind = _KINDS[cls] = next((i + 1 for i, c in enumerate(_CLASSES) if issubclass(cls, c)), 0)
    return kind


class _EndPassed:
    """The end of a reply that passed (``RunState.reopen``), as AgentScope
    accounts for it: its ``ReplyEndEvent`` has not reached the caller while
    a middleware before the harness's holds it (``_receive_reply_end``, which
    its loop reads to make another round when asked for more; a version
    without that flag: the end reads as delivered). A round that comes
    reopens the run at its reasoning (AgentScope may also just end again,
    its answer already made: the end's verdict then stands)."""

    __slots__ = ("life", "run")

    def __init__(self, life: ReplyLifecycle, run: RunState) -> None:
        self.life, self.run = life, run

    def __call__(self) -> None:
        self.life._went_on(self.run)

    def swallowed(self) -> bool:
        return getattr(self.life.agent, "_receive_reply_end", True) is False


def run_deadline(harness: Harness, parent: RunState | None) -> float | None:
    """The deadline of a run timed from now: its Harness's ``deadline_s``,
    no later than the one in force where it runs (``current_deadline``) nor
    than a live parent's (``None``: none applies, or deadlines are off)."""
    if not harness.env.deadline_enabled:
        return None
    deadline_s = harness.config.deadline_s
    deadline = None if deadline_s is None else time.monotonic() + deadline_s
    deadline = tighter(deadline, current_deadline())
    return tighter(deadline, parent.deadline) if parent is not None else deadline


def _adopted(services: Services, child: RunReport) -> RunReport:
    """A sub-agent's report as this Harness reports it: the sub-agent's
    Harness (another team's config) scrubbed it of its own secrets, so what
    it quotes is scrubbed of this one's too."""
    return child.model_copy(update={
        "reason": services.scrubbed(child.reason)[:REASON_CHARS],
        "principal": cleaned_args(child.principal, services.scrubbed, numbers=True),
        "extensions": cleaned_args(child.extensions, services.scrubbed),
        "decisions": [d.model_copy(update={"detail": services.scrubbed(d.detail)}) for d in child.decisions],
        "children": [_adopted(services, grandchild) for grandchild in child.children],
    })


def _superseding(children: list[RunReport], report: RunReport) -> None:
    """A child's report among its parent's: in place of an earlier one of
    the same run (its park's provisional report, which the resumed run
    supersedes), else after the others."""
    for index, child in enumerate(children):
        if child.run_id == report.run_id:
            children[index] = report
            return
    children.append(report)


def _join_late(run: RunState, report: RunReport) -> None:
    """A nested run that settles after runs it is nested in have settled
    joins their reports: in each settled ancestor's report, its place is
    the report of the run it ran in, found by run id down the nesting."""
    below: list[RunState] = []  # the runs from the ancestor's child down to the parent
    ancestor = run.parent
    while ancestor is not None:
        host: RunReport | None = ancestor.report
        if host is not None:  # what it spent counts the late run's spend now (its slot kept counting)
            _recounted(ancestor, host)
        for nested in below:  # and so does each entry on the way down to the late run's place
            host = next((c for c in host.children if c.run_id == nested.run_id), None) if host is not None else None
            if host is not None:
                _recounted(nested, host)
        if host is not None and ancestor.adopt_late is not None:
            _superseding(host.children, ancestor.adopt_late(report))
        below.insert(0, ancestor)
        ancestor = ancestor.parent


def _nested_settled(run: RunState) -> None:
    """A nested run settled (or parked): no longer its root's work in
    flight; the last such lets the root's kept run slots go."""
    root = run.root
    root.live_nested.pop(run.run_id, None)
    if not root.live_nested and root.after_nested is not None:
        release, root.after_nested = root.after_nested, None
        release()


def _recounted(run: RunState, report: RunReport) -> None:
    """A settled run's report, its spend and counts as its slot has them
    (a nested run that settled after it spent into both)."""
    report.model_calls, report.spent_usd = run.model_calls, round(run.facts.spent_usd, 10)
    report.input_tokens, report.output_tokens = run.input_tokens, run.output_tokens


def rejoin(harness: Harness, run: RunState) -> None:
    """A parked run resumed (by ``on_reply``, or, with the tool adapter
    alone, at the first call judged once a call it parked on is answered:
    ``RunState.awaiting_human``): nested in the live run it is resumed in, if
    any; timed from now, as a human's wait is not the agent's time, and no
    later than a parent still live (one settled meanwhile bounds nothing)."""
    run.nest_on_resume()
    run.pauses += 1  # a call still judged from before is not admitted now (this resume judges it)
    run.called_by = TOOL_CALL.get()  # its ending goes to the result of the call that resumed it
    parent = run.parent if run.parent is not None and run.parent.report is None else None
    run.set_deadline(run_deadline(harness, parent))
    run.inside_set_aside = set_aside_depth()  # resumed in a block bound to its caller inside another's tool
    run.facts.lift_deadline()


class _Kept(enum.Enum):
    """What a store's park record says of a park this process holds."""

    CURRENT = "current"
    STALE = "stale"
    GONE = "gone"


class _NotAsked(enum.Enum):
    NOT_KEPT = "the store keeps no park records"
    UNANSWERED = "the store did not answer"


NOT_KEPT, UNANSWERED = _NotAsked.NOT_KEPT, _NotAsked.UNANSWERED


async def _park_records(harness: Harness, ask: Callable[[ParkRecords], Awaitable[T]], what: str,
                        deadline: float | None) -> T | _NotAsked:
    """``ask`` of the store's park records, bounded; ``NOT_KEPT``: the
    store keeps none; ``UNANSWERED``: it did not answer (logged: could
    not ``what``)."""
    store = harness.store
    if not isinstance(store, ParkRecords):
        return NOT_KEPT
    try:
        return await store_call(store, lambda: ask(store), "park records", deadline)
    except Exception as exc:
        log.warning("harness could not %s: %s", what, exc)
        return UNANSWERED


async def _put_park_record(harness: Harness, run: RunState) -> bool:
    """Write what the parked run is now (``_park_record_of``) under its
    reply; whether the store answered."""
    record = json.dumps(_park_record_of(run))
    kept = await _park_records(harness, lambda s: s.park_put(run.run_id, record),
                               f"record the park of {run.run_id}", None)
    return kept is not UNANSWERED


async def record_parked(harness: Harness, run: RunState) -> None:
    """``run``, or a run it is nested in, was charged a model call or a tool
    call after it parked and recorded its park (a call admitted beside the
    question as the reply parked; a sub-agent a tool left running in the
    background): recorded again, so that a resume in another process
    carries that spend, those counts and the calls made, as one here does
    (a run under another Harness is recorded by that one's store: not
    here)."""
    parked: RunState | None = run
    while parked is not None:
        report = parked.report
        if (parked.park_recorded and parked.table is harness.table  # its own store keeps its record
                and report is not None and report.terminal_state is TerminalState.WAITING_INPUT
                and await _still_its_park(harness, parked)):
            await _put_park_record(harness, parked)
        parked = parked.parent


async def _still_its_park(harness: Harness, run: RunState) -> bool:
    """Whether the store's record is still of ``run``'s park: resumed
    elsewhere and parked again there, the newer park's record is not
    written over with this stale copy (nor an unreadable one)."""
    record = await _park_record(harness, run)
    return isinstance(record, dict) and record.get("park") == run.park_id


async def _park_record(harness: Harness, run: RunState) -> dict[str, Any] | _NotAsked | None:
    """What the parking process recorded of the run; ``None``: no store
    keeps records or none was kept (the resume is then judged as
    unverified); ``UNANSWERED``: the store did not answer."""
    what = f"read the park record of {run.run_id}"
    # bounded by the store's timeout only: read at a resume, before the resumed run's time is set
    text = await _park_records(harness, lambda s: s.park_get(run.run_id), what, None)
    if not isinstance(text, str):
        return UNANSWERED if text is UNANSWERED else None
    try:
        return dict(json.loads(text))
    except Exception as exc:  # unreadable (malformed, too deeply nested): as if none were kept
        log.warning("harness could not read the park record of %s: %s", run.run_id, exc)
        return None


PARK_KEY = "agentscope_harness.park"
"""Where the agent's state keeps its reply's latest park id (in its
``middle_context``) and whether its record was written: a resume elsewhere
claims the park's one answer under it even when its record was never
written (the store down at the park), and then acts for nobody."""


def _keep_park_id(agent: Any, run: RunState) -> None:
    middle = getattr(getattr(agent, "state", None), "middle_context", None)
    if isinstance(middle, dict):
        middle[PARK_KEY] = {"reply": run.run_id, "park": run.park_id, "recorded": run.park_recorded}


def _park_id_kept(agent: Any, reply_id: str) -> tuple[str | None, bool]:
    """The park id ``_keep_park_id`` kept for the reply ``reply_id`` (``None``:
    none, another reply's, or a state edited), and whether its record was
    written (a state that does not say: written)."""
    middle = getattr(getattr(agent, "state", None), "middle_context", None)
    kept = middle.get(PARK_KEY) if isinstance(middle, dict) else None
    if not isinstance(kept, dict) or kept.get("reply") != reply_id or not isinstance(kept.get("park"), str):
        return None, True
    return str(kept["park"]), kept.get("recorded") is not False


def _park_record_of(run: RunState) -> dict[str, Any]:
    """What a parked run was, for a resume elsewhere (``_held_to`` reads it):
    who parked it, what it counted, spent and was extended or offered, its
    stop ladder and successes (``park_record``), the calls the human was
    shown, those AgentScope waits for and those whose approval was used."""
    return {
        "by": getattr(run.principal, "key", None), "park": run.park_id,
        "principal": run.principal.model_dump(mode="json") if run.principal is not None else None,
        **park_record.record_of(run),
        "shown": {call_id: list(shown) for call_id, shown in run.approvals.items()},
        "awaiting": sorted(run.park_awaiting), "spent": sorted(run.spent_approvals),
        "began": time.time() - (time.monotonic() - run.started),  # wall_s counts the human's wait there too
    }


def _held_to(run: RunState, record: dict[str, Any]) -> None:
    """A run restored here takes on what its parking process recorded
    (``_park_record_of``): it goes on from there, as a resume in that
    process would (a resume elsewhere never starts a count or a ladder
    again), and the calls the human was shown are what a resumed call is
    compared with. Raises, changing nothing, when the record does not read
    back whole."""
    fields = park_record.carried(record)
    shown = {str(k): (str(v[0]), str(v[1])) for k, v in dict(record.get("shown", {})).items()}
    awaiting = {str(call_id) for call_id in record.get("awaiting", ())}
    spent = {str(call_id) for call_id in record.get("spent", ())}
    park_record.apply(run, fields)
    if run.daily_spent_usd is not None and math.isfinite(run.daily_spent_usd):  # read with it: beside it now
        run.daily_spent_usd = max(run.daily_spent_usd - run.stored_usd, 0.0)
    began = record.get("began")
    if type(began) is float and math.isfinite(began):  # another host's clock: never a start in the future
        run.started = min(run.started, time.monotonic() - max(time.time() - began, 0.0))
    run.approvals = shown
    run.asked_here = True  # what was shown is known: compared, not unverified
    run.park_awaiting = awaiting
    run.spent_approvals = spent


async def _recall_results(run: RunState, agent: Any, result_max_tokens: int) -> None:
    """What the run's results said, read again from the restored context
    (each successful result of this reply's message, with its call's
    arguments as AgentScope reads them as the echo, as
    ``drift_result_tracker`` read it; a pruned one as pruned: the same call
    again is no repeat of a result still read): a run restored
    in another process knows what is not news there too (the shingles'
    hashes are salted per process, so no record carries them). The loop
    runs between results: a context of hundreds never holds it."""
    calls: dict[str, Any] = {}
    reply_id = agent.state.reply_id
    for msg in list(agent.state.context):
        if msg.id != reply_id or isinstance(msg.content, str):  # this reply's results only: the run's own
            continue
        for block in list(msg.content):
            if isinstance(block, ToolCallBlock):
                calls[block.id] = block
            elif isinstance(block, ToolResultBlock) and block.state == ToolResultState.SUCCESS:
                if is_pruned(result_text(block.output)):  # the model no longer reads it: fetched again, judged so
                    run.results.pruned.add(block.id)
                    continue
                call = calls.get(block.id)
                read = await read_as_agentscope(agent, call) if call is not None else None
                text = judged_text(result_text(block.output), result_max_tokens)  # joined as the live view joins it
                images = [] if isinstance(block.output, str) else [b for b in block.output if isinstance(b, DataBlock)]
                run.facts.novelty.add(text, echo=read[1] if read else None, data=data_digests(images))
                await asyncio.sleep(0)


async def _shown_at_park(run: RunState, agent: Any) -> None:
    """What the park asks about, as AgentScope waits for it (the
    application's own questions too, and calls waiting for a client's
    result): what an answer may answer; and each call asked about outside
    the harness, read as AgentScope reads it (with its tool's schema), what
    its resumed call must be. A call whose approval was used already is
    not offered again (an old copy of the state still waits for it)."""
    waiting: list[ToolCallBlock] = agent.state.get_awaiting_tool_calls(agent.name)
    run.park_awaiting = {call.id for call in waiting}
    run.asked_here = True  # seen here: a resume is compared with it, never taken unverified
    for call in waiting:
        if call.id in run.approvals or call.id in run.spent_approvals or call.state != ToolCallState.ASKING:
            continue
        read = await read_as_agentscope(agent, call)
        if read is None:  # what AgentScope could not read, no answer matches
            continue
        run.approvals[call.id] = (call.name, approval_digest(call.name, read[1]))


def _answers_another_park(run: RunState, inputs: Any) -> bool:
    """Whether a resume answers calls the run's park is not waiting for (an
    old copy of the state, parked earlier, sent its answer again): it must
    not take the answer of the park that waits."""
    if isinstance(inputs, UserConfirmResultEvent):
        answered = {result.tool_call.id for result in inputs.confirm_results}
    elif isinstance(inputs, ExternalExecutionResultEvent):
        answered = {result.id for result in inputs.execution_results}
    else:  # an interrupt answers whatever waits
        return False
    return bool(run.park_awaiting) and not answered <= run.park_awaiting


def end_resumed_by_another(harness: Harness, run: RunState, why: str | None = None) -> None:
    """A reply parked for one caller (on a human's approval or a
    client-executed call) and resumed by another, or by no one, or whose
    one answer was taken already (``why``), acts for nobody: every call of
    it is refused, and it ends at its next step with the fallback answer,
    without a model call and without what the run found (the resumer may
    not see it)."""
    shadow = harness.services.shadow  # the report ends as enforcing would; nothing is refused
    harness.services.record(run, "resume_check", "on_reply", "stop", code="permission_denied",
                            detail=why or "resumed by another caller than the one who parked it", enforced=not shadow)
    reason = "refused:permission_denied"
    run.acts_for_nobody = True
    run.facts.conclude(TerminalState.INCOMPLETE, reason, override=True)
    if not shadow:
        run.findings.clear()
        run.actions.clear()
        run.facts.stop_text = fallback(harness.config, reason)


_SECOND_RESULT = "A second result for this call was ignored: each call is answered once."
"""What the model reads of a client's second result for one call."""
_MISSHAPEN_RESULT = "This result does not have the shape its tool promises; it was not taken."
"""What the model reads of a client's result its call's own tool refuses."""


async def _taken(agent: Any, event: Any) -> bool:
    """Whether AgentScope takes an answer from ``event`` to continue the
    parked reply (the harness resumes only what it resumes): an interrupt
    while calls await; a confirmation its own check
    (``_check_incoming_event``) accepts, confirming something; client
    results it accepts, of which it keeps the first (``_shape_kept``)."""
    if isinstance(event, UserInterruptEvent):
        return _awaits_human(agent)
    try:
        await agent._check_incoming_event(event)
    except ValueError:
        return False
    if isinstance(event, UserConfirmResultEvent):
        return bool(event.confirm_results)
    results = event.execution_results
    return bool(results) and await _shape_kept(agent, results[0], results[0].name)


def _rules_only_for_shown_calls(
    agent: Any, event: UserConfirmResultEvent, unverified: bool, approvals: ApprovalBook, principal: Any,
) -> None:
    """A confirmation's permission rules ("always allow", which AgentScope
    adds to the agent as it takes the event) stand only for the very call
    the human was shown, confirmed by the caller who parked it (none when
    that cannot be told: ``unverified``): the harness refuses any other,
    and the rules would outlive the refusal. Those that stand serve the
    principal who gave them only (``ApprovalBook.only_rules_of``):
    AgentScope keeps them on the agent, for whoever it serves next."""
    shown = {call.id: (call.name, call.input) for call in agent.state.get_awaiting_tool_calls(agent.name)}
    for result in event.confirm_results:
        call = result.tool_call
        if result.rules and (unverified or shown.get(call.id) != (call.name, call.input)):
            result.rules = None
        approvals.rules_given(agent, result.rules or (), principal)


async def _shape_kept(agent: Any, block: ToolResultBlock, tool_name: str) -> bool:
    """Whether a client's ``block`` has the shape ``tool_name`` promises
    (its ``check_external_result``). AgentScope checks it by the name the
    client gave and takes an event's results in order, stopping at the
    first it refuses (the reply stays parked); the harness checks it by the
    awaited call's name too."""
    tool = await agent.toolkit.get_tool(tool_name)
    if tool is None:
        return True
    try:
        await tool.check_external_result(block)
    except Exception:
        return False
    return True


def _keeps_quota(config: Any) -> bool:
    return config.cost is not None and config.cost.daily_quota_usd is not None


_REPLIES = itertools.count(1)


def _result_block(agent: Any, call_id: str, name: str | None) -> ToolResultBlock | None:
    """The newest result of ``call_id`` and tool ``name`` in the agent's
    context that AgentScope's engine did not deny (it keeps a result before
    it emits its end)."""
    for msg in reversed(agent.state.context):
        content = msg.content
        if isinstance(content, str):
            continue
        for block in reversed(content):
            if (isinstance(block, ToolResultBlock) and block.id == call_id and block.name == name
                    and block.state != ToolResultState.DENIED):
                return block
    return None


async def shape_served(harness: Harness, run: RunState, block: ToolResultBlock) -> None:
    """Shape in place the result ``block`` of an admitted call that a
    middleware before the harness's served in ``on_acting`` (a cache; the
    tool never ran), as a tool's result is shaped (redacted, its ``pii``,
    fenced, withheld for what it says): at its end event; else (AgentScope's
    concurrent calls keep a result before their end is read, and a reply may
    stop before it is) at the next model call or when the reply ends."""
    ctx = run.admitted.pop(block.id)
    kept = {k: v for k, v in (block.metadata or {}).items() if k != METADATA_KEY}
    block.metadata = await shape_in_place(harness.flow, ctx, block, readable_metadata(harness.redactor, kept))


async def shape_served_in_context(harness: Harness, run: RunState, agent: Any) -> None:
    """Every result in the context of a call still admitted (served, its end
    not read: the reply stopped at a question, or its reader left)."""
    for call_id, ctx in list(run.admitted.items()):
        block = _result_block(agent, call_id, ctx.tool.name if ctx.tool is not None else None)
        if block is not None:
            await shape_served(harness, run, block)


def added_once(harness: Harness, agent: Any) -> None:
    """One harness's middlewares on an agent once: twice, each layer would
    open its own run of the reply (the inner one replacing the outer's)."""
    for chain in ("_reply_middlewares", "_check_permission_middlewares", "_acting_middlewares"):
        mine = 0
        for m in getattr(agent, chain, ()):  # a loop, not sum(): checked at every model call
            mine += getattr(m, "harness", None) is harness
        if mine > 1:
            raise HarnessConfigError(
                f"agent {getattr(agent, 'name', 'agent')!r}: this harness's middlewares are added {mine} times "
                "(Agent(middlewares=[*mine, *harness.middlewares()]) once)",
            )


async def shape_in_place(
    flow: CallFlow, ctx: HookContext, block: ToolResultBlock, metadata: dict[str, Any],
) -> dict[str, Any]:
    """A result that entered the context without the harness's ``on_acting``
    (a client's; one a middleware before the harness's served, a cache)
    shaped in place as a server tool's is (``to_response``): its text fenced
    and filtered, its data blocks kept beside it with their written fields
    shaped. Returns ``metadata`` as it may be shown (the tool's ``pii``)."""
    services, run = ctx.services, ctx.run
    policy = ctx.tool.policy if ctx.tool is not None else None
    modes, salt = result_pii(policy, run)
    if modes and policy is not None:
        metadata = readable_metadata(services.redactor, metadata, policy.pii, salt)
    output = block.output
    blocks = [] if isinstance(output, str) else [b for b in output if isinstance(b, DataBlock)]
    data = [b for b in blocks if not isinstance(b.source, URLSource)]
    # a link is text to the model, never fetched: AgentScope's formatters read a file:// URL
    # from the server's own disk, and fetch some http ones, which a client may not make it do
    links = [f"({b.source.media_type} at {b.source.url}: sent by the client, not fetched)"
             for b in blocks if isinstance(b.source, URLSource)]
    read = await read_names(data, services.redactor, modes, salt)
    shaped = await shaped_data(data, read, services.redactor, modes, salt)
    text = "\n".join([result_text(output), *links]) if links else result_text(output)
    state = str(getattr(block.state, "value", block.state))
    names = data_names(read, data)
    result = await flow.shape(ctx, result_view(text, state, dict(metadata), bool(data), names))
    if result.withheld:
        block.output, block.state = result.body, ToolResultState.ERROR
    elif result.text != text or result.notices or links or any(
        a is not b for a, b in zip(shaped, data, strict=True)
    ):
        body = result.body
        block.output = [TextBlock(text=body), *shaped] if body and shaped else shaped or body
    return metadata


OUTSIDE_GRACE_S = 0.2
"""How long past its deadline a reply's steps may hold it before the reply
layer cuts it (a sub-agent's: a quarter of its lead's each): long enough for
the harness's own layers, which cut at the deadline, to end the run first
wherever they can."""


OWN_CUT_POLL_S = 0.01
"""How often the reply layer's cut, due while the tool adapter's own deadline
cut still runs (bounded: it waits ``TOOL_GRACE_S`` twice at most), looks again."""


def _task() -> asyncio.Task[Any]:
    task = asyncio.current_task()
    assert task is not None  # a reply runs in a task
    return task


class OutsideCut:
    """The timer that cuts a reply whose steps hold it ``OUTSIDE_GRACE_S``
    past the run's deadline, in all (the consumer's time between steps is
    not counted: a step begun after the deadline gets what is left). One
    timer a reply, moved only past the deadline, not one a step: a reply
    streams hundreds of events."""

    __slots__ = ("at", "began", "deadline", "fired", "grace", "handle", "past", "run", "stepping")

    def __init__(self) -> None:
        self.at = 0.0
        self.handle: asyncio.TimerHandle | None = None
        self.stepping: asyncio.Task[Any] | None = None
        """The task running a step now (``None`` between steps: the consumer's own time)."""
        self.fired = False
        self.deadline = self.began = 0.0
        self.past = 0.0
        """How long steps ran past the deadline so far."""
        self.grace: float | None = None
        self.run: RunHandle | None = None
        """The run's weak handle: the loop's timer holds this, and must not hold
        the run of a stream its consumer dropped (freed when it settles)."""

    def enter(self, run: RunState) -> None:
        """A step of ``run`` begins, in the task the timer cancels."""
        now = time.monotonic()
        # most steps come before the deadline, the timer already armed past it: nothing to move
        if not (now <= self.deadline == run.deadline and self.handle is not None):
            self._arm(run, now)
        self.began, self.stepping = now, asyncio.current_task()  # a reply's step runs in a task

    def _arm(self, run: RunState, now: float) -> None:
        """The timer set where this step's cut falls (moved only past the deadline)."""
        if self.grace is None:
            # a sub-agent's a quarter of its lead's each: it ends with its own
            # answer before the lead's cut of the call running it (``TOOL_GRACE_S``)
            self.grace, self.run = OUTSIDE_GRACE_S / 4 ** run.depth, run.handle
            run.outside_cut = self
        deadline, grace = run.deadline or 0.0, self.grace
        self.deadline = deadline
        at = deadline + grace if now <= deadline else now + max(grace - self.past, 0.0)
        if at != self.at:
            if self.handle is not None:
                self.handle.cancel()
            loop = asyncio.get_running_loop()
            self.at, self.handle = at, loop.call_at(at - now + loop.time(), self._fire)

    def leave(self) -> None:
        """The step is over: the time it ran past the deadline is counted."""
        self.stepping = None
        now = time.monotonic()
        if now > self.deadline:
            self.past += now - max(self.began, self.deadline)

    def _fire(self) -> None:
        self.handle = None
        if self.stepping is None or self.fired:
            return
        run = self.run() if self.run is not None else None
        if run is not None and run.tools_bounded:  # the tool adapter's own cut ends them first
            self.handle = asyncio.get_running_loop().call_later(OWN_CUT_POLL_S, self._fire)
            return
        self.fired = True
        self.stepping.cancel()

    def disarm(self) -> None:
        """The reply is over: its timer, and what it holds, let go."""
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        run = self.run() if self.run is not None else None
        if run is not None and run.outside_cut is self:
            run.outside_cut = None
        self.run = None


class ReplyLifecycle:
    """The run of one ``agent.reply`` call (a resumption continues the run
    its reply parked)."""

    def __init__(self, harness: Harness, agent: Any) -> None:
        self.harness = harness
        self.agent = agent
        self.run: RunState | None = None
        self.serial = next(_REPLIES)
        """This reply's number: the run it opens or resumes is its own
        (``RunState.replied_by``) until a later reply resumes it."""
        self.parked = False
        self.asked = False
        """The reply streamed a question for a human or a client: a consumer
        that stops reading there leaves it parked, as at its end."""
        self.resumed_park: RunReport | None = None
        """The provisional report of the run parked here that this reply
        resumes (``None``: not such a resume): what the run says again when
        AgentScope does not take the human's answer (``close``)."""
        self.end_reason: str | None = None
        self.corrections: list[Any] = []
        """Text events that follow a streamed answer the audit corrected."""
        self.client_metadata: dict[str, list[tuple[ToolResultBlock, dict[str, Any]]]] = {}
        """A client's results by call id (in the event's order: a client may
        repeat an id), with their metadata cleaned, put in place once
        AgentScope took each (``_cleaned_metadata``)."""
        self.structured: tuple[Any] | None = None
        """The structured output the final message delivers, filtered (in a
        1-tuple; ``(None,)``: withheld), once the reply has ended."""
        self.answer = WITHHELD_ANSWER
        """The text a final message whose structured output is withheld says."""
        self.tool_names: dict[str, str | None] = {}
        """The tool of each call whose result streams in this reply, by call id,
        from its start event (``None`` once its end passed)."""
        self.held_deltas: dict[str, list[Any]] = {}
        """The text of a result's stream the harness's ``on_acting`` did not
        shape (a middleware's before the harness's), by call id: shown at the
        call's end, a served result's as it was shaped (``_served``), any
        other's in one piece (``_held_shown``)."""
        self.cut_by: str | None = None
        """The reply's steps held it ``OUTSIDE_GRACE_S`` past its deadline,
        outside the harness's layers, and it was cut (``_step``): ``deadline``
        (the run ends so, not as a user's interruption, its answer the stop
        text), or ``caller`` (the caller cancelled during the cut)."""
        self.outside = OutsideCut()
        self.closing: list[Any] | None = None
        """The end and final message of a cut reply AgentScope ended raising
        (``interruption_raise_cancelled_error``), still to be passed on."""
        self.before_end: tuple[Any, ...] = ()
        """What ``session_end`` judges of the answer at an end, as it was
        before (the run's end and stop text: ``no_answer``, ``audit_failed``;
        the claims it found unsupported): the round a swallowed end asked
        for is judged afresh, on its own answer."""

    # ------------------------------------------------------------ steps

    async def reply(self, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]) -> AsyncGenerator:
        """The run's whole life around AgentScope's reply: each step of it
        produced with the run's handle bound (and reset before the step's
        item is handed on), each item passed through ``on_item``. One
        generator layer: no coroutine per streamed event."""
        failure: BaseException | None = None
        inner = None  # AgentScope's reply, closed with this layer (its model and tool streams with it)
        try:
            added_once(self.harness, self.agent)
            inputs = input_kwargs.get("inputs")
            if await self.resume(inputs) is not None:
                await self.shape_external_results(inputs)
            inner = next_handler(**input_kwargs)
            following = inner.__anext__
            while True:
                run = self.run
                token = None if run is None else RUN_HANDLE.set(run.handle)  # the deadline is read through it
                try:
                    item = await self._step(following, run)
                except StopAsyncIteration:
                    break
                finally:
                    if token is not None:
                        RUN_HANDLE.reset(token)
                kind = _KINDS.get(type(item))
                if kind is None:
                    kind = _kind(item)
                # most streamed events (_OTHER): nothing for the run to do
                outs = (item,) if kind == _OTHER else await self.on_item(item, kind)
                run = self.run
                if run is None:
                    for out in outs:
                        yield out
                    continue
                run.with_consumer = True
                for out in outs:
                    yield out
                run.with_consumer = False
                if run.replaced:  # read on after a later reply settled it: nothing more runs
                    return
        except BaseException as exc:
            failure = exc
            raise
        finally:
            release(next_handler)
            self.outside.disarm()  # its timer would keep this reply, and its run, alive
            try:
                await self.close(failure)  # parked first: a call still judged is not admitted after it
            finally:
                await close_stream(inner)

    async def _step(self, following: Callable[[], Awaitable[Any]], run: RunState | None) -> Any:
        """AgentScope's next item, the step that makes it cut ``OUTSIDE_GRACE_S``
        past the run's deadline (``OutsideCut``): the harness's own layers cut
        at the deadline itself; this catches a wait outside them (a middleware
        of yours placed before the harness's). AgentScope's reply closes as
        interrupted, and the run ends as a cut one does (``_cut_outside``)."""
        if self.cut_by is not None:
            return await self._after_cut(following)
        if run is None or run.deadline is None:
            return await following()
        cut = self.outside
        cut.enter(run)
        taken = True  # AgentScope took the cut's cancellation and closed its reply
        try:
            return await following()
        except asyncio.CancelledError:
            taken = False
            if not cut.fired or _task().uncancel() > 0:  # the caller's own cancellation too
                raise
            # the cut went through AgentScope's reply (a middleware's on_reply waiting): no end was made
            self.closing = [
                ReplyEndEvent(session_id=run.session_id or "", reply_id=run.run_id,
                              finished_reason=ReplyFinishedReason.INTERRUPTED),
                AssistantMsg(name=self.agent.name, content="", id=run.run_id,
                             finished_reason=ReplyFinishedReason.INTERRUPTED),
            ]
            return self.closing.pop(0)
        finally:
            cut.leave()
            if cut.fired:  # the cancellation left after the cut's own is the caller's
                task = _task()  # the step's now: it began in a lead's task if a tool's first step ran it there
                cancelled = (task.uncancel() if taken else task.cancelling()) > 0
                # a sub-agent's is its lead's cut of the call running it, at that deadline: its own came first
                self._cut_outside(run, cancelled and run.parent is None)

    async def _after_cut(self, following: Callable[[], Awaitable[Any]]) -> Any:
        """A cut reply's next item: AgentScope's closing of it, or the end
        it did not make. Its cancellation raised again after its end
        (``interruption_raise_cancelled_error``) is the harness's cut, not
        the caller's: the reply ends there."""
        if self.closing is not None:
            if not self.closing:
                raise StopAsyncIteration
            return self.closing.pop(0)
        try:
            return await following()
        except asyncio.CancelledError:
            if being_cancelled():
                raise
            raise StopAsyncIteration from None

    def _cut_outside(self, run: RunState, by_caller: bool) -> None:
        """The run ends ``deadline`` (the report says where it was cut), its
        answer the stop text, as when the harness's own layers cut it; or, when
        the caller cancelled during the cut, ``cancelled``, as any cut does then."""
        self.cut_by = "caller" if by_caller else OUT_OF_TIME
        if by_caller:
            return
        self.harness.services.record(
            run, "liveness_watchdog", "on_reply", "stop", code=OUT_OF_TIME, enforced=True,
            detail=f"steps outside the harness's layers held the reply {self.outside.grace} s past its "
                   "deadline: it was cut",
        )
        run.answer_owed = time_ran_out(run, self.harness.config)

    async def on_item(self, item: Any, kind: int) -> list[Any]:
        """What the consumer receives for ``item`` (of ``kind``, not
        ``_OTHER``): nothing, when an end is held back for one more round."""
        if kind == _START:
            if self.run is None or self.run.run_id != item.reply_id:
                await self.open(item)
            return [item]
        run = self.run
        if run is None:
            return [item]
        if kind == _TOOL_DATA:  # shown as it comes, its link as the model reads it (the harness's own already is)
            return [await self._data_shown(run, item)]
        if kind == _TOOL_TEXT:
            if self.cut_by == OUT_OF_TIME and item.delta == AGENTSCOPE_INTERRUPTED:
                item = item.model_copy(update={"delta": CUT_OUTSIDE_RESULT})
            call_id = item.tool_call_id
            own = run.own_pieces.get(call_id)
            if own is not None and item.delta in own:  # the harness's on_acting shaped it
                at = own.index(item.delta)
                run.own_pieces[call_id] = own[:at] + own[at + 1:]
            elif call_id in self.tool_names and not (quotes_the_call(item.delta) and call_id not in run.judged_calls):
                if self.tool_names[call_id] is None:  # after the call's end (a middleware's closing line)
                    return []  # the result the model read has been shown
                self.held_deltas.setdefault(call_id, []).append(item)  # another's piece: shown at the call's end
                return []
            # every result delta, shaped or not: AgentScope's own error texts (a
            # refused call quotes the model's arguments) are never shaped, and a
            # fenced result is not proof of redaction (the filter may be disabled,
            # fail open in shadow mode, or a notice may follow the fence)
            shown = await self.harness.services.redactor.redact_async(item.delta)  # megabytes: in slices
            shown = refusal_shown(self.harness, self.agent, run, call_id, shown)
            return [item if shown == item.delta else item.model_copy(update={"delta": shown})]
        if kind == _HINT:  # another middleware's (RAG's retrieved text): shown as the model reads it
            return [foreign_hint_shown(self.harness.services.redactor, item)]
        if kind == _ASK:  # a question for a human (or a client) is out: stopped here, the reply is parked
            self.asked = True
            return [item]
        if kind == _TOOL_START:  # the tool name is the model's to write: shown as its arguments are
            self.tool_names[item.tool_call_id] = item.tool_call_name
            return [shown_name(answer_filter(self.harness.services, run), item)]
        if kind == _TOOL_END:
            held = self.held_deltas.pop(item.tool_call_id, None)
            run.own_pieces.pop(item.tool_call_id, None)
            tool, self.tool_names[item.tool_call_id] = self.tool_names.get(item.tool_call_id), None
            if item.tool_call_id in run.admitted and item.state != ToolResultState.DENIED:
                served = await self._served(run, item, held is not None)  # its on_acting never reached the harness's
                if served is not None:
                    return served
            if item.state == ToolResultState.ERROR:  # refused arguments: say what to send
                await guide_invalid_arguments(self.harness, self.agent, run, item.tool_call_id)
            if held is not None:
                return [*await self._held_shown(run, tool, held), self._cleaned_metadata(item)]
            return [self._cleaned_metadata(item)]
        if kind == _END:
            if self._hold(run, item):
                return []
            self.end_reason = (OUT_OF_TIME if self.cut_by == OUT_OF_TIME else  # the harness's cut, no interruption
                               str(getattr(item.finished_reason, "value", item.finished_reason)))
            if self.cut_by == OUT_OF_TIME:
                _cut_results_said(self.agent)
            facts = run.facts
            self.before_end = (facts.terminal, facts.stop_text, list(facts.unsupported_claims),
                               list(facts.claimed_steps))
            await self.session_end(run)
            run.reopen = _EndPassed(self, run)  # until the reply ends: an end swallowed
            return [*self.corrections, *self.closing_events(run), item]
        if self.end_reason is None and not self.parked:  # a final Msg with no end: parked
            return [*await self.park(run), item]
        if run.ended_at_cap and run.candidate is not None and item is not run.candidate:
            _rewrite_text(item, run.candidate.get_text_content() or "")  # what the stream showed
        if self.cut_by == OUT_OF_TIME and isinstance(item, Msg):  # AgentScope's line for an interruption
            _rewrite_text(item, self.answer)
        if self.structured is not None and isinstance(item, Msg) and item.structured_output is not None:
            item.structured_output = self.structured[0]
            if self.structured[0] is None or run.answer_owed is not None:  # not AgentScope's line
                _rewrite_text(item, self.answer)
        return [item]

    # ------------------------------------------------------------ open

    async def open(self, start: ReplyStartEvent) -> RunState:
        """A new reply's run (it replaces a run the agent parked and never
        resumed), which takes its concurrency slots."""
        harness = self.harness
        parent = live_parent(start.reply_id)
        principal = harness.current_principal()
        if principal is None and parent is not None:
            principal = parent.principal
        await self._replace_earlier()
        run = await self._open_run(start.reply_id, getattr(start, "session_id", None), principal, parent)
        await harness.services.fleet.open_run(run, run.root.table is harness.table)
        return run

    async def _open_run(
        self, run_id: str, session_id: str | None, principal: Any, parent: RunState | None,
    ) -> RunState:
        """Create a run's slot, the agent's live run (before any await, so a
        cancellation while reading the store still settles it), then read
        its principal's daily quota: every run this reply opens, a new one
        or one restored from storage, is held to it."""
        harness = self.harness
        self.run = run = harness.table.open(
            run_id=run_id,
            agent_name=getattr(self.agent, "name", "agent"),
            session_id=session_id,
            principal=principal,
            deadline=run_deadline(harness, parent),
            parent=parent,
            mode=harness.config.mode,
        )
        harness.table.bind(self.agent, run)
        run.replied_by = self.serial
        harness.opened(run, self.agent)
        if parent is not None:
            run.called_by = TOOL_CALL.get()
        await self._read_quota(run)
        return run

    async def _replace_earlier(self, keep: RunState | None = None) -> None:
        """A new reply (or a resume, of ``keep``) replaces the agent's
        earlier run, whose slots go now: one parked on a human and never
        resumed (its ``waiting_input`` report stands), and one no ``close``
        reached (a stream its consumer stopped reading, not yet collected),
        settled ``cancelled`` (``abandoned``) if it had not settled."""
        table = self.harness.table
        parked = table.take_parked(self.agent)
        if keep is not None:  # resumed here: no other agent object (an earlier request's) holds it parked
            table.forget_parked(keep.run_id)
        if parked is not None and parked is not keep:
            await self._free(parked)
        previous = table.current.get(self.agent)
        if previous is None or previous is keep or table.slots.get(previous.run_id) is not previous:
            return
        if not previous.with_consumer:
            return  # still producing: a reply running beside this one, closed by its own end
        if previous.report is None:
            await self.settle(previous, TerminalState.CANCELLED, "abandoned")
        previous.replaced = True
        await self._free(previous)

    async def _read_quota(self, run: RunState) -> None:
        """A nested run spends its root's quota (its principal's): read into
        the root once, by the first run of the nesting whose Harness keeps a
        daily quota (a sub-agent's Harness may keep one its lead's does not),
        or judges one (a candidate's; a read only it needs changes nothing live)."""
        root = run.root
        live = _keeps_quota(self.harness.config)
        candidate = self.harness.candidate
        if root.daily_spent_usd is not None or not (live or (candidate is not None and _keeps_quota(candidate.config))):
            return
        if root.principal is None:  # a quota per principal, and nobody to keep it for: fail closed
            root.daily_spent_usd = math.inf
            if live:
                self.harness.services.record(
                    run, "budget_router", "on_reply", "refuse", code="quota_exhausted",
                    detail="daily_quota_usd is kept per principal and none is bound (harness.acting_for)",
                )
            return
        if not live:  # only the candidate judges it: read beside the run, awaited only briefly
            reading = asyncio.ensure_future(self._quota_for_candidate(run))
            give_back_soon(reading)  # kept to its end, however long the store takes
            left = run.time_left()  # a run out of time waits for nothing (0 s left is no "no deadline")
            await asyncio.wait((reading,), timeout=CANDIDATE_READ_WAIT_S if left is None
                               else min(CANDIDATE_READ_WAIT_S, max(left, 0.0)))
            return
        store, key = self.harness.store, root.principal.key
        try:
            root.daily_spent_usd = await store_call(store, lambda: store.get_spend(key), "spend store", run.deadline)
        except DependencyDown as exc:  # any failure of the read (``store_call``)
            root.daily_spent_usd = math.inf
            root.store_error = str(exc)
            # the stop says only ``dependency_down``: which store, and why, is said here
            self.harness.services.record(run, "budget_router", "on_reply", "error", code="dependency_down",
                                         detail=f"daily spend not read: {root.store_error}")

    async def _quota_for_candidate(self, run: RunState) -> None:
        """The principal's spend today, for a candidate's quota alone: the
        live run waits ``CANDIDATE_READ_WAIT_S`` at most; until it is read
        (a slow store, one that never answers, one that fails), the
        candidate judges no quota. A read a live quota made meanwhile stands."""
        root, store = run.root, self.harness.store
        assert root.principal is not None
        key = root.principal.key
        try:
            spent = await store_call(store, lambda: store.get_spend(key), "spend store", None)
        except DependencyDown:  # any failure of the read (``store_call``)
            return  # unknown: never "nothing left", which a live quota of the nesting would read too
        if root.daily_spent_usd is None:
            root.daily_spent_usd = spent

    # ------------------------------------------------------------ resume

    async def resume(self, inputs: Any) -> RunState | None:
        """A reply resumed with a human's answer continues its parked run;
        the caller bound now is recorded (a different one is refused at
        the permission point); the run takes its concurrency slots again."""
        if not isinstance(inputs, _RESUME_EVENTS) or not await _taken(self.agent, inputs):
            return None  # AgentScope refuses it (or, an interrupt, ignores it): nothing resumes
        parked_here = self.harness.table.get(self.agent.state.reply_id)
        kept = await self._kept_park(parked_here) if parked_here is not None else _Kept.CURRENT
        if kept is _Kept.STALE:
            assert parked_here is not None
            await self._free(parked_here)  # it went on elsewhere: its slots go, its waiting_input report stands
            self.harness.table.forget_parked(parked_here.run_id)
            parked_here = None
        await self._replace_earlier(keep=parked_here)  # the resumed run is live, no longer parked
        parked_by_another = unreadable = False
        if parked_here is not None:
            run = parked_here
        else:
            run, parked_by_another, unreadable = await self._restored()
        self.harness.table.bind(self.agent, run)  # a later reply finds it as the agent's run
        self.resumed_park = run.superseded = run.report
        run.report = None  # the park's provisional report is superseded
        run.resume_by(self.harness.caller_principal(run))
        run.resumer_recorded = True
        stale = _answers_another_park(run, inputs)
        run.awaiting_human.clear()
        rejoin(self.harness, run)
        by_another = (parked_here is not None and run.resumed_by_another()) or parked_by_another
        answered_already = not stale and not await self._claimed(run)  # one answer per park, across processes
        acts = False  # for nobody: it takes no slot from the resume that does act
        if kept is _Kept.GONE or unreadable:  # its one answer cannot be told apart from one used elsewhere
            end_resumed_by_another(self.harness, run, "its park record cannot be read (expired, lost, or the store "
                                                      "did not answer)")
        elif stale:
            end_resumed_by_another(self.harness, run, "answers another park than the one waiting")
        elif answered_already:
            end_resumed_by_another(self.harness, run, "answered already")
        elif by_another:  # a human's approval or a client's result alike
            end_resumed_by_another(self.harness, run)
        else:
            acts = True
        if isinstance(inputs, UserConfirmResultEvent):  # restored: what was shown is not known here
            _rules_only_for_shown_calls(self.agent, inputs, by_another or not run.asked_here,
                                        self.harness.services.approvals, run.resumed_by)
        self.run = run
        run.replied_by = self.serial  # this reply's now: an earlier reply's late close leaves it be
        if acts:  # its slots were given back at the park
            await self.harness.services.fleet.open_run(run, run.root.table is self.harness.table)
        return run

    async def _restored(self) -> tuple[RunState, bool, bool]:
        """A reply parked in another process (its state restored from
        storage) resumes here: a run of its own, opened as a new reply's is
        (its principal's daily quota read), so it is judged, bounded and
        reported like any other; held to what the parking process recorded
        (``ParkRecords``), when the store keeps it. The run; whether
        another caller than the one who parked it resumes it; whether the
        store that keeps the records did not answer (who parked it, what it
        spent and whether its answer was used are unknown: it acts for
        nobody, as a claim the store cannot make)."""
        state = self.agent.state
        caller = self.harness.current_principal()
        run = await self._open_run(state.reply_id, state.session_id, caller, None)
        await _recall_results(run, self.agent, self.harness.config.result_max_tokens)  # not in a record
        record = await _park_record(self.harness, run)
        if not isinstance(record, dict):
            run.park_id, recorded = _park_id_kept(self.agent, run.run_id)
            # a park whose record was never written (the store down at the park) is the parking
            # process's (what it made is known there only); one written but not here (expired, lost,
            # another store) is resumed unverified, its answer still claimed once
            return run, False, record is UNANSWERED or (run.park_id is not None and not recorded)
        run.park_id = str(record["park"]) if record.get("park") else None  # its one answer is claimed, read or not
        try:
            _held_to(run, record)
        except Exception as exc:  # tampered with, or another version's: its resume is unverified
            log.warning("harness could not read the park record of %s: %s", run.run_id, exc)
        if record.get("by") == getattr(caller, "key", None):
            return run, False, False
        run.parked_by_another = True  # its resumed call is refused as such
        # the run is its parker's, as in the parking process (the resumer is recorded beside it)
        run.act_for(self.harness.recorded_principal(record.get("principal")))
        return run, True, False

    async def _kept_park(self, run: RunState) -> _Kept:
        """What the store's record says of the reply this process parked
        (``run``): its current park; a newer park made in another process
        since (this run is a stale copy); or none any more (expired or lost,
        or the store not answering: its one answer cannot be claimed)."""
        if run.park_id is None:  # no store kept a record of it: this process's park is the one
            return _Kept.CURRENT
        if time.monotonic() - run.parked_at > PARK_TTL_S:  # its record and its claim have lapsed in the store
            return _Kept.GONE
        record = await _park_record(self.harness, run)
        if not isinstance(record, dict):  # one never written (the store down at the park) is this process's, claimed
            return _Kept.GONE if run.park_recorded else _Kept.CURRENT
        if record.get("park") == run.park_id or record.get("park") in run.earlier_parks:
            return _Kept.CURRENT  # its own record, or an earlier park's of this run (this one's not written)
        return _Kept.STALE

    async def _claimed(self, run: RunState) -> bool:
        """Whether this resume takes the park's one answer (claimed in the
        store, atomically across processes); a park the store keeps no
        record of has nothing to claim. A store that does not answer: not
        taken (the resume acts for nobody, as budgets fail closed)."""
        park_id = run.park_id
        if park_id is None:
            return True
        taken = await _park_records(self.harness, lambda s: s.park_claim(park_id),
                                    f"claim the answer of park {park_id}", run.deadline)
        return taken is NOT_KEPT or (taken is not UNANSWERED and bool(taken))

    async def _record_park(self, run: RunState) -> None:
        """Keep what the parked run was (``_park_record_of``) in a store that
        keeps such records, for a resume in another process. Not kept
        (logged), a resume elsewhere is judged as unverified."""
        if isinstance(self.harness.store, ParkRecords):
            if run.park_id is not None:
                run.earlier_parks.add(run.park_id)  # a record of it still in the store is older than this park
            run.park_id = uuid.uuid4().hex  # its one answer is claimed under it
            run.parked_at = time.monotonic()
            run.park_recorded = await _put_park_record(self.harness, run)
            _keep_park_id(self.agent, run)

    async def shape_external_results(self, inputs: Any) -> None:
        """Client-executed results enter the context here, not through
        ``on_acting``: shape them like any other result before they do,
        each as the outcome of the awaited call its id names (AgentScope
        checks ids only), with no say in the harness's metadata (its facts,
        error class, candidates)."""
        run = self.run
        if run is None or not isinstance(inputs, ExternalExecutionResultEvent):
            return
        flow, redactor = self.harness.flow, self.harness.redactor
        awaited = {call.id: call for call in self.agent.state.get_awaiting_tool_calls(self.agent.name)}
        names = {call_id: call.name for call_id, call in awaited.items()}
        for block in inputs.execution_results:
            # the client speaks for its tool's result, never for the harness; what it says
            # is kept and shown: redacted as a server tool's result is (its tool's pii below),
            # once AgentScope has checked what the client sent (``_cleaned_metadata``)
            self.client_metadata.setdefault(block.id, []).append((block, readable_metadata(
                redactor, {k: v for k, v in (block.metadata or {}).items() if k != METADATA_KEY},
            )))
            call, sent_as = awaited.pop(block.id, None), block.name
            if call is not None and not await _shape_kept(self.agent, block, sent_as):
                break  # AgentScope stops taking the event's results here: they are no outcome
            # filed, and sent to the model, under its call's name (never the client's)
            block.name = names.get(block.id) or neutralise_markers(redactor.redact(sent_as))
            if call is None:  # each awaited call is answered once: a second result reaches no one
                block.output, block.state = _SECOND_RESULT, ToolResultState.ERROR
                continue
            if call.name != sent_as and not await _shape_kept(self.agent, block, call.name):  # named to pass
                block.output, block.state = _MISSHAPEN_RESULT, ToolResultState.ERROR
                continue
            ctx = run.admitted.pop(block.id, None) or await flow.unjudged(run, self.agent, call)
            await self._shape_client_result(ctx, block)

    async def _shape_client_result(self, ctx: HookContext, block: ToolResultBlock) -> None:
        """A client's result shaped in place as a server tool's is, its
        metadata cleaned (kept for ``_cleaned_metadata``)."""
        pending = self.client_metadata[block.id]
        # this block's: the last filed under its id
        pending[-1] = block, await shape_in_place(self.harness.flow, ctx, block, pending[-1][1])

    async def _served(self, run: RunState, end: ToolResultEndEvent, streamed: bool) -> list[Any] | None:
        """A result a middleware before the harness's served in ``on_acting``
        (a cache; the tool never ran) is in the context as it served it:
        shaped there now, as it entered, and its end shown as it was shaped;
        the text it ``streamed`` is shown whole as the model reads it (as the
        harness's ``on_acting`` shows a tool's; its data was shown as it came).
        ``None``: the end is another call's under the admitted one's id
        (refused: a provider's repeated id)."""
        ctx = run.admitted[end.tool_call_id]
        block = _result_block(self.agent, end.tool_call_id, ctx.tool.name if ctx.tool is not None else None)
        if block is None:
            return None
        await shape_served(self.harness, run, block)
        shown: list[Any] = [end.model_copy(update={"state": block.state, "metadata": block.metadata})]
        text = result_text(block.output) if streamed else ""
        if text:
            shown.insert(0, ToolResultTextDeltaEvent(reply_id=end.reply_id, tool_call_id=end.tool_call_id, delta=text))
        return shown

    def _tool_pii(self, run: RunState, tool: str | None) -> tuple[dict[str, str], bytes]:
        """The ``pii`` modes (and salt) a result of ``tool`` is shaped by."""
        return result_pii(self.harness.config.tools.get(tool) if tool is not None else None, run)

    async def _data_shown(self, run: RunState, event: ToolResultDataDeltaEvent) -> ToolResultDataDeltaEvent:
        """A result's data piece as the user is shown it: its link shaped as
        the model reads the block's (a signed URL's key redacted, the tool's
        ``pii`` applied)."""
        if event.url is None:
            return event
        modes, salt = self._tool_pii(run, self.tool_names.get(event.tool_call_id))
        url = await shaped_link(event.url, self.harness.services.redactor, modes, salt)
        return event if url == event.url else event.model_copy(update={"url": url})

    async def _held_shown(self, run: RunState, tool: str | None, held: list[Any]) -> list[Any]:
        """Text a middleware before the harness's streamed for a call and then
        handed the call on (progress): in one piece, redacted and shaped by
        the tool's ``pii`` as the result is, a step at a time for a large one
        (none of it when that withholds it)."""
        modes, salt = self._tool_pii(run, tool)
        text = "".join(e.delta for e in held)
        shown, _, found = await filter_result(self.harness.services.redactor, text, modes, salt)
        return [] if found.blocked_kinds or not shown else [held[0].model_copy(update={"delta": shown})]

    def _cleaned_metadata(self, end: ToolResultEndEvent) -> ToolResultEndEvent:
        """A client's result AgentScope took (it checks the metadata the
        client sent against its tool's ``metadata_schema``, which a masked
        or redacted value may no longer match): its metadata cleaned now,
        before AgentScope keeps the result in the context, and as shown."""
        pending = self.client_metadata.get(end.tool_call_id)
        if not pending:
            return end
        block, metadata = pending.pop(0)  # AgentScope takes an event's results in order (ids may repeat)
        block.metadata = metadata
        return end if metadata == end.metadata else end.model_copy(update={"metadata": metadata})

    # ------------------------------------------------------------ ends

    def _went_on(self, run: RunState) -> None:
        """The reply goes on past an end a middleware before the harness's
        swallowed (AgentScope's way to ask for another round): the report
        settled there was provisional. The run is open again, and its true
        end settles and publishes the report that supersedes it (same run
        id: ``on_report`` is called again, the history keeps the last)."""
        run.reopen, run.said_after_end = None, False  # what was spent at the held end: in the round's report
        stale, self.end_reason, self.corrections, self.structured = run.report, None, [], None
        facts = run.facts  # what an answer was judged to there is undone: the next round's answer is judged
        facts.terminal, facts.stop_text, facts.unsupported_claims[:], facts.claimed_steps[:] = self.before_end
        if stale is None:
            return
        run.report, run.superseded = None, stale
        if run.parent is not None:  # its root's work in flight again, as while it ran
            run.parent.open_children[run.run_id] = run
            run.root.live_nested[run.run_id] = run

    def _hold(self, run: RunState, end: ReplyEndEvent) -> bool:
        """Hold back one completed ``ReplyEndEvent`` when a hook asked for
        another round (and the loop can make one)."""
        if not run.hold_reply_end:
            return False
        run.hold_reply_end = False
        return end.finished_reason == ReplyFinishedReason.COMPLETED and rounds_left(self.agent)

    async def session_end(self, run: RunState) -> None:
        """``on_session_end`` hooks on the final answer, the answer the user
        receives, then settle."""
        harness = self.harness
        msg, owed = run.candidate, run.answer_owed
        original = owed if owed is not None else (msg.get_text_content() or "") if msg is not None else ""
        ctx = harness.session_context(run, self.agent, original, self.end_reason)
        ended = run.facts.terminal is not None
        refusal = await harness.runner.run("on_session_end", ctx)
        first = ctx.audit  # None: the audit is disabled
        rewritten = first is not None and (first[0] != original or ctx.final_text != first[1])
        reaudited = refusal is None and first is not None and ctx.final_text != first[1]
        if reaudited:
            refusal = await harness.runner.rerun(AUDIT_HOOK, ctx)  # a later hook's rewrite
        audited = ctx.final_text or ""  # cleaned as the stream was (or a hook's rewrite, audited)
        final = audited if harness.shadow else corrected_answer(run, audited, harness.config)
        if not (ended or harness.shadow) and overrules_answer(run, harness.config):
            final = run.facts.stop_text or final  # a hook stopped the run here: its text, as a stop elsewhere gives
        if final != audited:  # a replacement (a hook's stop text may quote anything) takes the answer's filter
            final = answer_filter(harness.services, run).apply(final)[0]
        structured_ok = self._filter_structured(run)
        if structured_output_is_withheld(run) and not harness.shadow:
            self.structured = None if self.structured is None else (None,)  # made without its data
        # shadow mode withholds nothing, and ends the report as enforcing would
        failed = refusal is not None or not structured_ok or (harness.shadow and ctx.would_refuse is not None)
        if failed:
            run.facts.conclude(TerminalState.INCOMPLETE, "audit_failed", override=True)
        if failed and not harness.shadow:
            final = WITHHELD_ANSWER
            if self.structured is not None:
                self.structured = (None,)
        state, reason = terminal_state(run, finish_required(run, harness.config), self.end_reason)
        if reason == "answered" and self._says_nothing(msg, final):
            run.facts.conclude(TerminalState.INCOMPLETE, "no_answer", override=True)
            state, reason = TerminalState.INCOMPLETE, "no_answer"
            if not harness.shadow:  # shadow mode delivers what the model said, and reports the end
                final = answer_filter(harness.services, run).apply(unanswered(run, harness.config.fallback_text))[0]
        if (reaudited or failed or reason == "no_answer") and OUTCOME_HOOK in harness.runner.by_name:
            await harness.runner.rerun(OUTCOME_HOOK, ctx)  # the end changed after it was recorded, or cut it short
        self.answer = final
        if msg is not None and final != original:
            _rewrite_text(msg, final)
        if owed is not None:  # the stream showed the output's round, never this answer
            self.corrections = text_block_events(run.run_id, f"harness-{uuid.uuid4().hex[:12]}", final)
            self.agent.state.append_context(self.agent.name, [TextBlock(text=final)])  # what the model reads next
        elif msg is not None and (final != audited or rewritten):
            # a correction, a withheld answer or a hook's rewrite: the stream
            # showed the answer, so what replaced it follows it there
            self.corrections = text_block_events(run.run_id, f"harness-{uuid.uuid4().hex[:12]}", f"\n\n{final}")
        elif msg is None and self.structured == (None,) and final:
            # the stream showed the structured output's arguments: what the user receives in its place follows
            self.corrections = text_block_events(run.run_id, f"harness-{uuid.uuid4().hex[:12]}", final)
        await self.settle(run, state, reason)

    def _says_nothing(self, msg: Msg | None, final: str) -> bool:
        """The model's answer says nothing: nothing visible once audited (a
        provider's empty answer, or one made only of markers the audit strips,
        spaces and invisible format characters), no structured output, no
        data. Not an answer. (A finishing tool's answer is its tool's contract:
        its ``verify`` judges it.)"""
        if msg is None or not shows_nothing(final):
            return False
        if self.structured is not None and self.structured[0] is not None:
            return False
        return not any(isinstance(block, DataBlock) for block in msg.get_content_blocks())

    def _filter_structured(self, run: RunState) -> bool:
        """The reply's structured output (its schema already judged what the
        model wrote) through the answer's filter: secrets, markers,
        ``HarnessConfig.pii``, for the final message. ``False`` when a
        ``block`` kind was found: it is withheld, as a text answer is."""
        if self.structured == (None,):  # withheld at an end a middleware then swallowed: it stays withheld
            return False
        value = getattr(getattr(self.agent.state, "reply_context", None), "structured_output", None)
        if value is None:
            return True
        answer, blocked = answer_filter(self.harness.services, run), set()

        def clean(text: str) -> str:
            cleaned, found = answer.apply(text)
            blocked.update(found.blocked_kinds)
            return cleaned

        self.structured = (cleaned_args(value, clean, numbers=True),)
        # the agent's state keeps the filtered value (never None: AgentScope would ask for it again)
        self.agent.state.reply_context.structured_output = self.structured[0]
        if blocked:
            self.harness.services.record(run, "final_answer_audit", "on_session_end", "refuse", code="pii_blocked",
                                         detail=f"the structured output contained {', '.join(sorted(blocked))}")
        return not blocked

    async def park(self, run: RunState) -> list[Any]:
        """The reply stopped for a human (a confirmation or an outside
        answer): a provisional ``waiting_input`` report; the slot is kept."""
        await self._keep_parked(run, _park_reason(run, self.agent))
        return self.closing_events(run)

    async def _keep_parked(self, run: RunState, reason: str) -> None:
        """The run waits for a human: its slot (what they were shown, who
        parked it) is kept as the agent's parked run until a reply resumes
        it or a new one replaces it; its report says ``waiting_input``."""
        self.parked = True
        run.pauses += 1  # a call still judged now is not admitted after it
        self.harness.table.park(self.agent, run.run_id)
        await _shown_at_park(run, self.agent)
        await self.settle(run, TerminalState.WAITING_INPUT, reason)
        await self._record_park(run)
        await self.harness.services.fleet.park_run(run)

    async def settle(self, run: RunState, state: TerminalState, reason: str) -> RunReport:
        """Close the books of a run once: its report, the parent's children,
        the report history and the ``on_report`` callback."""
        if run.report is not None:
            return run.report
        harness = self.harness
        await harness.model_guard.charge_stopped_streams(run)  # streams the reply no longer reads
        name = getattr(self.agent, "name", run.agent_name)
        # a failure's reason quotes its exception, which may quote a key: scrubbed as any
        # record, then cut (a cut first would leave a secret's head no pattern matches)
        reason = harness.services.scrubbed(reason)[:REASON_CHARS]
        run.children[:] = [_adopted(harness.services, child) for child in run.children]
        report = run.report = build_report(run, state, reason, name, harness.config.mode, harness.services.scrubbed)
        stopped = run.stopped_short()  # what binds the work its tasks start from here on
        run.handle.stopped = stopped
        run.adopt_late = functools.partial(_adopted, harness.services)  # for a child that settles later
        parent = run.parent
        if parent is not None:
            parent.open_children.pop(run.run_id, None)
            _nested_settled(run)
            _superseding(parent.children, report)
            if run.called_by is not None:  # once per run: a park's provisional report is superseded
                _superseding(parent.ended_inside.setdefault(run.called_by, []), report)
            _join_late(run, report)
        if run.superseded is not None:  # one report per run in the history: the provisional one leaves it
            with contextlib.suppress(ValueError):
                harness.reports.remove(run.superseded)
            run.superseded = None
        await harness.publish(report, self.agent)
        return report

    async def close(self, failure: BaseException | None) -> None:
        """The reply's ``finally``: settle what has not been settled, repair
        a history left with dangling calls, drop the slot (unless parked,
        or still parked: a resume AgentScope did not take)."""
        run = self.run
        if run is not None:
            run.reopen = None  # the reply is over: no round comes after its end
        if run is None or self.parked or self.harness.table.slots.get(run.run_id) is not run:
            return  # parked, or a later reply of the agent settled and freed it (abandoned)
        if run.replied_by and run.replied_by != self.serial:
            return  # a later reply resumed it (AgentScope closes a dropped stream's layers late, in a task)
        try:
            if run.admitted:  # served results whose end was never read: shaped before any model reads them
                await shape_served_in_context(self.harness, run, self.agent)
            if failure is not None and not isinstance(failure, GeneratorExit):
                _close_dangling_tool_calls(self.agent, failure)
            left_at_question = isinstance(failure, GeneratorExit) and self.asked
            if left_at_question:  # a call still judged is not admitted after it (the resume judges it)
                run.pauses += 1
            if left_at_question and _awaits_human(self.agent):
                await self._keep_parked(run, _park_reason(run, self.agent))
            elif left_at_question and run.report is None:
                # its batch still runs (AgentScope waits for it before it waits for the answer): what the
                # run made is recorded all the same, so that a resume elsewhere makes none of it again
                await self._record_park(run)
            elif failure is not None and self.resumed_park is not None and _awaits_human(self.agent):
                await self._park_again(run, failure, self.resumed_park.reason)
            elif run.said_after_end and run.report is not None:  # a judge's calls after its end: said
                ended, run.said_after_end = run.report, False
                run.report, run.superseded = None, ended
                await self._outcome_again(run)
                await self.settle(run, ended.terminal_state, ended.reason)
            elif run.report is None:
                state, reason = terminal_state(
                    run, finish_required(run, self.harness.config), self.end_reason, failure,
                )
                await self.settle(run, state, reason)
        finally:
            if not self.parked:
                await self._free(run)

    async def _outcome_again(self, run: RunState) -> None:
        """``strategy_feedback`` records the end once more: what it said at
        the end counted the spend before a judge's calls after it, and the
        report that supersedes the end's says them."""
        harness = self.harness
        if OUTCOME_HOOK in harness.runner.by_name:
            ctx = harness.session_context(run, self.agent, self.answer or "", self.end_reason)
            await harness.runner.rerun(OUTCOME_HOOK, ctx)

    async def _park_again(self, run: RunState, failure: BaseException, reason: str) -> None:
        """A reply resuming a run parked here failed with AgentScope still
        waiting for the human (it rejected the answer, e.g. for a call id it
        is not waiting for; or the reply was cut before it took it): nothing
        was resumed, so the run stays parked as the human left it. Its slot
        keeps what they were shown and who parked it, so the next resume is
        checked against both and held to the quota read at open (dropped,
        the next resume would open a run as if parked in another process,
        where neither can be checked). The report says what it said at the
        park (``waiting_input``, its reason), with the failure recorded."""
        self.harness.services.record(run, "resume_check", "on_reply", "resume_failed",
                                     detail=f"{type(failure).__name__}: {failure}")
        await self._keep_parked(run, reason)

    async def _free(self, run: RunState) -> None:
        """The run is over here: its concurrency slots, its slot and the
        agent's binding to it go."""
        try:
            await self.harness.services.fleet.close_run(run)
            if self.harness.candidate is not None:
                await self.harness.candidate.close_run(run)
        finally:
            self.harness.table.drop(run.run_id)
            self.harness.table.unbind(self.agent, run)

    def closing_events(self, run: RunState) -> list[CustomEvent]:
        """The last decisions and the report, emitted once the run settled."""
        events = flush(run)
        if run.report is not None:
            events.append(CustomEvent(name="harness.report", value=run.report.model_dump(mode="json")))
        return events


def rounds_left(agent: Any, in_round: bool = False) -> bool:
    """Whether AgentScope's loop can make another round (``max_iters``).
    ``in_round``: asked while a round runs (AgentScope counts it at its end)."""
    return bool(agent.state.cur_iter + in_round < agent.react_config.max_iters)


def text_block_events(reply_id: str, block_id: str, text: str) -> list[Any]:
    """A text block the harness says, as the stream events AgentScope emits
    for one (its end carries no ``text``: the delta is the whole block)."""
    return [
        TextBlockStartEvent(reply_id=reply_id, block_id=block_id),
        TextBlockDeltaEvent(reply_id=reply_id, block_id=block_id, delta=text),
        TextBlockEndEvent(reply_id=reply_id, block_id=block_id),
    ]


def flush(run: RunState) -> list[CustomEvent]:
    """The decisions not yet emitted, as ``harness.decision`` events."""
    if not made(run, "unflushed"):
        return []
    return [
        CustomEvent(name="harness.decision", value=d.as_event_value(run.run_id))
        for d in run.take_unflushed()
    ]


REASON_CHARS = 300
"""The longest reason a report states (a failure's quotes its exception)."""


def _park_reason(run: RunState, agent: Any) -> str:
    """Why a reply parked: the questions the rules asked of the calls it
    awaits, else a user confirmation or an outside answer (e.g.
    AgentScope's ``AskUser``)."""
    awaiting = agent.state.get_awaiting_tool_calls(agent.name)
    asked = [run.asks[call.id] for call in awaiting if call.id in run.asks]
    if asked:
        return "; ".join(asked)
    if any(call.state == ToolCallState.ASKING for call in awaiting):
        return "awaiting_confirmation"
    return "awaiting_input"


def _awaits_human(agent: Any) -> bool:
    """Whether AgentScope still waits for a human's (or a client's) answer
    to a call of the agent's reply: it can be resumed."""
    return bool(agent.state.get_awaiting_tool_calls(agent.name))


def _rewrite_text(msg: Msg, text: str) -> None:
    """Replace the text of the final message in place: its blocks are the
    stored context's, so history is rewritten too. What the model gave with
    its text (its speech, as data) goes with it: the harness cannot filter it."""
    if isinstance(msg.content, str):
        msg.content = text
        return
    msg.content[:] = [b for b in msg.content if not isinstance(b, DataBlock)]
    blocks = [b for b in msg.content if isinstance(b, TextBlock)]
    if not blocks:
        msg.content.append(TextBlock(text=text))
        return
    blocks[0].text = text
    for block in blocks[1:]:
        block.text = ""


CUT_OUTSIDE_RESULT = (
    "The time allowed for this request ran out before this call's result came back; "
    "whether it went through is not confirmed: check before you call it again."
)
"""What the model reads next of a call a cut reply left unfinished, in place
of AgentScope's "interrupted by the user" (nobody interrupted it)."""


AGENTSCOPE_INTERRUPTED = "<system-reminder>The tool call has been interrupted by the user.</system-reminder>"
"""AgentScope's result for a call its interrupted reply left unfinished."""


def _cut_results_said(agent: Any) -> None:
    """The results AgentScope gave the calls a cut reply left unfinished
    (its interruption's) say what happened (``CUT_OUTSIDE_RESULT``)."""
    context = getattr(agent.state, "context", None)
    last = context[-1] if context else None
    if last is None or isinstance(last.content, str):
        return
    for block in last.content:
        if isinstance(block, ToolResultBlock) and block.state == ToolResultState.INTERRUPTED:  # the cut's doing
            block.output = CUT_OUTSIDE_RESULT


def _close_dangling_tool_calls(agent: Any, failure: BaseException) -> None:
    """A reply that raised may leave tool calls without a result; providers
    reject such a history, so close them with an error result."""
    try:
        dangling = agent.state.get_unfinished_tool_calls(agent.name)
    except Exception:
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


__all__ = ["ReplyLifecycle", "flush"]
