"""HarnessToolAdapter: the tool side, translating between AgentScope and
the harness's call flow (``calls.py``).

- ``on_check_permission`` is where every call is judged: AgentScope calls it
  for every call (client-executed tools included, and again when a
  confirmed call resumes) with its own parsed, schema-validated
  ``tool_input``, the exact value the tool receives. A refusal is a ``DENY``
  carrying the sentinel: AgentScope writes a ``DENIED`` result and the tool
  never runs.
- ``on_acting`` runs an admitted call within the run's deadline and shapes
  its result. It keeps AgentScope's contract (AGENTSCOPE2 §10): never
  raises, consumes ``next_handler`` to the end, yields exactly one
  ``ToolResponse``.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agentscope.agent._structured_output_tool import _GenerateStructuredOutput
from agentscope.message import DataBlock, TextBlock, ToolCallState, ToolResultState
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import ToolChunk, ToolMiddlewareBase, ToolResponse

from ..calls import (
    CUT_AT_DEADLINE,
    DEADLINE_PASSED,
    UNGATED_TOOLS,
    Verdict,
    as_made,
    made_unconfirmed,
    result_view,
)
from ..chains import release
from ..client_arguments import read_one_way
from ..context import HookContext, ToolCallView, ToolResultView, nobody_to_ask
from ..errors import METADATA_KEY, classify_exception, error_text
from ..facts import remember_done_inside, thawed, tools_in
from ..lazy import made
from ..lifecycle import added_once, end_resumed_by_another, record_parked, rejoin
from ..outputs import (
    cleaned_args,
    data_digests,
    data_names,
    dependency_label,
    pii_salt,
    quoted_shown,
    read_names,
    readable_metadata,
    result_pii,
    result_text,
    shaped_data,
    shaped_notice,
)
from ..run_state import RUN_HANDLE, TOOL_CALL, current_run, steps_moved
from ..runner import first_step
from ..sentinels import format_sentinel
from .agent_adapter import HarnessMiddleware, run_of

if TYPE_CHECKING:
    from ..harness import Harness
    from ..run_state import RunState

log = logging.getLogger("agentscope_harness")


TOOL_GRACE_S = 0.1
"""A tool still running this long after the run's deadline is cancelled. A
tool that bounds its waits with ``clamp_timeout`` has timed out by then and
reports its own error; the cut is for one that does not. A nested run's
tools are cut sooner (divided by 1 + its depth), so a sub-agent has ended,
with its own answer, before the tool that runs it is cut."""

DEADLINE_CUT = (
    "The call to {name} was stopped at the run's deadline before it finished; "
    "whether it took effect is unknown. Do not retry it; tell the user."
)

_STATES = {s.value: s for s in ToolResultState}


def _state_name(state: Any) -> str:
    """A response's state as its plain string value."""
    return str(getattr(state, "value", state))


