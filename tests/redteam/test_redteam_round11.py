"""Red team, round 11: the four latest fixes attacked from a user's side.

1. a client's own ``TimeoutError`` is a model error, not the deadline
   (3c4d0d9);
2. ``same_args`` defaults read from the tool AgentScope judged the call
   with; an undeclared name fails closed (6ad89d6);
3. a tool-adapter-only sub-agent is nested in the live run that runs it
   (a30fdd6);
4. a shadow sub-agent meeting its enforcing lead's ``max_tool_calls``
   refusal in two turns is stopped (0c9eecd).

Real ``Agent``s, real tools, the scripted model of ``tests/scripted.py``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
import weakref
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "realclient"))

from agentscope.message import UserMsg
from hookkit import Ran, crawling, drive, refunding, searcher
from scripted import ScriptedModel, calls, delegating_tool, make_agent, text

from agentscope_harness import (
    Harness,
    HarnessConfig,
    HarnessConfigError,
    Prerequisite,
    ToolPolicy,
)
from agentscope_harness.report import TerminalState


async def outcome(h: Any, agent: Any, principal: Any = None) -> tuple[Any, BaseException | None]:
    """One reply: the final message, or the exception the caller received."""
    try:
        _, final, _ = await drive(h, agent, principal)
    except Exception as exc:
        return None, exc
    return final, None


def opened_runs(h: Harness) -> list[Any]:
    """Weak references to every run ``h`` opens from now on."""
    seen: list[Any] = []
    original = h.table.open

    def spy(*args: Any, **kw: Any) -> Any:
        run = original(*args, **kw)
        seen.append(weakref.ref(run))
        return run

    h.table.open = spy  # type: ignore[method-assign]
    return seen


# ====================================================== 1. client timeouts


class CompressingTimeoutModel(ScriptedModel):
    """A scripted model whose context compression (AgentScope's
    ``generate_structured_output``) fails with the client's own read
    timeout, as an aiohttp-based SDK raises it."""

    def __init__(self, script: list[Any], error: BaseException, **kw: Any) -> None:
        super().__init__(script, **kw)
        self.error = error
        self.compressions = 0

    async def generate_structured_output(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        self.compressions += 1
        raise self.error


def _page_tool() -> Any:
    async def page(url: str) -> str:
        """Fetch a page.

        Args:
            url (str): The page.
        """
        return "lorem ipsum dolor sit amet " * 1000

    return page


async def test_a_compression_call_failing_with_the_clients_timeout_is_a_model_error() -> None:
    """The fix claims a client's own ``TimeoutError`` is a model error on
    streamed, non-streamed *and compression* calls. With AgentScope's
    truncation fallback off (``compression_fallback_to_truncation=False``,
    the setting the harness documents as "keeps the context as it is"), the
    compression's ``ServerTimeoutError`` leaves ``compress_context``, which
    AgentScope runs outside ``_reasoning``: the harness's model-error path
    (``on_reasoning``) never saw it. The run now ends at its next step with
    ``model_error_text`` and what it found, with no further model call."""
    import aiohttp
    from agentscope.agent import ContextConfig

    model = CompressingTimeoutModel(
        [calls(("page", {"url": "http://x"})), text("Here is the page."), text("again")],
        aiohttp.ServerTimeoutError("Timeout on reading data"), model="gpt-test",
    )
    model.context_size = 4000
    h = Harness(HarnessConfig(deadline_s=600.0, model_error_text="The provider failed; try again."),
                load_entry_points=False)
    agent = make_agent(model, [_page_tool()], h.middlewares(),
                       context_config=ContextConfig(compression_fallback_to_truncation=False))
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert model.compressions >= 1
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert exc is None and final.get_text_content().startswith("The provider failed; try again.")
    assert len(model.calls) == 1  # the page call's round; none after the failed compression


async def test_a_compression_timeout_with_agentscopes_fallback_continues_the_run() -> None:
    """With AgentScope's default truncation fallback, the client's
    timeout on the compression is a failed summary: AgentScope truncates
    and the run goes on; not read as the deadline (no deadline stop)."""
    import aiohttp

    model = CompressingTimeoutModel(
        [calls(("page", {"url": "http://x"})), text("Here is the page.")],
        aiohttp.ServerTimeoutError("Timeout on reading data"), model="gpt-test",
    )
    model.context_size = 4000
    h = Harness(HarnessConfig(), load_entry_points=False)
    agent = make_agent(model, [_page_tool()], h.middlewares())
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert exc is None and model.compressions >= 1
    assert report.terminal_state is TerminalState.COMPLETED
    assert not any(d.code == "deadline" for d in report.decisions)


class WaitForModel(ScriptedModel):
    """A user's model that bounds its provider call with
    ``asyncio.wait_for`` (its own timeout) and a provider that hangs."""

    def __init__(self, script: list[Any], own_timeout: float, hang_s: float, **kw: Any) -> None:
        super().__init__(script, **kw)
        self.own_timeout, self.hang_s = own_timeout, hang_s

    async def _call_api(self, model_name: str, messages: list, tools: Any = None,
                        tool_choice: Any = None, **kwargs: Any) -> Any:
        async def provider() -> Any:
            await asyncio.sleep(self.hang_s)
            return await ScriptedModel._call_api(self, model_name, messages, tools, tool_choice, **kwargs)

        return await asyncio.wait_for(provider(), self.own_timeout)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_users_wait_for_inside_the_model_is_a_model_error_and_the_deadline_still_cuts(stream: bool) -> None:
    """The model's own ``wait_for`` (0.05 s, run deadline 600 s): a model
    error, raised to the caller. The same model with a hang beyond a 0.3 s
    deadline and an own timeout of 10 s: the harness's deadline, not a model
    error (the fallback answer, ``incomplete``, ``deadline``)."""
    model = WaitForModel([text("never")], own_timeout=0.05, hang_s=5.0, stream=stream, model="gpt-test")
    h = Harness(HarnessConfig(deadline_s=600.0), load_entry_points=False)
    agent = make_agent(model, [], h.middlewares())
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert isinstance(exc, TimeoutError)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")

    model = WaitForModel([text("never")], own_timeout=10.0, hang_s=5.0, stream=stream, model="gpt-test")
    h = Harness(HarnessConfig(deadline_s=0.3), load_entry_points=False)
    agent = make_agent(model, [], h.middlewares())
    started = time.monotonic()
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert exc is None and time.monotonic() - started < 2.0
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")


async def test_a_users_middleware_raising_timeout_error_is_a_model_error_not_the_deadline() -> None:
    """A user middleware inside the harness's (the order the README warns
    against, but legal) that gives up with ``TimeoutError``: a failed model
    call with ``model_error_text``, not a deadline stop."""
    from agentscope.middleware import MiddlewareBase

    class GiveUp(MiddlewareBase):
        async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            raise TimeoutError("my own budget of patience ran out")

    h = Harness(HarnessConfig(deadline_s=600.0, model_error_text="Sorry, the model is unavailable."),
                load_entry_points=False)
    agent = make_agent(ScriptedModel([text("never")]), [], [*h.middlewares(), GiveUp()])
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert exc is None and final.get_text_content() == "Sorry, the model is unavailable."
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert not any(d.code == "deadline" for d in report.decisions)


async def test_a_client_timeout_message_carrying_a_key_does_not_reach_the_report() -> None:
    """A client whose timeout message quotes the request URL with the API
    key in it: the report (reason, decisions) carries no key."""
    import aiohttp

    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    model = ScriptedModel([aiohttp.ServerTimeoutError(f"Timeout reading https://api.x/v1?key={key}")],
                          model="gpt-test")
    h = Harness(HarnessConfig(deadline_s=600.0, model_error_text="The provider failed."), load_entry_points=False)
    agent = make_agent(model, [], h.middlewares())
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert exc is None and key not in (final.get_text_content() or "")
    assert key not in report.model_dump_json()


async def test_a_retried_client_timeout_then_an_answer_completes_and_counts_both_attempts() -> None:
    """AgentScope retries the client's timeout (a model class that lists
    it as retryable); the second attempt answers: ``completed``, two model
    calls counted, no deadline stop and no model error."""
    import aiohttp

    class Retrying(ScriptedModel):
        @classmethod
        def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
            return (aiohttp.ServerTimeoutError,)

    model = Retrying([aiohttp.ServerTimeoutError("Timeout on reading data"), text("All good.")], model="gpt-test")
    model.max_retries, model.retry_delay = 1, 0.0
    h = Harness(HarnessConfig(deadline_s=600.0), load_entry_points=False)
    agent = make_agent(model, [], h.middlewares())
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert exc is None and final.get_text_content() == "All good."
    assert report.terminal_state is TerminalState.COMPLETED and report.model_calls == 2


# ====================================================== 2. same_args and declared schemas


def seq_config(same: list[str] = ["order_id"], **kw: Any) -> HarnessConfig:  # noqa: B006
    return HarnessConfig(
        tools={
            "lookup_order": ToolPolicy(role="lookup"),
            "cancel_order": ToolPolicy(role="mutation", requires=[Prerequisite(tool="lookup_order", same_args=same)]),
        },
        require_finish_tool=False, max_enforce_retries=0, **kw,
    )


def shop(ran: Ran) -> tuple[Any, Any]:
    async def lookup_order(order_id: str, region: str = "eu") -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            region (str): The region.
        """
        ran.append(("lookup_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} ({region}): 1 mug, paid"

    async def cancel_order(order_id: str, region: str = "eu") -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            region (str): The region.
        """
        ran.append(("cancel_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} ({region}) cancelled"

    return lookup_order, cancel_order


async def test_a_typo_only_the_lookup_lacks_is_named_by_instrument_and_fails_closed_without_it() -> None:
    """``same_args=["sku"]``: the cancel declares ``sku``, the lookup does
    not. ``instrument`` names the lookup; without ``instrument`` no cancel
    ever runs (fails closed: the lookup's side is missing, never equal to a
    value the cancel states)."""
    from agentscope.tool import Toolkit
    from scripted import tool as always_allowed

    ran = Ran()
    lookup_fn, _ = shop(ran)

    async def cancel_order(order_id: str, sku: str) -> str:
        """Cancel an order line.

        Args:
            order_id (str): The order.
            sku (str): The line.
        """
        ran.append(("cancel_order", {"order_id": order_id, "sku": sku}))
        return "cancelled"

    def kit() -> Any:
        return Toolkit(tools=[always_allowed(lookup_fn), always_allowed(cancel_order)])

    h = Harness(seq_config(same=["order_id", "sku"]), load_entry_points=False)
    with pytest.raises(HarnessConfigError, match="lookup_order"):
        h.instrument(kit())
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"})),
        calls(("cancel_order", {"order_id": "A-1", "sku": "X"})),
        text("done"),
    ])
    agent = make_agent(model, kit(), h.middlewares())
    _, _, report = await drive(h, agent)
    assert ran.of("cancel_order") == []
    assert report.refusals == {"prerequisite_missing": 1}


async def test_a_confirmed_resume_is_judged_with_the_declared_defaults() -> None:
    """``cancel_order`` needs a human (no ALLOW: AgentScope asks). The
    lookup ran for region "eu" by default; the cancel, left without a
    region, parks; the approved resume is judged again: the default
    (declared in the schema of the tool passed on resume) matches, it runs
    once. A cancel of another order parks and is refused on resume."""
    from agentscope.event import ConfirmResult, RequireUserConfirmEvent, UserConfirmResultEvent
    from agentscope.tool import FunctionTool, Toolkit
    from scripted import run as run_reply
    from scripted import tool as always_allowed

    ran = Ran()
    lookup_fn, cancel_fn = shop(ran)
    toolkit = Toolkit(tools=[always_allowed(lookup_fn), FunctionTool(cancel_fn)])
    h = Harness(seq_config(same=["order_id", "region"]), load_entry_points=False)
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"})),
        calls(("cancel_order", {"order_id": "A-1"})),
        text("cancelled A-1"),
    ])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    events, _ = await run_reply(agent)
    ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    assert ran.of("cancel_order") == []
    answer = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls])
    await run_reply(agent, inputs=answer)
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert h.last_report(agent).refusals == {}


async def test_a_200_property_schema_read_per_call_stays_cheap() -> None:
    """``declared`` is computed from the schema on every judged call of a
    compared tool: 200 properties with defaults cost well under a
    millisecond a call."""
    from agentscope_harness.facts import declared_in

    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "default": f"v{i}"} for i in range(200)}}
    started = time.perf_counter()
    for _ in range(200):
        declared = declared_in(schema)
    per_call = (time.perf_counter() - started) / 200
    assert declared is not None and len(declared.defaults) == 200
    assert per_call < 1e-3, per_call


# ====================================================== 3. tool-adapter-only sub-agents


def tool_only_child(ran: Ran, script: list[Any], child_h: Harness | None = None, name: str = "child",
                    tools: list[Any] | None = None) -> tuple[Harness, Any, ScriptedModel]:
    child_h = child_h or Harness(HarnessConfig(), load_entry_points=False)
    model = ScriptedModel(script, model="c")
    child = make_agent(model, tools if tools is not None else [searcher(ran)], child_h.middlewares()[1:], name=name)
    return child_h, child, model


def lead_with(child: Any, config: HarnessConfig, script: list[Any], name: str = "delegate") -> tuple[Harness, Any]:
    h = Harness(config, load_entry_points=False)
    lead = make_agent(ScriptedModel(script, model="l"), [delegating_tool(child, name)], h.middlewares(), name="lead")
    return h, lead


@pytest.mark.xfail(strict=True, reason="a tool-only sub-agent's run is settled only at its agent's next reply that "
                   "calls a tool: the lead's report has no child, last_report(child) is None, and the child's "
                   "report is later appended to an already settled lead run")
async def test_a_tool_only_sub_agents_run_is_reported_in_its_leads_report() -> None:
    """"A sub-agent run so from a live run's tool is nested in that run,
    as the agent adapter nests one." Nested by the agent adapter, the
    sub-agent's report is one of the lead's ``children`` when the lead
    settles. Nested by the tool adapter alone, its run stays open after
    its reply (nothing settles it but the agent's next reply), so the
    lead's report lists no child and the sub-agent has no report at all."""
    ran = Ran()
    child_h, child, _ = tool_only_child(ran, [calls(("search", {"q": "a"})), text("child done")])
    h, lead = lead_with(child, HarnessConfig(max_tool_calls=5), [calls(("delegate", {"task": "x"})), text("lead done")])
    _, final, report = await drive(h, lead)
    assert final.get_text_content() == "lead done" and len(ran) == 1
    assert child_h.last_report(child) is not None
    assert [c.agent for c in report.children] == ["child"]


@pytest.mark.xfail(strict=True, reason="a settled lead run stays reachable through the tool-only sub-agent's held "
                   "run (its parent) for as long as the sub-agent lives: 'a settled run is freed at once'")
async def test_a_settled_lead_run_is_freed_while_its_tool_only_sub_agent_lives() -> None:
    """README: "A settled run is freed at once (contexts keep only a weak
    handle)". The tool-only sub-agent's held run (``_tool_only`` slot)
    keeps ``parent=`` the lead's run: a long-lived sub-agent keeps its last
    lead's run (its facts, decisions, artifacts, findings) alive."""
    ran = Ran()
    child_h, child, _ = tool_only_child(ran, [calls(("search", {"q": "a"})), text("child done")])
    h, lead = lead_with(child, HarnessConfig(max_tool_calls=5), [calls(("delegate", {"task": "x"})), text("lead done")])
    seen = opened_runs(h)
    await drive(h, lead)
    assert len(seen) == 1 and h.last_report(lead) is not None
    gc.collect()
    assert seen[0]() is None  # the lead's run, settled, is gone while the sub-agent lives


async def test_a_settled_lead_run_is_freed_once_its_tool_only_sub_agent_is_dropped() -> None:
    """The lead agent and its Harness live on; the sub-agent is dropped
    (the lead's tool reaches it through a holder the test empties): its
    held run goes, and the lead's settled run with it."""
    ran = Ran()
    child_h, child, _ = tool_only_child(ran, [calls(("search", {"q": "a"})), text("child done")])
    holder = [child]

    async def delegate(task: str) -> str:
        """Ask the sub-agent.

        Args:
            task (str): What to do.
        """
        msg = await holder[0].reply(UserMsg("lead", task))
        return msg.get_text_content() or ""

    h = Harness(HarnessConfig(max_tool_calls=5), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l"),
                      [delegate], h.middlewares(), name="lead")
    seen = opened_runs(h)
    await drive(h, lead)
    assert len(child_h.table) == 1  # the sub-agent's run, held until its next reply
    holder.clear()
    del child
    gc.collect()
    assert seen and seen[0]() is None  # the lead agent and its Harness still live
    assert len(child_h.table) == 0 and lead is not None


async def test_a_tool_only_sub_agent_under_a_1s_lead_deadline_has_its_slow_tool_cut() -> None:
    """The lead's deadline (1 s) binds the tool-only sub-agent's tool: its
    3 s tool is cut, the lead ends ``incomplete`` (``deadline``) in about a
    second, not three."""
    ran = Ran()

    child_h, child, _ = tool_only_child(ran, [calls(("crawl", {"url": "http://x"})), text("child done")],
                                        tools=[crawling(ran, 3.0)])
    h, lead = lead_with(child, HarnessConfig(deadline_s=1.0), [calls(("delegate", {"task": "x"})), text("lead done")])
    started = time.monotonic()
    _, final, report = await drive(h, lead)
    elapsed = time.monotonic() - started
    assert ran == [("crawl:start", {"url": "http://x"})]
    assert elapsed < 1.6, elapsed
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")


async def test_a_tool_only_sub_agent_called_twice_spends_the_leads_tool_cap_both_times() -> None:
    """Two delegations to the same tool-only sub-agent in one lead run: both
    of its replies are nested in the lead (each a run of its own): the
    lead's ``max_tool_calls=4`` admits delegate, search, search, delegate;
    the second reply's searches are refused (its run is the lead's child
    too, not a run of its own with no parent)."""
    ran = Ran()
    script = [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("child 1"),
              calls(("search", {"q": "c"})), calls(("search", {"q": "d"})), text("child 2")]
    child_h, child, _ = tool_only_child(ran, script)
    h, lead = lead_with(child, HarnessConfig(max_tool_calls=4),
                        [calls(("delegate", {"task": "x"})), calls(("delegate", {"task": "y"})), text("lead done")])
    _, final, report = await drive(h, lead)
    assert [a["q"] for _, a in ran] == ["a", "b"]
    assert final.get_text_content() == "lead done"
    assert report.tool_calls == {"delegate": 2}


async def test_a_tool_only_sub_agent_acts_for_the_leads_principal() -> None:
    """The child's own Harness binds ``identity_args``; the lead runs under
    ``acting_for(u-42)``: the child's call for u-42 runs, its call for
    another user is refused."""
    from agentscope_harness import Principal

    ran = Ran()

    async def orders(user_id: str) -> str:
        """List a user's orders.

        Args:
            user_id (str): The user.
        """
        ran.append(("orders", {"user_id": user_id}))
        return f"orders of {user_id}: A-1"

    child_h = Harness(HarnessConfig(tools={"orders": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})}),
                      load_entry_points=False)
    _, child, _ = tool_only_child(ran, [calls(("orders", {"user_id": "u-99"})), calls(("orders", {"user_id": "u-42"})),
                                        text("child done")], child_h=child_h, tools=[orders])
    h, lead = lead_with(child, HarnessConfig(), [calls(("delegate", {"task": "x"})), text("lead done")])
    await drive(h, lead, Principal(user_id="u-42", tenant="acme"))
    assert ran.of("orders") == [{"user_id": "u-42"}]


async def test_a_tool_only_sub_agents_own_tighter_deadline_binds_its_tools() -> None:
    """``deadline_s`` "bounds every model call, store call, async hook and
    tool call"; a nested run's deadline is "the tighter of its own and its
    parent's". ``tool_only_run`` opens the nested run with
    ``parent.deadline`` only: the sub-agent Harness's own ``deadline_s=0.5``
    is dropped, and its tool runs its full two seconds under a lead with a
    minute left."""
    ran = Ran()

    child_h = Harness(HarnessConfig(deadline_s=0.5), load_entry_points=False)
    _, child, _ = tool_only_child(ran, [calls(("crawl", {"url": "http://x"})), text("child done")],
                                  child_h=child_h, tools=[crawling(ran, 2.0)])
    h, lead = lead_with(child, HarnessConfig(deadline_s=60.0), [calls(("delegate", {"task": "x"})), text("lead done")])
    started = time.monotonic()
    await drive(h, lead)
    assert time.monotonic() - started < 1.5
    assert ran == [("crawl:start", {"url": "http://x"})]


@pytest.mark.parametrize("adapters", ["tool_only", "both"])
async def test_a_sub_agent_parked_in_one_lead_run_and_resumed_in_the_next_answers_to_the_next(adapters: str) -> None:
    """The sub-agent's ``refund`` (no ALLOW: AgentScope asks) parks during
    the lead's first reply, which then ends. The lead's second reply
    (``max_tool_calls=2``) runs ``search`` and ``resume``: the approved
    refund would be its third tool call and is refused. Counted against
    the first, settled lead run (1 call of 2) it had run: the resumed run
    kept ``parent=`` the settled run (``ReplyLifecycle.resume`` dropped a
    settled parent for the deadline only; the tool adapter alone found the
    held run by reply id), so the caps of the run it now runs in never
    bound it. README: ``max_tool_calls`` is "run-wide, sub-agents included"."""
    from scripted import parking_tools

    ran = Ran()

    child_h = Harness(HarnessConfig(), load_entry_points=False)
    mws = child_h.middlewares()
    child_model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("child: refunded")], model="c")
    child = make_agent(child_model, [refunding(ran)], mws[1:] if adapters == "tool_only" else mws, name="child")
    delegate, resume, asks = parking_tools(child)
    h = Harness(HarnessConfig(max_tool_calls=2), load_entry_points=False)
    lead_model = ScriptedModel([calls(("delegate", {"task": "refund"})), text("parked, will resume"),
                                calls(("search", {"q": "a"})), calls(("resume", {"task": "go"})), text("lead done")],
                               model="l")
    lead = make_agent(lead_model, [delegate, resume, searcher(ran)], h.middlewares(), name="lead")
    await drive(h, lead)
    assert len(asks) == 1 and ran == []
    _, _, report = await drive(h, lead)
    assert report.tool_calls == {"search": 1, "resume": 1}
    assert ran.of("refund") == []


