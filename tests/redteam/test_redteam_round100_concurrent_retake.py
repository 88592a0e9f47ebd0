"""Red team, round 100. ``ConcurrencyLimit(scope="principal",
max_in_flight=1)`` on a ``SQLiteStore`` (its calls go to a thread: the
event loop runs on while one is out). A lead starts two migrators in the
background and settles; both park on their client (the lead's kept slot
goes back). Their clients answer at once: both resume nested in the settled
lead, and each one's ``Fleet.open_run`` re-takes the *lead's* slot.
``_take_run_slots`` reads the keys the lead holds before its await on the
store and files the lease after it, so the second re-take, made while the
first is out, does not see the first's slot: it asks the store for a second
one, is refused by the lead's own slot and its migrator ends
``concurrency_limited``, though both are one root's work in flight and share
its one slot (with ``max_in_flight=2`` the lead would hold two slots
instead)."""

from __future__ import annotations

import asyncio
from typing import Any

from agentscope.event import ExternalExecutionResultEvent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, client_tool, drain, make_agent, run, slow, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState
from agentscope_harness.stores import SQLiteStore


class RoundTrip(SQLiteStore):
    """A store whose lease taking, once armed, waits (up to 0.3 s) for a
    second one to be on its way too: two round trips out at once."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.armed = False
        self.out = 0
        self.both = asyncio.Event()

    async def lease_acquire(self, key: str, max_in_flight: int, lease_s: float, *,
                            deadline: float | None = None) -> str | None:
        if self.armed:
            self.out += 1
            if self.out >= 2:
                self.both.set()
            try:
                await asyncio.wait_for(self.both.wait(), 0.3)
            except TimeoutError:
                pass
        return await super().lease_acquire(key, max_in_flight, lease_s, deadline=deadline)


def migrator(h: Harness, name: str) -> Any:
    return make_agent(
        ScriptedModel([calls(("verify_code", {"code": "1234"})), calls(("slow", {"seconds": 0.05})),
                       text("migrated")]),
        h.instrument(Toolkit(tools=[client_tool(), tool(slow)])), h.middlewares(), name=name,
    )


async def test_two_sub_agents_resumed_at_once_under_a_settled_lead_share_its_slot(tmp_path: Any) -> None:
    store = RoundTrip(str(tmp_path / "fleet.db"))
    config = HarnessConfig(store=store, concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)])
    h = Harness(config, load_entry_points=False, environ={})
    children = [migrator(h, "migrator_a"), migrator(h, "migrator_b")]
    asked: dict[str, Any] = {}
    background: list[asyncio.Task[Any]] = []

    async def start(child: Any) -> None:
        for event in await drain(child, UserMsg("lead", "migrate")):
            if type(event).__name__ == "RequireExternalExecutionEvent":
                asked[child.name] = event

    async def spawn(task: str) -> str:
        """Start the two migrators in the background.

        Args:
            task (str): What they should do.
        """
        background.extend(asyncio.create_task(start(child)) for child in children)
        return "started"

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"})), text("under way")]), [spawn],
                      h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "migrate my data")
        await asyncio.gather(*background)
        assert all(h.last_report(c).terminal_state is TerminalState.WAITING_INPUT for c in children)
        answers = []
        for child in children:
            call = asked[child.name].tool_calls[0]
            done = [ToolResultBlock(id=call.id, name=call.name, output="code ok", state="success")]
            answers.append(ExternalExecutionResultEvent(reply_id=child.state.reply_id, execution_results=done))
        store.armed = True
        await asyncio.gather(*(drain(child, answer) for child, answer in zip(children, answers, strict=True)))
    states = {c.name: h.last_report(c).terminal_state.value for c in children}
    assert states == {"migrator_a": "completed", "migrator_b": "completed"}, (
        f"one of the lead's own sub-agents was refused by the lead's slot the other re-took: {states}"
    )
    await asyncio.sleep(0.1)
    assert h.services.fleet._holds == {}
