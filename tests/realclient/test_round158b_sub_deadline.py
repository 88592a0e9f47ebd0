"""Round 158 b (scenarios on stopping power with AgentScope's real OpenAIChatModel against a
misbehaving server; about 35 cases held): a sub-agent whose tool runs a rollback when
cancelled (or swallows the cancellation) did not end with its own answer before its lead's
deadline cut the call running it: its tools were cut at the deadline plus half the lead's
grace and given as long again to stop, which met the lead's cut exactly, so the lead's user
got the bare fallback, with no word of the refund the sub-agent had started. A sub-agent's
tools are cut, and their stop waited for, within a quarter of its lead's grace each.
"""
from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import Msg, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from server import FakeOpenAI, Reply
from side_kit import model

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
LOG: list[str] = []


def agent(harness: Harness, m, tools, name="shop", max_iters=100, **kw) -> Agent:
    tk = harness.instrument(Toolkit(tools=[FunctionTool(t, permission=ALLOW) for t in tools]))
    return Agent(name=name, system_prompt="You help.", model=m, toolkit=tk,
                 middlewares=harness.middlewares(),
                 injection_config=InjectionConfig(inject_runtime_state=False),
                 react_config=ReActConfig(max_iters=max_iters), **kw)


async def timed_reply(a: Agent, prompt="go", hard_s=60.0):
    t0 = time.monotonic()
    events, final = [], None
    async def drive():
        nonlocal final
        async for item in a.reply_stream(UserMsg("user", prompt), yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
            else:
                events.append(item)
    await asyncio.wait_for(drive(), hard_s)
    return time.monotonic() - t0, events, final


def text_of(msg) -> str:
    return (msg.get_text_content() or "") if msg is not None else ""


@pytest.fixture
async def side():
    """A second server, for the sub-agents' model."""
    async with FakeOpenAI.running() as fake:
        yield fake


async def stubborn(q: str) -> str:
    """Stubborn.

    Args:
        q (str): query
    """
    LOG.append("start")
    end = asyncio.get_running_loop().time() + 4
    while asyncio.get_running_loop().time() < end:
        try:
            await asyncio.sleep(end - asyncio.get_running_loop().time())
        except asyncio.CancelledError:
            LOG.append("swallowed")
    return "never"


async def rollback(q: str) -> str:
    """Mutate with a rollback.

    Args:
        q (str): query
    """
    LOG.append("start")
    try:
        await asyncio.sleep(30)
    finally:
        await asyncio.sleep(2)
        LOG.append("rolled back")
    return "never"


@pytest.mark.parametrize("tool", ["stubborn", "rollback"])
@pytest.mark.parametrize("n", [3])
@pytest.mark.parametrize("same", [True, False])
async def test_sub_ends_first(server, side, tool, n, same):
    fn = {"stubborn": stubborn, "rollback": rollback}[tool]
    subs = []

    async def delegate(task: str) -> str:
        """Delegate.

        Args:
            task (str): task
        """
        msg = await subs[int(task)].reply(UserMsg("lead", task))
        LOG.append(f"sub said: {(msg.get_text_content() or '')[:40]}")
        return msg.get_text_content() or ""
    server.plan(Reply(tool_calls=[("delegate", {"task": str(i)}) for i in range(n)]), Reply(text="lead final"))
    side.plan(*[Reply(tool_calls=[(tool, {"q": "x"})]) for _ in range(n)], *[Reply(text="sub final")] * n)
    h = Harness(HarnessConfig(deadline_s=2), load_entry_points=False)
    sh = h if same else Harness(HarnessConfig(), load_entry_points=False)
    subs.extend(agent(sh, model(side, "gpt-test"), [fn], name=f"sub{i}") for i in range(n))
    lead = agent(h, model(server, "gpt-test"), [delegate], name="lead")
    wall, ev, final = await timed_reply(lead)
    r = h.last_report(lead)
    kids = [(c.agent, c.terminal_state.value, c.reason) for c in r.children]
    print(f"\n{tool} n={n} same={same} wall={wall:.2f} {r.terminal_state.value} {r.reason} kids={kids} "
          f"in_flight={r.in_flight} LOG={LOG}\n final={text_of(final)[:300]!r}")
    assert wall < 6
    assert (r.terminal_state, r.reason) == (TerminalState.INCOMPLETE, "deadline")
    await asyncio.sleep(0)
    assert all(k[1:] == ("incomplete", "deadline") for k in kids), kids






async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): the order
    """
    LOG.append("refund:start")
    try:
        await asyncio.sleep(30)
    finally:
        await asyncio.sleep(1.5)  # undo the half-made refund on cancellation
        LOG.append("refund:rolled back")
    return "refunded"


async def test_sub_agent_tool_with_rollback_ends_with_its_own_answer_first(server, side):
    """Promise (README, Security: "The deadline bounds tools too"): "A tool still running
    0.1 s past the run's deadline (`TOOL_GRACE_S`; a sub-agent's tools sooner, so it ends
    with its own answer first) is cancelled, and given as long again to stop; one slower to
    stop (a rollback it runs on cancellation) is left to finish in its own task ... the run
    ends `incomplete` (`deadline`) with the fallback answer ..., which lists a mutation cut
    so"; "What the caller receives", deadline row: "what the run did (its last ten
    mutations, a sub-agent's too ...)".

    Attack: lead (deadline_s=2) delegates to a sub-agent (same Harness) whose `refund`
    (role mutation) runs a 1.5 s rollback when cancelled. Real OpenAIChatModel both sides.

    What happened: the sub-agent's cut (deadline + 0.05 s) plus its stop wait (0.05 s) ends
    exactly when the lead cuts the `delegate` call (deadline + 0.1 s), so the lead's cancel
    always lands in the sub-agent's reply first: the sub-agent ends `cancelled`
    (`interrupted`) with AgentScope's interruption line, and the lead's user gets the bare
    fallback with no word of the refund that was started and may have gone through. With a
    tool that stops at once the same setup ends the sub `incomplete` (`deadline`) and the
    lead's answer lists "refund: started; the time ran out ... not confirmed".
    Should: the sub-agent ends first, `incomplete` (`deadline`), and the lead's fallback
    lists its cut mutation.
    """
    h = Harness(HarnessConfig(deadline_s=2, tools={"refund": ToolPolicy(role="mutation")}), load_entry_points=False)
    sub = agent(h, model(side, "gpt-test"), [refund], name="refunder")

    async def delegate(task: str) -> str:
        """Ask the refunds agent.

        Args:
            task (str): what to do
        """
        msg = await sub.reply(UserMsg("lead", task))
        return msg.get_text_content() or ""

    server.plan(Reply(tool_calls=[("delegate", {"task": "refund o-1"})]), Reply(text="lead final"))
    side.plan(Reply(tool_calls=[("refund", {"order_id": "o-1"})]), Reply(text="sub final"))
    lead = agent(h, model(server, "gpt-test"), [delegate], name="lead")
    wall, _, final = await timed_reply(lead)
    r = h.last_report(lead)
    await asyncio.sleep(1.6)  # let the rollback end before the loop closes
    assert wall < 6
    assert (r.terminal_state, r.reason) == (TerminalState.INCOMPLETE, "deadline")
    kids = [(c.agent, c.terminal_state, c.reason) for c in r.children]
    assert kids == [("refunder", TerminalState.INCOMPLETE, "deadline")], kids
    assert "refund: started; the time ran out" in text_of(final), text_of(final)


# ------------------------------------------------------------------ round 160 a
# At depth 3 and more the geometric cuts left the deepest sub-agent a few milliseconds to end:
# a tool whose call runs a sub-agent still ending is waited for a little longer (NESTED_WAIT_S).


@pytest.fixture
async def fakes():
    async with contextlib.AsyncExitStack() as servers:
        yield [await servers.enter_async_context(FakeOpenAI.running()) for _ in range(6)]


def delegating(sub, name):
    async def fn(task: str) -> str:
        """Ask the next agent.

        Args:
            task (str): what to do
        """
        msg = await sub.reply(UserMsg("lead", task))
        return msg.get_text_content() or ""
    fn.__name__ = name
    return fn


def chain_tree(r):
    out = []
    while r is not None:
        out.append((r.agent, r.terminal_state.value, r.reason))
        r = r.children[0] if r.children else None
    return out


@pytest.mark.parametrize("same", [True, False])
@pytest.mark.parametrize("depth", [4])
async def test_sub_sub_sub_agent_ends_with_its_own_answer_first(fakes, same, depth):
    """Promise (README, Security, "The deadline bounds tools too"): "a sub-agent's tools
    sooner, within a quarter of its lead's grace each, the wait for them to stop included,
    so it ends with its own answer first"; the run ends incomplete (deadline) with the
    fallback answer which lists a mutation cut so.

    Attack: lead (deadline_s=2) -> delegate -> mid agent -> delegate -> leaf agent (depth 2;
    depth 3 with one more link) whose `refund` (mutation) runs a 1.5 s rollback when cut.

    What happened (depth 3, same or another Harness; depth 2 held): the leaf's tools are cut
    at deadline + 0.1/64 s and waited for as long again (D + 3.1 ms), while its caller's
    call running it is cut at D + 6.25 ms: the 3 ms left are too few for the leaf to make its
    own ending, so the cut of agent2's `delegate` lands in the leaf's reply and the leaf ends
    `cancelled` (`interrupted`) in the report, as if someone had interrupted it, not
    `incomplete` (`deadline`) with its own answer. (The lead's fallback still lists the
    refund here.) Should: every level ends `incomplete` (`deadline`).
    Depth 4: the same, one level deeper. Depth 3 fails most runs (3 ms margin), depth 4 every run.
    """
    LOG.clear()
    pol = {"refund": ToolPolicy(role="mutation")}
    h = Harness(HarnessConfig(deadline_s=2, tools=pol), load_entry_points=False)
    other = h if same else Harness(HarnessConfig(tools=pol), load_entry_points=False)
    leaf = agent(other, model(fakes[depth], "gpt-test"), [refund], name="leaf")
    fakes[depth].plan(Reply(tool_calls=[("refund", {"order_id": "o-1"})]), Reply(text="leaf final"))
    below = leaf
    for d in range(depth - 1, -1, -1):
        fn = delegating(below, f"delegate{d}")
        fakes[d].plan(Reply(tool_calls=[(f"delegate{d}", {"task": "refund o-1"})]), Reply(text=f"final{d}"))
        below = agent(h if d == 0 else other, model(fakes[d], "gpt-test"), [fn], name=f"agent{d}")
    lead = below
    wall, _, final = await timed_reply(lead)
    r = h.last_report(lead)
    await asyncio.sleep(1.7)
    tree = chain_tree(r)
    print(wall, tree, LOG, repr(text_of(final)[:400]))
    assert wall < 6
    assert all(t[1:] == ("incomplete", "deadline") for t in tree), tree
    assert "refund: started; the time ran out" in text_of(final), text_of(final)