# ====================================================== 4. shadow sub-agents and the lead's tool cap


def shadow(**kw: Any) -> Harness:
    return Harness(HarnessConfig(mode="shadow", **kw), load_entry_points=False)


def shadow_child_under(cap: int, child_script: list[Any], ran: Ran, child_h: Harness | None = None,
                       lead_script: list[Any] | None = None) -> tuple[Harness, Any, Harness, Any, ScriptedModel]:
    child_h = child_h or shadow()
    model = ScriptedModel(child_script, model="c")
    child = make_agent(model, [searcher(ran)], child_h.middlewares(), name="child", max_iters=20)
    h, lead = lead_with(child, HarnessConfig(max_tool_calls=cap),
                        lead_script or [calls(("delegate", {"task": "x"})), text("lead done")])
    return h, lead, child_h, child, model


async def test_a_shadow_sub_agent_refused_once_then_answering_is_not_stopped() -> None:
    ran = Ran()
    h, lead, child_h, child, model = shadow_child_under(
        2, [calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("child: found a")], ran)
    _, final, report = await drive(h, lead)
    assert ran.of("search") == [{"q": "a"}]
    [sub] = report.children
    assert sub.terminal_state is TerminalState.COMPLETED and sub.refusals == {"quota_exhausted": 1}
    assert final.get_text_content() == "lead done" and len(model.calls) == 3