class HarnessToolAdapter(HarnessMiddleware):
    """The tool-side middleware (second of ``harness.middlewares()``)."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    async def get_middleware_key(self) -> str:
        """Distinct from other middlewares' keys in ``middle_context``."""
        return "agentscope_harness.tool"

    async def on_system_prompt(self, agent: Any, current_prompt: str) -> str:
        """The prompt passed on as it is. Its one use: this adapter added
        twice without the agent adapter (whose ``on_reply`` checks it) fails
        the first reply at its first model call, whatever that reply does,
        rather than at a tool call many replies later, inside AgentScope's
        tool runner (an ``ExceptionGroup``, not the ``HarnessConfigError``).
        Checked at every model call: a run open under the reply's id may be
        another agent's (one rebuilt from its saved state resumes its id)."""
        added_once(self.harness, agent)
        return current_prompt

    def _instrumented(self, tool: Any, meta_tool: bool) -> None:
        """Log once per tool a tool of AgentScope's own kind that
        ``harness.instrument`` never reached: its failures are text to the
        harness (no ``dependency_down``, nothing for the breaker), so a run
        whose dependency went down would deliver the model's answer
        (``meta_tool``: the toolkit's own, which no ``instrument`` reaches)."""
        chain = getattr(tool, "_middlewares", None)
        name = getattr(tool, "name", "")
        told = self.harness.services.told_uninstrumented
        if chain is None or name in told or name in UNGATED_TOOLS or getattr(tool, "is_external_tool", False):
            return  # AgentScope's own tools (re-made every reply) fail as AgentScope handles them
        if meta_tool:
            return  # the toolkit's own meta tools: no instrument() reaches them, and they call no service
        if not _instrumented_chain(chain):
            told.add(name)
            log.warning(
                "tool %r was not instrumented: call harness.instrument(toolkit) after adding it, or "
                "its failures cannot be classified (dependency_down, the circuit breaker)", name,
            )

    async def _run(self, agent: Any) -> RunState:
        run = run_of(self.harness, agent)
        if run is None:  # used without the agent adapter, no on_reply opened a run: open one
            added_once(self.harness, agent)  # as on_reply checks it where it opens the run
            return await self.harness.tool_only_run(agent)
        return run

    # ------------------------------------------------------------ judging

    async def on_check_permission(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any],
    ) -> PermissionDecision:
        """Judge the call on the arguments the tool will receive; admit it
        only once AgentScope's own permission engine allows it too."""
        try:
            return await self._judged(agent, input_kwargs, next_handler)
        finally:
            release(next_handler)

    async def _judged(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., Any],
    ) -> PermissionDecision:
        flow = self.harness.flow
        run = await self._run(agent)
        call = input_kwargs["tool_call"]
        as_made = await self._as_made(agent, call, input_kwargs)
        tool = as_made[1] if as_made is not None else input_kwargs.get("tool")
        meta_tool = _meta_tool(agent, tool)
        self._instrumented(tool, meta_tool)
        view = ToolCallView(
            id=call.id,
            name=call.name,
            args=input_kwargs["tool_input"],
            policy=self.harness.config.tools.get(call.name),
            batch=(agent.state.reply_id, agent.state.cur_iter, run.turns),
            resumed=call.state == ToolCallState.ALLOWED,
            declared=self.harness.services.declared(call.name, tool),
            agentscope_own=_agentscope_own(agent, tool),
            meta_tool=meta_tool,
        )
        if made(run, "awaiting_human") and _drop_answered(agent, run, view):
            rejoin(self.harness, run)  # the tool adapter alone: resumed, and no on_reply said so
            self._record_resumer(run)  # answered, confirmed or denied: whoever answered acts from here
        if view.resumed:
            self._record_resumer(run)
        if run.resumer_recorded and run.made.get(view.id) == view.batch:
            # under way when its reply parked: AgentScope runs it again
            return _deny(flow.made_before(run, view))
        if not view.resumed and run.holds_call(view.id):
            # judged, admitted, running or parked state is kept by call id: a
            # second call under a held id would take the first one's place (its
            # judgement, its slots), so it is refused before it takes any
            return _deny(flow.id_taken(run, view))
        if as_made is None:  # a middleware before the harness changed the call: AgentScope runs its own
            changed = flow.changed_before_judged(run, view)
            if changed is not None:
                return _deny(changed)
        written = as_made[0] if as_made is not None else call.input
        if getattr(tool, "is_external_tool", False) and not read_one_way(
            written, input_kwargs["tool_input"], getattr(tool, "input_schema", None),
        ):
            refused = flow.read_otherwise(run, view)  # the client reads the text, not AgentScope's parse
            if refused is not None:
                return _deny(refused)
        verdict: Verdict | None = None
        admitted = False
        pauses = run.pauses  # a pause before it is admitted: not made here (the resume judges it)
        run.judging.add(view.id)
        try:
            verdict = await flow.judge(run, agent, view)
            if verdict.ctx is not None:
                verdict.ctx.judged_text = written  # on_acting makes only a call that carries it
            if verdict.refusal is not None:
                return _deny(verdict.refusal.text)
            if verdict.ask is not None and nobody_to_ask(agent):
                return _deny(flow.no_human_to_ask(run, view, verdict))
            with self.harness.services.approvals.only_rules_of(agent, run.principal):
                decision = await _engine_decides(run, next_handler, input_kwargs)
            if decision is None or run.past_deadline():  # AgentScope's engine decided past the deadline
                return _deny(flow.out_of_time(run, view.name).text)
            if verdict.shadow_ask and decision.behavior != PermissionBehavior.DENY:
                # shadow mode: the question recorded (or, with nobody to ask, its refusal), the call runs
                if nobody_to_ask(agent):
                    flow.no_human_to_ask(run, view, verdict)
                else:
                    flow.asked(run, view, verdict)
            if verdict.ask is not None and decision.behavior == PermissionBehavior.DENY:
                # a call AgentScope refuses is never put to a human (a yes would run it)
                return self._denied_shaped(run, view, decision)
            if run.pauses != pauses and not self.harness.shadow:  # its reply moved on without it: not made,
                return _deny(flow.judged_across_park(run, view))  # nor asked about (no question reaches anyone)
            if verdict.ask is not None or decision.behavior in (PermissionBehavior.ASK, PermissionBehavior.PASSTHROUGH):
                # asked by the harness or by AgentScope's engine: not once the run's answer is
                # delivered (also while the engine decided); else parked, judged again on resume
                under_way = flow.answer_under_way(verdict.ctx) if verdict.ctx is not None else None
                if under_way is not None:
                    return _deny(under_way.text)
                flow.parks(run, view, verdict)
                _waits(run, view)
            if verdict.ask is not None:
                return PermissionDecision(
                    behavior=PermissionBehavior.ASK, message=verdict.ask, decision_reason=verdict.ask,
                )
            if decision.behavior != PermissionBehavior.ALLOW:
                return self._denied_shaped(run, view, decision)
            refusal = flow.admit(verdict)
            admitted = refusal is None
            if admitted:  # a parked run's record counts it (a lead's, or its own: admitted after it parked)
                await record_parked(self.harness, run)
            if admitted and getattr(tool, "is_external_tool", False):
                _waits(run, view)  # the client runs it: the reply parks until its result
            return _deny(refusal.text) if refusal is not None else decision
        finally:
            # a call not admitted (refused, asked or denied by AgentScope's own
            # engine, cancelled while judged or while it decided) gives back the
            # slots and rate units its gates took (a resume is judged afresh) and drops the
            # charges they asked for: each refers to the call's context, a cycle
            # holding the run (a judging cut short drops its own)
            run.judging.discard(view.id)
            if not admitted:
                flow.call_over(run, view.id, ran=False)
            if verdict is not None and verdict.ctx is not None:
                verdict.ctx.admissions.clear()

    async def _as_made(self, agent: Any, call: Any, input_kwargs: dict) -> tuple[str, Any] | None:
        """``(the arguments text, the tool)`` of the call AgentScope will run
        (``None``: a middleware before the harness's changed it). Handed on
        first, the harness has AgentScope's own copies: nothing could change them."""
        chain = getattr(agent, "_check_permission_middlewares", None)
        if chain and chain[0] is self:
            return call.input, input_kwargs.get("tool")
        return await as_made(agent, call, input_kwargs["tool_input"], input_kwargs.get("tool"))

    def _denied_shaped(self, run: RunState, view: ToolCallView, decision: PermissionDecision) -> PermissionDecision:
        """AgentScope's engine (a tool's own ``check_permissions``) refused the
        call: its message is the result the model reads, and it may quote
        what it checked, so it is shaped as a notice is (secrets redacted, the
        tool's ``pii`` applied, markers defanged). Any other decision as it is."""
        if decision.behavior != PermissionBehavior.DENY or not isinstance(decision.message, str):
            return decision
        shaped = shaped_notice(decision.message, self.harness.redactor, view.policy, run)
        return decision if shaped == decision.message else replace(decision, message=shaped)

    def _record_resumer(self, run: RunState) -> None:
        """The tool adapter alone: the caller bound at the first call
        judged after a resume is its resumer (no ``on_reply`` recorded one);
        another caller than the one who parked the run, or nobody, ends it
        as a resume by another does (no call of it runs for the first)."""
        if run.resumer_recorded:
            return
        run.resume_by(self.harness.caller_principal(run))
        run.resumer_recorded = True
        if run.asked_here and run.resumed_by_another():
            end_resumed_by_another(self.harness, run)

    # ------------------------------------------------------------ shaping

    async def on_acting(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """Run the admitted call and shape its result; exactly one response."""
        try:
            response = await self._response(agent, input_kwargs, next_handler)
        finally:
            release(next_handler)
        # what the caller's stream shows of the result: its text and its data (an
        # image, as readable as the model reads it), under the response's id
        shown: list[TextBlock | DataBlock] = [b for b in response.content if isinstance(b, (TextBlock, DataBlock))]
        if shown:
            run = run_of(self.harness, agent)
            if run is not None:  # the reply shows this text as it comes (any other: at the call's end)
                texts = tuple([b.text for b in shown if isinstance(b, TextBlock)])
                run.own_pieces[input_kwargs["tool_call"].id] = texts
            yield ToolChunk(content=shown, state=ToolResultState.RUNNING, id=response.id)
        yield response

    async def _response(
        self, agent: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    ) -> ToolResponse:
        call = input_kwargs["tool_call"]
        run = await self._run(agent)
        ctx = run.admitted.pop(call.id, None)
        if ctx is None:  # not admitted at the permission point: never runs, and the report says why
            self.harness.services.record(
                run, "tool_adapter", "on_acting", "refuse", code="policy_error", tool=call.name, enforced=True,
                detail="not judged: the permission check never reached the harness's (a middleware before "
                       "it answered the check itself); the call did not run",
            )
            run.facts.refused.append(("tool_adapter", "policy_error", call.name))  # met again: the ladder climbs
            return _told(run, call.id, "policy_error", f"The call to {call.name} was not judged; it did not run.")
        changed = self._changed_since_judged(ctx, call)
        if changed is not None:
            return self._not_made(ctx, call, changed)
        if run.past_deadline():  # judged in time, but its run is out of it now
            return self._stopped(ctx, call, "not made", DEADLINE_PASSED, ran=False)
        # the tool adapter alone: no reply step binds the run, so the tool runs
        # with it bound here (a sub-agent it runs is nested in it, and reads its deadline)
        try:
            delivered = self._delivered(ctx, input_kwargs)
        except RecursionError:  # arguments nested past what can be walked: never delivered unredacted
            return self._not_made(ctx, call, f"The call to {call.name} had arguments nested too deeply to "
                                             "check; it did not run. Do not retry it; tell the user.")
        token = RUN_HANDLE.set(run.handle) if current_run() is not run else None
        self.harness.services.fleet.running(run, call.id)
        calling = TOOL_CALL.set(call.id)
        run.tools_bounded += 1
        try:
            original = await _within_deadline(
                run, call, delivered, next_handler,
                # a tool left stopping keeps its slots until it ends
                lambda stopping: self.harness.flow.call_over(run, call.id, True, until=stopping),
            )
        finally:
            run.tools_bounded -= 1
            TOOL_CALL.reset(calling)
            if token is not None:
                RUN_HANDLE.reset(token)
            ctx.refunds = ()  # made: its charges stand
            done = (made(run, "done_inside") or {}).pop(call.id, None)
            if done:
                remember_done_inside(agent, call.id, done)
        if original is None:
            return self._stopped(ctx, call, "cut short", DEADLINE_CUT, ran=True)
        return await self._shaped(ctx, original)

    def _delivered(self, ctx: HookContext, input_kwargs: dict) -> dict:
        """What the tool is called with: a finishing tool delivers to the
        user, so it receives its arguments redacted (the stored call keeps
        what the model wrote; the stream already showed it redacted).
        AgentScope's structured-output tool is not: its schema judges what
        the model wrote, and the lifecycle filters what it delivers."""
        view = ctx.tool
        if view is None or view.role != "finish":
            return input_kwargs
        args = thawed(view.args)
        redacted = cleaned_args(args, self.harness.redactor.redact)
        if redacted == args:
            return input_kwargs
        call = input_kwargs["tool_call"]
        return {**input_kwargs, "tool_call": call.model_copy(update={"input": json.dumps(redacted)})}

    async def _shaped(self, ctx: HookContext, original: ToolResponse) -> ToolResponse:
        try:
            redactor = ctx.services.redactor
            modes, salt = result_pii(ctx.tool.policy if ctx.tool is not None else None, ctx.run)
            blocks = _data_blocks(original)
            names = await read_names(blocks, redactor, modes, salt) if blocks else []
            shown = await shaped_data(blocks, names, redactor, modes, salt) if blocks else []
            result = await self.harness.flow.shape(ctx, _view_of(original, blocks, names, shown))
            sent = [] if result.withheld or not result.has_data else blocks
            data: list[TextBlock | DataBlock] = shown if sent else []
        except Exception as exc:
            self.harness.services.log_failure(f"harness shaping the result of {original.id}", exc)
            return self._failed(ctx, original, exc)
        if self.harness.shadow:  # data protection stays on; notes are not given
            result.notices = []
        return to_response(ctx, result, original, sent, data)

    def _changed_since_judged(self, ctx: HookContext, call: Any) -> str | None:
        """The sentinel of an admitted call a middleware before the harness's
        changed in ``on_acting`` (the call AgentScope runs): its name or its
        arguments are not what was judged (``None``: as judged, or shadow
        mode, which records it)."""
        view = ctx.tool
        if view is None or (call.name == view.name and (ctx.judged_text is None or call.input == ctx.judged_text)):
            return None
        return self.harness.flow.changed_before_judged(ctx.run, view)

    def _not_made(self, ctx: HookContext, call: Any, text: str) -> ToolResponse:
        """An admitted call the harness could not make safely: neither
        running nor counted as made; the model reads why, as an error."""
        run = ctx.run
        self._uncount(ctx, call)
        self.harness.services.record(run, "tool_adapter", "on_acting", "error", code="policy_error",
                                     tool=call.name, detail=text)
        return _told(run, call.id, "policy_error", text)

    def _uncount(self, ctx: HookContext, call: Any) -> None:
        """A call admitted but never made: out of flight and of the counts,
        its charges (a ledger's units, ``max_tool_calls``) and slots given back."""
        run = ctx.run
        for refund in ctx.refunds:
            refund()
        ctx.refunds = ()
        run.in_flight.pop(call.id, None)
        run.facts.called_tools[call.name] -= 1
        if run.facts.called_tools[call.name] <= 0:
            del run.facts.called_tools[call.name]
        self.harness.flow.call_over(run, call.id, False)

    def _stopped(self, ctx: HookContext, call: Any, what: str, text: str, ran: bool) -> ToolResponse:
        """A call the run's deadline stopped: not made (called past it), or
        cut short (still running ``TOOL_GRACE_S`` after it; the report keeps
        it in flight: its effect is unknown). The run ends ``incomplete``
        (``deadline``), so no later call of its batch starts; the model reads
        a sentinel, as an error, not AgentScope's interrupted result (which
        ends a reply as a user's interruption)."""
        run = ctx.run
        self.harness.flow.deadline_stopped(run, "on_acting", call.name, what)
        if ran:
            self.harness.flow.call_over(run, call.id, True)
            if ctx.tool is not None:  # it may have taken effect: said so, never "not done"
                made_unconfirmed(run, ctx.tool, CUT_AT_DEADLINE)
        else:  # neither running nor counted as made
            self._uncount(ctx, call)
        response = _told(run, call.id, "run_concluded", text.format(name=call.name))
        nested = _sub_runs(ctx, call.id)
        if nested is not None:
            response.metadata[METADATA_KEY]["sub_runs"] = nested
        return response

    def _failed(self, ctx: HookContext, original: ToolResponse, exc: Exception) -> ToolResponse:
        name = ctx.tool.name if ctx.tool else "tool"
        self.harness.services.record(
            ctx.run, "tool_adapter", "post_tool_call", "error", code="policy_error",
            tool=name, detail=f"{type(exc).__name__}: {exc}",
        )
        return _told(
            ctx.run, original.id, "policy_error",
            f"The call to {name} could not be completed safely. Do not retry it; tell the user.",
        )


async def _engine_decides(
    run: RunState, next_handler: Callable[..., Any], input_kwargs: dict,
) -> PermissionDecision | None:
    """AgentScope's own permission engine on the call (the tool's
    ``check_permissions``, its rules), within the run's deadline as every
    judgement is; ``None`` when the deadline came first (the check is cut).
    Its first step runs unarmed (most checks finish without waiting: no
    timer is made for them), a timer only for a check that waits."""
    checking = next_handler(**input_kwargs)
    if run.deadline is None:
        return await checking
    if inspect.iscoroutine(checking):
        done, checking = first_step(checking)
        if done:
            return checking
    bound = asyncio.timeout(max(run.deadline - time.monotonic(), 0.0))
    try:
        async with bound:
            decision: PermissionDecision = await checking
    except TimeoutError:
        if bound.expired():
            return None
        raise  # the check's own
    return decision


def _agentscope_own(agent: Any, tool: Any) -> bool:
    """Whether ``tool`` is AgentScope's own (the structured-output tool it
    equips a reply with, the agent's compression tool), told by the object,
    never by its name: an application's tool of that name is gated."""
    return isinstance(tool, _GenerateStructuredOutput) or (
        tool is not None and tool is getattr(agent, "_compression_tool", None))


def _meta_tool(agent: Any, tool: Any) -> bool:
    """Whether ``tool`` is the agent's toolkit's own meta tool (its
    ``reset_tools``, its skill viewer), told by the object."""
    toolkit = getattr(agent, "toolkit", None)
    return tool is not None and any(
        tool is getattr(getattr(toolkit, kit_own, None), "tool", None)
        for kit_own in ("builtin_meta_tool", "builtin_skill_viewer")
    )


def _waits(run: RunState, view: ToolCallView) -> None:
    """The call waits for a human or a client: the reply parks, and no
    answer of its batch is delivered (``CallFlow.judge``'s finish rule)."""
    run.awaiting_human.add(view.id)
    run.parked_calls.setdefault(view.batch, set()).add(view.id)
    run.resumer_recorded = False  # whoever resumes it is recorded then


def _drop_answered(agent: Any, run: RunState, view: ToolCallView) -> bool:
    """Whether a call the run parked on has been answered (a human's
    decision, a client's result) or is the one resumed now: it leaves
    ``awaiting_human``. Answered is AgentScope's own account: no longer a call
    of the reply's round without a result. The other calls of its batch,
    judged before the park, find it unanswered."""
    unfinished = {call.id for call in agent.state.get_unfinished_tool_calls(agent.name)}
    answered = {i for i in run.awaiting_human if i not in unfinished or (view.resumed and i == view.id)}
    run.awaiting_human -= answered
    return bool(answered)


NESTED_WAIT_S = 0.05
"""How long past its own cut a tool whose call runs a sub-agent still
ending is waited for: the sub-agent's answer, not a cancel, ends it."""


async def _within_deadline(
    run: RunState, call: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator],
    left_stopping: Callable[[asyncio.Task], None],
) -> ToolResponse | None:
    """The tool's response, or ``None`` when it was still running
    ``TOOL_GRACE_S`` after the run's deadline: it is cancelled, and given as
    long again to stop; one slower to stop (a rollback on cancellation) is
    left to finish in its task (``left_stopping`` is told), in flight, and
    the run does not wait for it. A caller's own cancellation is the tool's,
    as if it ran inline (the toolkit turns it into an interrupted result,
    which stands; one that lands as the tool returns is the caller's)."""
    consuming = _consume(call, input_kwargs, next_handler)
    if run.deadline is None:
        return await consuming
    # most tools answer without waiting: their first step runs now, and no
    # task or timer is made for them; one that waits goes on in a task, in
    # the same context as its first step (a variable it set there is its own)
    context = contextvars.copy_context()
    done, rest = context.run(first_step, consuming)
    if done:
        return rest
    tool = asyncio.get_running_loop().create_task(_rest_of(rest), context=context)
    lead = asyncio.current_task()
    if lead is not None:  # a sub-agent's step begun in that first step goes on in the tool's task
        steps_moved(context, run, lead, tool)
    # a sub-agent's tools are cut, and their stop waited for, within a quarter
    # of its lead's grace each, so it ends with its own answer before the lead
    # cuts the call running it (halving it met the lead's cut exactly)
    grace = TOOL_GRACE_S / 4 ** run.depth
    try:
        finished, _ = await asyncio.wait((tool,), timeout=max(run.deadline + grace - time.monotonic(), 0.0))
        if not finished and run.open_children:  # a sub-agent it runs is ending (deeper, its margin is thin)
            finished, _ = await asyncio.wait((tool,), timeout=NESTED_WAIT_S)
    except asyncio.CancelledError:
        if tool.done():  # it returned as the caller stopped: the stop stands
            _retrieved(tool)
            raise
        tool.cancel()
        return await tool
    if finished:
        return tool.result()
    tool.cancel()
    stopped: set[asyncio.Task] = set()
    try:
        stopped, _ = await asyncio.wait((tool,), timeout=grace)
    finally:  # the caller may stop waiting here too: a tool still stopping is left so all the same
        if stopped:
            _retrieved(tool)
        else:
            tool.add_done_callback(_retrieved)
            left_stopping(tool)
    return None


