"""Round 172 c (scenarios on "Choices where the design is silent", "How it works" and "Use it";
about 52 held): a background worker whose sub-agent's reply opened after its lead settled
stopped short ran as a fresh run, past the stop and the run-wide caps (the lead's run freed,
its handle now says how it ended); a double click on one worker ran the approved call zero
times where the README said once (it says at most once now: a case it does not support)."""
from __future__ import annotations

import asyncio

from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from callers_kit import LOG, fresh, notes
from scripted import ScriptedModel, calls, confirm, drain, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, ToolPolicy

ALICE = Principal(user_id="u-42", tenant="acme")


async def pay_out(user_id: str, amount: int) -> str:
    """Pay out.

    Args:
        user_id (str): Who.
        amount (int): How much.
    """
    LOG.append(("pay", amount))
    return f"paid {amount}"


async def test_background_sub_agent_of_a_stopped_lead_is_bound_even_if_its_reply_opens_after():
    """README "Choices": "A run stopped short of its task (incomplete or failed: ... a cap ...)
    by an enforcing Harness binds every sub-agent nested in it, awaited or started in a
    background task, before the lead settles and after: their tool calls are refused
    `run_concluded` and their next model call is not made (they end `incomplete`,
    `run_concluded`)"; HarnessConfig: `max_model_calls` is "run-wide, sub-agents included".

    Attack: the lead's tool starts a background worker (asyncio.create_task, as a job
    queue does) whose sub-agent reply begins a moment later; meanwhile the lead hits
    `max_model_calls=2` and settles `incomplete`. (The same worker opening its reply one
    tick earlier is bound: its call refused `run_concluded`.)

    What happens: the sub-agent's reply opens after the lead settled, so
    `run_state.live_parent` finds no live parent and it runs as a fresh root run of
    Alice: two more model calls and its `notes` tool run, `completed` (`answered`), past
    the lead's stop and its run-wide model-call cap. Should: bound as the lead's sub-agent
    (refused `run_concluded`, no model call, `incomplete`)."""
    fresh()
    h = Harness(HarnessConfig(tools={"notes": ToolPolicy(role="retrieval"), "start_sub": ToolPolicy(role="other")},
                              max_model_calls=2), load_entry_points=False, environ={})
    sub_model = ScriptedModel([calls(("notes", {"q": "bg"})), text("bg done")])
    sub = make_agent(sub_model, h.instrument(Toolkit(tools=[tool(notes)])), h.middlewares(), name="sub")
    tasks = []

    async def worker():
        await asyncio.sleep(0.2)  # the job is picked up a moment later
        return await sub.reply(UserMsg("lead", "work in background"))

    async def start_sub(task: str) -> str:
        """Start background work.

        Args:
            task (str): What.
        """
        tasks.append(asyncio.create_task(worker()))
        return "started"
    lead_model = ScriptedModel([calls(("start_sub", {"task": "x"})), calls(("notes", {"q": "more"})), text("x")])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(start_sub), tool(notes)])), h.middlewares(),
                      name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    r = h.last_report(lead)
    assert (r.terminal_state, r.reason) == (TerminalState.INCOMPLETE, "max_model_calls")
    await tasks[0]
    sr = h.last_report(sub)
    detail = (LOG, len(sub_model.calls), sr.terminal_state, sr.reason)
    assert ("notes", "bg") not in LOG, detail
    assert len(sub_model.calls) == 0, detail
    assert sr.terminal_state == TerminalState.INCOMPLETE, detail


async def test_double_click_on_one_worker_runs_the_approved_call_at_most_once():
    """README "Choices": "Nor are two agent objects loaded from one stored state resuming one
    park at once (a double click): the park's one answer is claimed by the first, so the
    call runs once, and the second ends the run they share as answered already
    (`refused:permission_denied`), the first too".

    Attack: one Harness (one web worker); Alice's payout of 80 parks on `ask_when`; the
    state is saved; her "yes" arrives twice at once (double click): two agents loaded
    from the saved state resume it concurrently (asyncio.gather).

    What happens: the approved call runs zero times: the first claims the answer, the
    second ends the shared run as answered already, and the first's call then meets the
    concluded run (`run_concluded`, plus an `approval_mismatch` refusal); both users'
    responses are the refusal fallback and the approval is spent. Should: the call runs
    once (what the README says the claim guarantees), as it does across two workers."""
    fresh()
    h = Harness(HarnessConfig(tools={"pay_out": ToolPolicy(
        role="mutation", identity_args={"user_id": "user_id"},
        ask_when=lambda a: "over 50" if a["amount"] > 50 else None)}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), text("Paid 80."), text("Paid 80.")])
    first = make_agent(model, h.instrument(Toolkit(tools=[tool(pay_out)])), h.middlewares())
    with h.acting_for(ALICE):
        items = await drain(first, UserMsg("user", "pay me 80"))
    asked = next(i for i in items if isinstance(i, RequireUserConfirmEvent))
    saved = first.state.model_dump_json()
    a, b = (make_agent(model, h.instrument(Toolkit(tools=[tool(pay_out)])), h.middlewares(),
                       state=AgentState.model_validate_json(saved)) for _ in range(2))

    async def yes(agent):
        with h.acting_for(ALICE):
            return await drain(agent, confirm(asked, asked.tool_calls[0]))
    await asyncio.gather(yes(a), yes(b), return_exceptions=True)
    ends = [(x.terminal_state.value, x.reason, x.refusals) for x in list(h.reports)[-2:]]
    assert LOG in ([], [("pay", 80)]), (LOG, ends)
    assert ("incomplete", "refused:permission_denied") in [end[:2] for end in ends], ends


async def test_a_background_worker_of_a_lead_that_completed_runs_its_own_run():
    """A lead that completed leaves its background work to its own rules (README: bound are
    sub-agents of a run stopped short of its task)."""
    fresh()
    h = Harness(HarnessConfig(tools={"notes": ToolPolicy(role="retrieval"), "start_sub": ToolPolicy(role="other")}),
                load_entry_points=False, environ={})
    sub_model = ScriptedModel([calls(("notes", {"q": "bg"})), text("bg done")])
    sub = make_agent(sub_model, h.instrument(Toolkit(tools=[tool(notes)])), h.middlewares(), name="sub")
    tasks = []

    async def worker():
        await asyncio.sleep(0.05)
        return await sub.reply(UserMsg("lead", "work in background"))

    async def start_sub(task: str) -> str:
        """Start background work.

        Args:
            task (str): What.
        """
        tasks.append(asyncio.create_task(worker()))
        return "started"

    lead_model = ScriptedModel([calls(("start_sub", {"task": "x"})), text("started it")])
    lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(start_sub)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "go")
    assert h.last_report(lead).terminal_state == TerminalState.COMPLETED
    await tasks[0]
    assert LOG == [("notes", "bg")] and h.last_report(sub).terminal_state == TerminalState.COMPLETED