async def test_three_refusals_in_one_parallel_batch_count_as_one_turn() -> None:
    ran = Ran()
    h, lead, child_h, child, model = shadow_child_under(
        2, [calls(("search", {"q": "a"})),
            calls(("search", {"q": "b"}), ("search", {"q": "c"}), ("search", {"q": "d"})),
            text("child: found a")], ran)
    _, final, report = await drive(h, lead)
    [sub] = report.children
    assert ran.of("search") == [{"q": "a"}]
    assert sub.terminal_state is TerminalState.COMPLETED and sub.refusals == {"quota_exhausted": 3}
    assert len(model.calls) == 3


async def test_a_shadow_lead_is_never_stopped_by_its_own_tool_cap() -> None:
    """A shadow run with ``max_tool_calls=1`` whose model keeps calling
    tools: recorded, never refused, never stopped by this rule."""
    ran = Ran()
    h = shadow(max_tool_calls=1)
    model = ScriptedModel([*[calls(("search", {"q": f"q{i}"})) for i in range(5)], text("done")], model="s")
    agent = make_agent(model, [searcher(ran)], h.middlewares())
    _, final, report = await drive(h, agent)
    assert len(ran) == 5 and final.get_text_content() == "done"
    assert report.refusals == {} and report.terminal_state is TerminalState.COMPLETED