async def _rest_of(rest: Any) -> Any:
    return await rest


def _retrieved(task: asyncio.Task) -> None:
    """A tool cut at the deadline: how it ended is no one's (read, so it is not logged as lost)."""
    if not task.cancelled():
        task.exception()


async def _consume(call: Any, input_kwargs: dict, next_handler: Callable[..., AsyncGenerator]) -> ToolResponse:
    """The tool's final response (the stream consumed to its end)."""
    original: ToolResponse | None = None
    async for item in next_handler(**input_kwargs):
        if isinstance(item, ToolResponse):
            original = item
    if original is None:
        original = ToolResponse(
            id=call.id, state=ToolResultState.ERROR,
            content=[TextBlock(text=f"{call.name} produced no result.")],
        )
    return original


def _data_blocks(response: ToolResponse) -> list[DataBlock]:
    content = response.content
    if len(content) == 1 and type(content[0]) is TextBlock:  # the usual result
        return []
    return [b for b in content if isinstance(b, DataBlock)]


def _view_of(
    response: ToolResponse, blocks: list[DataBlock], names: list[str | None], shown: list[TextBlock | DataBlock],
) -> ToolResultView:
    """The result as hooks judge it: its text, its data ``blocks``' names as
    the model reads them (``names``, read once), and what tells the blocks
    apart as the model reads them (``shown``: a link's token redacted)."""
    content = response.content
    if len(content) == 1 and type(content[0]) is TextBlock:  # the usual result
        return result_view(content[0].text, _state_name(response.state), dict(response.metadata))
    return result_view(result_text(content), _state_name(response.state), dict(response.metadata), bool(blocks),
                       data_names(names, blocks), data_digests([b for b in shown if isinstance(b, DataBlock)]))


