"""Red team on round 175 a: spend, acting_for(None), two Harness instances, the tool adapter
alone, and a parked sub-agent resumed from the lead's next reply inside a block."""
from __future__ import annotations

from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from callers_kit import ALICE, ALICE_R2, BOB, LOG, POLICIES, ask_lead, fresh, notes_agent
from scripted import RAN, ScriptedModel, calls, make_agent, parking_tools, run, search, text, tool

from agentscope_harness import CostPolicy, Harness, HarnessConfig, ModelPrice, ToolPolicy
from agentscope_harness.stores import MemoryStore


async def _lead_asking(h: Harness, hb: Harness, worker, who):
    async def ask(q: str) -> str:
        with hb.acting_for(who):
            msg = await worker.reply(UserMsg("lead", q))
        return msg.get_text_content() or ""

    lead = ask_lead(h, ask)
    with h.acting_for(ALICE):
        await run(lead, "go")
    return lead


async def test_bobs_job_is_charged_to_bob_and_not_to_alice():
    """Spend: Bob's job awaited in Alice's tool is charged to Bob's daily spend, not to
    Alice's run nor her daily spend; Alice's run and daily spend agree."""
    store = MemoryStore()
    cost = CostPolicy(daily_quota_usd=100.0, prices={"scripted": ModelPrice(1000.0, 1000.0)})
    h = Harness(HarnessConfig(tools=POLICIES, cost=cost, store=store), load_entry_points=False, environ={})
    worker = notes_agent(h)
    lead = await _lead_asking(h, h, worker, BOB)
    lr, wr = h.last_report(lead), h.last_report(worker)
    alice, bob = await store.get_spend(ALICE.key), await store.get_spend(BOB.key)
    detail = (lr.spent_usd, wr.spent_usd, alice, bob)
    assert wr.spent_usd > 0 and abs(bob - wr.spent_usd) < 1e-9, detail
    assert abs(alice - lr.spent_usd) < 1e-9 and lr.spent_usd > 0, detail


async def test_bob_over_his_quota_is_refused_inside_alices_tool():
    """Bob's daily quota binds his job opened inside Alice's run (his caller's quota)."""
    store = MemoryStore()
    cost = CostPolicy(daily_quota_usd=1.0, prices={"scripted": ModelPrice(1.0, 1.0)})
    h = Harness(HarnessConfig(tools=POLICIES, cost=cost, store=store), load_entry_points=False, environ={})
    await store.add_spend(BOB.key, 5.0)
    fresh()
    worker = notes_agent(h)
    await _lead_asking(h, h, worker, BOB)
    wr = h.last_report(worker)
    assert LOG == [], (LOG, wr and (wr.terminal_state, wr.reason, wr.principal))
    assert wr is not None and wr.principal["user_id"] == "bob", wr


async def test_acting_for_none_inside_alices_run_stays_her_sub_agent():
    """`acting_for(None)` inside Alice's run: not another caller; the sub-agent stays nested
    (Alice's `max_tool_calls=2`: 1 of its 3 calls at most)."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    worker = notes_agent(h)
    lead = await _lead_asking(h, h, worker, None)
    lr, wr = h.last_report(lead), h.last_report(worker)
    assert len(LOG) <= 1 and [c.run_id for c in lr.children] == [wr.run_id], (LOG, wr.principal, lr.children)


async def test_same_caller_on_another_harness_stays_nested():
    """Two Harness instances: the lead under `h` (`max_tool_calls=2`), its tool binds the same
    caller (another request id) with `hw.acting_for` for a worker under `hw` (no caps)."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    hw = Harness(HarnessConfig(tools=POLICIES), load_entry_points=False, environ={})
    worker = notes_agent(hw)
    lead = await _lead_asking(h, hw, worker, ALICE_R2)
    lr, wr = h.last_report(lead), hw.last_report(worker)
    assert len(LOG) <= 1 and [c.run_id for c in lr.children] == [wr.run_id], (LOG, wr.principal, lr.children)