async def test_a_shadow_sub_agent_stopped_by_the_leads_cap_ends_without_looping() -> None:
    """The stop comes as the model guard's answer: the shadow sub-agent
    ends there with the fallback text; the stopped model is not called
    again and AgentScope makes no further rounds."""
    ran = Ran()
    count = iter(range(1000))
    h, lead, child_h, child, model = shadow_child_under(
        2, lambda turn: calls(("search", {"q": f"q{next(count)}"})), ran)  # type: ignore[arg-type]
    _, final, report = await drive(h, lead)
    [sub] = report.children
    assert (sub.terminal_state, sub.reason) == (TerminalState.INCOMPLETE, "refused:quota_exhausted")
    assert len(model.calls) == 3 and sub.model_calls <= 4
    assert final.get_text_content() == "lead done"


async def test_a_shadow_sub_agents_resumed_refusal_in_the_parked_turn_counts_once() -> None:
    """The shadow sub-agent's turn: ``refund`` (AgentScope asks) and three
    searches; the lead's ``max_tool_calls=3`` admits two, refuses the
    third; the reply parks. Resumed after the lead ended, the approved
    refund is refused in that same turn: one turn met the refusal, so the
    sub-agent is not stopped and its model answers."""
    from agentscope.event import ConfirmResult, UserConfirmResultEvent
    from scripted import parking_tools
    from scripted import run as run_reply

    ran = Ran()

    child_h = shadow()
    child_model = ScriptedModel([calls(("refund", {"order_id": "A-1"}), ("search", {"q": "a"}),
                                       ("search", {"q": "b"}), ("search", {"q": "c"})),
                                 text("child: answered")], model="c")
    child = make_agent(child_model, [refunding(ran), searcher(ran)], child_h.middlewares(), name="child")
    delegate, _, asks = parking_tools(child)
    h = Harness(HarnessConfig(max_tool_calls=3), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l"),
                      [delegate], h.middlewares(), name="lead")
    await drive(h, lead)
    assert ran.of("search") == [{"q": "a"}, {"q": "b"}] and len(asks) == 1
    ask = asks[-1]
    answer = UserConfirmResultEvent(reply_id=ask.reply_id,
                                    confirm_results=[ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls])
    _, final = await run_reply(child, inputs=answer)
    report = child_h.last_report(child)
    assert ran.of("refund") == []
    assert final.get_text_content() == "child: answered" and report.terminal_state is TerminalState.COMPLETED
    assert report.refusals == {"quota_exhausted": 2}