def to_response(
    ctx: HookContext, result: ToolResultView, original: ToolResponse, sent: list[DataBlock],
    data: list[TextBlock | DataBlock],
) -> ToolResponse:
    """The response the model reads: the tool's own object when nothing
    changed, else its shaped text (plus its data blocks ``sent``, shaped:
    ``data``)."""
    nested = _sub_runs(ctx, original.id)
    policy = ctx.tool.policy if ctx.tool is not None else None
    pii = policy.pii if policy is not None else None
    meta = readable_metadata(ctx.services.redactor, original.metadata, pii, pii_salt(ctx.run) if pii else b"")
    if (
        not result.withheld and not result.notices and not result.error_class and nested is None
        and result.text == result.raw_text and result.state == _state_name(original.state)
        and all(a is b for a, b in zip(data, sent, strict=True)) and meta is original.metadata
    ):
        return original
    body = result.body
    meta = dict(meta)
    own = dict(meta.get(METADATA_KEY) or {})
    if "dependency" in own:  # it streams to the UI with the result
        policy = ctx.tool.policy if ctx.tool is not None else None
        own["dependency"] = dependency_label(ctx.services.redactor, str(own["dependency"]), policy, ctx.run)
    if result.error_class:
        own["error_class"] = str(getattr(result.error_class, "value", result.error_class))
    if nested is not None:
        own["sub_runs"] = nested
    if own:  # stamp the run only where the harness has something to say
        own["run_id"] = ctx.run.run_id
        meta[METADATA_KEY] = own
    return ToolResponse(
        id=original.id,
        content=[_text_block(body, original), *data] if body or not data else data,
        state=_STATES.get(result.state, ToolResultState.ERROR),  # type: ignore[arg-type]
        metadata=meta,
    )


