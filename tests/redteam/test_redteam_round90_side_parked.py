"""Red team, round 90 (on round 89). A tool of the run starts a background reranking (a task of the tool's own:
the run is bound in its context, so ``_live_guard`` finds it through
``current_run()``). Made while the run is live, that call is counted, charged
and refused past the cap (control test). Made while the run is parked for a
human (its provisional report is set), it passes through unguarded: the
run's ``model_calls`` / ``spent_usd`` never see it, its $2 is charged to
nobody (the principal's daily spend stays at the main calls'), and the
resumed run completes under its $1 cap."""

import asyncio
from typing import Any

from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from scripted import ALICE, Ids, ScriptedModel, calls, confirm, make_agent, run, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig, TerminalState, ToolPolicy
from agentscope_harness.stores import MemoryStore


async def _drive(make_call_while_parked: bool) -> tuple[Any, ScriptedModel, MemoryStore]:
    reranker = ScriptedModel([calls(("generate_structured_output", {"ids": ["c1"]}), inp=2_000_000, out=0)],
                             model="rer")
    go = asyncio.Event()
    background: list[asyncio.Task] = []
    outcome: list[Any] = []

    async def later() -> None:
        await go.wait()
        try:
            outcome.append(await reranker.generate_structured_output([UserMsg("user", "rank")],
                                                                     structured_model=Ids))
        except Exception as exc:  # ModelCallRefused: not made
            outcome.append(exc)

    async def prefetch(q: str) -> str:
        """Start ranking the catalogue for a query in the background.

        Args:
            q (str): The query.
        """
        if make_call_while_parked:
            background.append(asyncio.create_task(later()))
            return "ranking started"
        go.set()
        await later()  # control: made while the run is live
        return "ranked"

    async def refund(order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
            amount (float): USD.
        """
        return f"refunded {amount}"

    base = ScriptedModel([calls(("prefetch", {"q": "shoes"}), inp=10, out=10),
                          calls(("refund", {"order_id": "o-1", "amount": 80.0}), inp=10, out=10),
                          text("done", inp=10, out=10)], model="base")
    store = MemoryStore()
    h = Harness(HarnessConfig(
        store=store,
        tools={"refund": ToolPolicy(role="mutation", ask_when=lambda a: "over $50 needs a human")},
        cost=CostPolicy(cap_usd=1.0, daily_quota_usd=100.0, prices={"base": (1.0, 1.0), "rer": (1.0, 1.0)}),
    ), load_entry_points=False, environ={})
    agent = make_agent(base, [prefetch, refund], h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent, "refund o-1 and find shoes")
        ask = next((e for e in events if isinstance(e, RequireUserConfirmEvent)), None)
        if make_call_while_parked:
            go.set()
            await asyncio.gather(*background)  # made while the run waits for the human
        if ask is not None:
            _, final = await run(agent, inputs=confirm(ask, ask.tool_calls[0]))
    return h.last_report(agent), reranker, store, outcome


async def test_a_side_call_made_while_parked_is_charged_to_the_run() -> None:
    report, reranker, store, outcome = await _drive(make_call_while_parked=True)
    spent_today = await store.get_spend(ALICE.key)
    served_usd = 2.0 + 2 * 20e-6  # the reranker's 2M input at $1/M, the two main calls' 20 tokens
    assert len(reranker.calls) == 1  # the provider served (and bills) it
    got = (report.model_calls, report.spent_usd, spent_today, report.terminal_state.value, report.reason)
    assert report.model_calls == 3, got  # two of the agent's, the reranker's; then the cap stops it
    assert report.spent_usd >= 2.0, got
    assert spent_today >= 2.0, f"principal charged ${spent_today:.6f} today, provider served ${served_usd:.6f}"
    assert report.terminal_state is not TerminalState.COMPLETED, (report.terminal_state, report.reason)


async def test_control_a_side_call_made_while_live_is_charged() -> None:
    report, reranker, store, outcome = await _drive(make_call_while_parked=False)
    assert len(reranker.calls) == 1 and report.model_calls >= 2
    assert report.spent_usd >= 2.0 and await store.get_spend(ALICE.key) >= 2.0
    assert report.terminal_state is not TerminalState.COMPLETED