async def test_a_compression_failure_quoting_a_key_leaves_no_key_in_the_report() -> None:
    """The compression's failure (truncation fallback off) ends the run with
    ``error: <its message>``; a message quoting the request URL with the
    provider key: the report's reason is redacted ("decision details and
    the report's reason")."""
    import aiohttp
    from agentscope.agent import ContextConfig

    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    model = CompressingTimeoutModel(
        [calls(("page", {"url": "http://x"})), text("Here is the page.")],
        aiohttp.ServerTimeoutError(f"Timeout reading https://api.x/v1/chat?api_key={key}"), model="gpt-test",
    )
    model.context_size = 4000
    h = Harness(HarnessConfig(), load_entry_points=False)
    agent = make_agent(model, [_page_tool()], h.middlewares(),
                       context_config=ContextConfig(compression_fallback_to_truncation=False))
    _, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert exc is not None and report.terminal_state is TerminalState.FAILED
    assert key not in report.model_dump_json()


@pytest.mark.xfail(strict=True, reason="a tool-only sub-agent's model calls are neither counted in nor bounded by the "
                   "lead's max_model_calls (no model side): 6 model calls under a lead capped at 3")
async def test_a_tool_only_sub_agents_model_calls_answer_to_the_leads_model_call_cap() -> None:
    """"the lead's caps and deadline bind it"; ``max_model_calls`` is
    "run-wide, sub-agents included". The tool-only sub-agent's model calls
    pass no harness middleware: the lead's run counts none of them."""
    ran = Ran()
    script = [*[calls(("search", {"q": f"q{i}"})) for i in range(5)], text("child done")]
    _, child, child_model = tool_only_child(ran, script)
    h, lead = lead_with(child, HarnessConfig(max_model_calls=3), [calls(("delegate", {"task": "x"})), text("lead done")])
    _, _, report = await drive(h, lead)
    assert len(child_model.calls) + 1 <= 3 or report.model_calls >= len(child_model.calls) + 1, (
        len(child_model.calls), report.model_calls)