def _sub_runs(ctx: HookContext, call_id: str) -> list[dict[str, str]] | None:
    """How the sub-agents a call ran (or resumed) ended (DESIGN 6.1), their
    reasons scrubbed with this Harness's secrets as the report's children
    are, and, as metadata the UI streams and the context keeps, their
    personal data rewritten as the tool's ``pii`` says (``record_raw``
    keeps the report's, never the result's); ``None``: it ran none."""
    nested = (made(ctx.run, "ended_inside") or {}).pop(call_id, None)
    if nested is None:
        return None
    scrub = ctx.services.scrubbed
    modes, salt = result_pii(ctx.tool.policy if ctx.tool is not None else None, ctx.run)
    return [{"run_id": r.run_id, "agent": r.agent, "terminal_state": r.terminal_state.value,
             "reason": quoted_shown(scrub(r.reason), modes, salt)} for r in nested]


def _deny(text: str) -> PermissionDecision:
    return PermissionDecision(behavior=PermissionBehavior.DENY, message=text, decision_reason=text)


def _sentinel_response(call_id: str, code: str, text: str) -> ToolResponse:
    return ToolResponse(
        id=call_id, content=[TextBlock(text=format_sentinel(code, text))],
        state=ToolResultState.ERROR, metadata={METADATA_KEY: {"code": code}},
    )