async def test_tool_adapter_alone_same_caller_stays_bound():
    """The tool adapter alone (worker without agent middlewares), same caller: its tool calls
    answer to Alice's `max_tool_calls=2`."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    worker = notes_agent(h, agent_adapter=False)
    await _lead_asking(h, h, worker, ALICE_R2)
    assert len(LOG) <= 1, LOG


async def test_tool_adapter_alone_bob_is_his_own_task():
    """The tool adapter alone, Bob's job inside Alice's `max_tool_calls=2` run: his own task
    (his calls are not refused on Alice's cap; his own cap is 2 too: 2 of 3 run)."""
    fresh()
    h = Harness(HarnessConfig(tools=POLICIES, max_tool_calls=2), load_entry_points=False, environ={})
    worker = notes_agent(h, agent_adapter=False)
    await _lead_asking(h, h, worker, BOB)
    assert len(LOG) == 2, LOG


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(f"refund:{order_id}")
    return f"refunded {order_id}"


def _parked_setup(wrap):
    h = Harness(HarnessConfig(max_tool_calls=2, tools={"refund": ToolPolicy(ask_when=lambda a: "refunds need a human")}),
                load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("Refunded."), text("ok"),
                                      text("ok")]),
                       h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares(), name="child")
    delegate, resume_inner, asks = parking_tools(child)

    async def resume(task: str) -> str:
        """Tell the sub-agent the human approved.

        Args:
            task (str): What.
        """
        with wrap(h):
            return await resume_inner(task)

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund A-1"})), text("Waiting for approval."),
                                     calls(("search", {"q": "policy"})), calls(("resume", {"task": "go"})),
                                     text("Done."), text("Done.")]),
                      h.instrument(Toolkit(tools=[tool(delegate), tool(resume), tool(search)])),
                      h.middlewares(), name="lead")
    return h, child, lead, asks


class _BobThenAlice:
    def __init__(self, h):
        self.h = h

    def __enter__(self):
        self.a = self.h.acting_for(BOB)
        self.a.__enter__()
        self.b = self.h.acting_for(ALICE)
        self.b.__enter__()

    def __exit__(self, *exc):
        self.b.__exit__(*exc)
        self.a.__exit__(*exc)


async def test_parked_sub_agent_resumed_in_a_bob_then_alice_block_answers_to_the_next_reply():
    """README: "a sub-agent parked in one lead reply and resumed from the lead's next answers
    to the next". Round 156 c's shape (`max_tool_calls=2`; reply 2 searches and resumes: 2 of
    2), the resume made inside `acting_for(BOB)` then `acting_for(ALICE)` (Alice resumes her
    own sub-agent). The approved refund, a third call of reply 2, should be refused."""
    RAN.clear()
    h, child, lead, asks = _parked_setup(_BobThenAlice)
    with h.acting_for(ALICE):
        await run(lead, "refund A-1")
        assert asks, "the sub-agent parked its refund"
        await run(lead, "approved, go on")
    cr = h.last_report(child)
    refused = [(d.hook, d.code) for d in cr.decisions if d.action == "refuse"]
    assert "refund:A-1" not in RAN, (RAN, refused, cr.terminal_state, cr.reason)


async def test_parked_sub_agent_resumed_under_bob_is_refused():
    """Alice's parked sub-agent resumed from her lead's next reply under `acting_for(BOB)`:
    another caller than the one who parked it: nothing runs."""
    RAN.clear()
    h, child, lead, asks = _parked_setup(lambda h: h.acting_for(BOB))
    with h.acting_for(ALICE):
        await run(lead, "refund A-1")
        assert asks
        await run(lead, "approved, go on")
    cr = h.last_report(child)
    assert "refund:A-1" not in RAN, (RAN, cr.terminal_state, cr.reason)