@pytest.mark.parametrize("region", [None, "eu"])
async def test_a_candidate_prerequisite_judges_with_the_declared_defaults(region: Any) -> None:
    """The live policy has no prerequisite; the candidate adds
    ``cancel_order requires lookup_order(same_args=[order_id, region])``.
    The lookup ran for region "eu" by default, the cancel names "eu": the
    candidate would have let it run, so no ``candidate_differs`` is
    reported for it (only the cancel of B-2, never looked up). README:
    the candidate "judges each call against what really happened in the
    run (what ran, what succeeded ...)". Its refusal of A-1 was false (the
    live run indexed successes by the live config's ``same_args`` only): an
    operator reading ``diff-policy`` was told the new prerequisite would
    block the cancels it would allow."""
    from agentscope.tool import Toolkit
    from scripted import tool as always_allowed

    ran = Ran()
    lookup_fn, cancel_fn = shop(ran)
    live = HarnessConfig(tools={"lookup_order": ToolPolicy(role="lookup"), "cancel_order": ToolPolicy(role="mutation")},
                         require_finish_tool=False)
    h = Harness(live, candidate=seq_config(same=["order_id", "region"]), load_entry_points=False)
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1", **({"region": region} if region else {})})),
        calls(("cancel_order", {"order_id": "A-1", "region": "eu"})),
        calls(("cancel_order", {"order_id": "B-2", "region": "eu"})),
        text("done"),
    ])
    agent = make_agent(model, Toolkit(tools=[always_allowed(lookup_fn), always_allowed(cancel_fn)]), h.middlewares())
    _, _, report = await drive(h, agent)
    assert len(ran.of("cancel_order")) == 2
    differs = [d for d in report.decisions if d.action == "candidate_differs"]
    assert len(differs) == 1, [(d.code, d.detail) for d in differs]