def _told(run: RunState, call_id: str, code: str, text: str) -> ToolResponse:
    """A sentinel the model reads in place of a result, remembered so the
    final-answer audit strips exactly it."""
    response = _sentinel_response(call_id, code, text)
    run.remember_sentinel(code, response.content[0].text)  # type: ignore[union-attr]
    return response


def _text_block(text: str, original: ToolResponse) -> TextBlock:
    """The block the model reads. It takes the id and timestamp of the tool's
    own first text block, which it replaces (that block never left the
    harness), instead of generating new ones on every call."""
    for block in original.content:
        if isinstance(block, TextBlock):
            return TextBlock(text=text, id=block.id, created_at=block.created_at)
    return TextBlock(text=text)


class ErrorClassMiddleware(ToolMiddlewareBase):
    """Tool-level middleware keeping the class of a tool's exception, which
    AgentScope would reduce to ``str(e)``: ``metadata["harness"]["error_class"]``."""

    async def on_tool_call(  # type: ignore[override]  # AgentScope types it as a coroutine
        self, tool: Any, input_kwargs: dict[str, Any], next_handler: Callable[..., AsyncGenerator],
    ) -> AsyncGenerator:
        """Re-yield the tool's chunks; turn an exception into a classified error."""
        try:
            async for chunk in next_handler(**input_kwargs):
                yield chunk
        except Exception as exc:
            if type(exc).__name__ in ("DeveloperOrientedException",):
                raise
            error_class = classify_exception(exc)
            meta = {"error_class": error_class.value, "exc_type": type(exc).__qualname__}
            dependency = getattr(exc, "dependency", None)
            if dependency:
                meta["dependency"] = dependency
            yield ToolChunk(
                content=[TextBlock(text=error_text(exc))],
                state=ToolResultState.ERROR,
                metadata={METADATA_KEY: meta},
            )
        finally:
            release(next_handler)


