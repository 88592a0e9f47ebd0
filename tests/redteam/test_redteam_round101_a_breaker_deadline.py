"""Red team, round 101 (a newcomer on AgentScope's real ``OpenAIChatModel``
against the local scripted server). A tool that bounds its wait with
``clamp_timeout``, as the README tells tool authors to, times out *at the
run's deadline*; that timeout is fed to the fleet-wide circuit breaker as a
dependency failure. Two short-deadline runs of a healthy-but-slow tool open
the breaker, and the next caller's fast call is refused ``dependency_down``
("a service it needs is unavailable"). The harness's own cut of the same
tool at the deadline (no ``clamp_timeout``) is not counted: time running out
is the run's, not the dependency's."""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "realclient"))

import realclient.conftest as realclient_fixtures
from agentscope.tool import Toolkit
from scripted import make_agent, run, tool
from server import Reply

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState, clamp_timeout

make_model = realclient_fixtures.make_model


async def test_a_timeout_clamped_to_the_run_deadline_does_not_open_the_breaker(server, make_model) -> None:
    dependency_s = [30.0]  # the inventory service is slow for the first two callers, then fast

    async def check_stock(sku: str) -> str:
        """Check stock with the inventory service.

        Args:
            sku (str): The product SKU.
        """
        await asyncio.wait_for(asyncio.sleep(dependency_s[0]), clamp_timeout(10))
        return f"{sku}: 4 in stock"

    harness = Harness(HarnessConfig(deadline_s=1.0, breaker_failures=2), load_entry_points=False)
    toolkit = harness.instrument(Toolkit(tools=[tool(check_stock)]))
    agent = make_agent(make_model(server), toolkit, middlewares=harness.middlewares())

    for user in ("u-1", "u-2"):  # each run's time runs out while the tool waits
        server.plan(Reply(tool_calls=[("check_stock", {"sku": "SKU-7"})]))
        with harness.acting_for(Principal(user_id=user)):
            await run(agent, "is SKU-7 in stock?")
        report = harness.last_report(agent)
        assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")

    dependency_s[0] = 0.0  # the service answers at once: nothing is down
    server.plan(Reply(tool_calls=[("check_stock", {"sku": "SKU-7"})]), Reply(text="SKU-7: 4 in stock."))
    with harness.acting_for(Principal(user_id="u-3")):
        _, final = await run(agent, "is SKU-7 in stock?")
    report = harness.last_report(agent)

    # README: the breaker opens on "consecutive dependency failures"; a run's
    # deadline is not one (the harness's own cut at the deadline is not counted)
    assert report.refusals.get("dependency_down", 0) == 0, report.refusals
    assert report.tool_calls == {"check_stock": 1}
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered")
    assert final.get_text_content() == "SKU-7: 4 in stock."