async def test_a_client_executed_lookup_is_indexed_with_its_declared_default() -> None:
    """The lookup is client-executed (``is_external_tool``); its schema
    declares ``region`` default "eu". Looked up without a region, the
    client's result arrives through ``ExternalExecutionResultEvent``; the
    cancel of A-1 for "eu" then runs, the cancel of A-1 for "us" does not."""
    from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
    from agentscope.message import ToolResultBlock, ToolResultState
    from agentscope.permission import PermissionBehavior, PermissionContext, PermissionDecision
    from agentscope.tool import ToolBase, Toolkit
    from scripted import tool as always_allowed

    class ExternalLookup(ToolBase):
        name = "lookup_order"
        description = "Look up an order (run by the client)."
        input_schema = {"type": "object", "properties": {"order_id": {"type": "string"},
                                                         "region": {"type": "string", "default": "eu"}},
                        "required": ["order_id"]}
        is_concurrency_safe = False
        is_read_only = True
        is_external_tool = True

        async def check_permissions(self, tool_input: dict[str, Any], context: PermissionContext) -> PermissionDecision:
            return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

    ran = Ran()
    _, cancel_fn = shop(ran)
    h = Harness(seq_config(same=["order_id", "region"]), load_entry_points=False)
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"})),
        calls(("cancel_order", {"order_id": "A-1", "region": "us"})),
        calls(("cancel_order", {"order_id": "A-1", "region": "eu"})),
        text("done"),
    ])
    agent = make_agent(model, h.instrument(Toolkit(tools=[ExternalLookup(), always_allowed(cancel_fn)])),
                       h.middlewares())
    events = [e async for e in agent.reply_stream(UserMsg("user", "cancel A-1"))]
    call = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    result = ToolResultBlock(id=call.id, name="lookup_order", output="order A-1 (eu): paid",
                             state=ToolResultState.SUCCESS)
    [e async for e in agent.reply_stream(ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                                      execution_results=[result]))]
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert h.last_report(agent).refusals == {"prerequisite_missing": 1}