def instrument_toolkit(toolkit: Any, middleware: ToolMiddlewareBase) -> None:
    """Prepend ``middleware`` to every tool registered in ``toolkit``, and to
    every tool its MCP clients hand out.

    AgentScope has no public way to add a middleware to a tool that already
    exists; this is the one place that touches its private ``_middlewares``
    list (a test fails loudly if AgentScope renames it). An MCP client makes
    a fresh tool each time the toolkit lists it (at every call), so the
    client is made one whose ``get_tool`` instruments each tool it makes
    (``_instrument_client``)."""
    for tool in tools_in(toolkit):
        _prepend(tool, middleware)
    for group in getattr(toolkit, "tool_groups", ()):
        for client in getattr(group, "mcps", ()):
            _instrument_client(client)


def _prepend(tool: Any, middleware: ToolMiddlewareBase) -> None:
    chain = getattr(tool, "_middlewares", None)
    if chain is None:
        raise RuntimeError(
            f"cannot instrument tool {getattr(tool, 'name', tool)!r}: AgentScope's "
            "ToolBase no longer has _middlewares; use harness.tool_middleware() "
            "when building the tool",
        )
    if not _instrumented_chain(chain):
        chain.insert(0, middleware)


_ERROR_CLASS = ErrorClassMiddleware()
"""The instrumenting middleware MCP clients' tools get (it keeps no state)."""
_INSTRUMENTED_CLIENTS: dict[type, type] = {}
"""Each MCP client class, and its instrumented subclass."""