@pytest.mark.parametrize("child_adapters", ["both", "tool_only"])
async def test_a_tool_only_leads_tool_cap_binds_the_sub_agent_it_runs(child_adapters: str) -> None:
    """The mirror of a30fdd6: the *lead* uses the tool adapter alone
    ("either adapter works alone ... still gates every tool call") with
    ``max_tool_calls=3`` ("run-wide, sub-agents included"); its delegate
    runs a sub-agent that searches four times. Three calls in all may run."""
    ran = Ran()
    child_h = Harness(HarnessConfig(), load_entry_points=False)
    mws = child_h.middlewares()
    child_model = ScriptedModel([*[calls(("search", {"q": f"q{i}"})) for i in range(4)], text("child done")],
                                model="c")
    child = make_agent(child_model, [searcher(ran)], mws if child_adapters == "both" else mws[1:], name="child")
    h = Harness(HarnessConfig(max_tool_calls=3), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l"),
                      [delegating_tool(child)], h.middlewares()[1:], name="lead")
    await drive(h, lead)
    assert len(ran) <= 2, ran


async def test_a_client_timeout_falls_over_to_agentscopes_fallback_model() -> None:
    """``ModelConfig(fallback_model=...)``: the primary's client timeout is
    a failed call, so AgentScope falls over to the fallback model (through
    the harness's middleware again), which answers: ``completed``, both
    calls counted. (Read as the deadline, the stop text had ended it.)"""
    import aiohttp
    from agentscope.agent import ModelConfig

    primary = ScriptedModel([aiohttp.ServerTimeoutError("Timeout on reading data")], model="primary")
    backup = ScriptedModel([text("Answered by the backup.")], model="backup")
    h = Harness(HarnessConfig(deadline_s=600.0), load_entry_points=False)
    agent = make_agent(primary, [], h.middlewares(), model_config=ModelConfig(max_retries=0, fallback_model=backup))
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert exc is None and final.get_text_content() == "Answered by the backup."
    assert report.terminal_state is TerminalState.COMPLETED and report.model_calls == 2
    assert not any(d.code in ("deadline", "model_error") for d in report.decisions)



@pytest.mark.parametrize("stream", [False, True])
async def test_a_model_bounding_its_call_with_clamp_timeout_ends_at_the_deadline(stream: bool) -> None:
    """A user's model that bounds its request with ``clamp_timeout`` (as
    the README advises tools to): its own timeout and the harness's expire
    at the same moment; the run ends at its deadline (``incomplete``,
    ``deadline``, the fallback answer), never as a model error."""
    from agentscope_harness import clamp_timeout

    class Clamped(ScriptedModel):
        async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
            async with asyncio.timeout(clamp_timeout(30.0)):
                await asyncio.sleep(10)
            return text("never")

    for _ in range(5):
        h = Harness(HarnessConfig(deadline_s=0.2), load_entry_points=False)
        agent = make_agent(Clamped([text("x")], stream=stream, model="m"), [], h.middlewares())
        final, exc = await outcome(h, agent)
        report = h.last_report(agent)
        assert exc is None and (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