def _instrument_client(client: Any) -> None:
    """Make ``client`` an instance of its class's instrumented subclass,
    whose ``get_tool`` instruments each tool it makes: a method of the class,
    so a copy of the client (``model_copy``, ``deepcopy``) is instrumented
    and makes its tools from itself (its connection, its headers)."""
    cls = type(client)
    if cls in _INSTRUMENTED_CLIENTS.values():
        return
    instrumented = _INSTRUMENTED_CLIENTS.get(cls)
    if instrumented is None:
        instrumented = _INSTRUMENTED_CLIENTS[cls] = type(
            f"Instrumented{cls.__name__}", (cls,), {"get_tool": _instrumented_get_tool(cls), "__module__": __name__},
        )
    object.__setattr__(client, "__class__", instrumented)


def _instrumented_get_tool(cls: type) -> Callable[..., Any]:
    async def get_tool(self: Any, name: str) -> Any:
        """The MCP tool ``name``, instrumented (``ErrorClassMiddleware``)."""
        tool = await cls.get_tool(self, name)  # type: ignore[attr-defined]
        _prepend(tool, _ERROR_CLASS)
        return tool
    return get_tool


def _instrumented_chain(chain: list[Any]) -> bool:
    """Whether a tool's middleware chain has the error-class middleware."""
    return any(isinstance(m, ErrorClassMiddleware) for m in chain)
