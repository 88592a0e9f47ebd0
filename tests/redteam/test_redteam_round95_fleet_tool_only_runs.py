"""Red team, round 95 (fleet): with the tool adapter alone, a run
concurrency limit limited nothing.

``concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]``
means one run of a principal in flight, shared through the store. With the
tool adapter alone (no ``on_reply``: runs opened at their first tool call,
settled at the agent's next reply) no run slot was ever taken: two replies
of one principal ran their tools at once, on one worker or two, however the
limit was set. The tool adapter alone cannot tell when a reply ends, so it
cannot hold a run's slot: such runs now fail closed, loudly (an error log
naming the field, a ``policy_error`` decision, the model told), rather than
run past a limit that is silently off.

Real ``Agent``s, real tools in real ``Toolkit``s, one SQLite file or one
Redis shared by two workers (two Harness instances)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from round95_fleet_kit import ACTED, kinds, lookup, store_of
from scripted import ALICE, ScriptedModel, calls, drain, last_tool_message, make_agent, text, tool

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig


@pytest.mark.parametrize("kind", kinds())
async def test_the_tool_adapter_alone_refuses_runs_it_cannot_hold_to_their_limit(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    ACTED.clear()
    make_store = store_of(kind, tmp_path)

    def worker() -> Harness:
        return Harness(HarnessConfig(store=make_store(), concurrency_limits=[
            ConcurrencyLimit(scope="tool", tool="lookup", max_in_flight=5),
            ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=60)]), load_entry_points=False, environ={})

    for harness in (worker(), worker()):
        model = ScriptedModel([calls(("lookup", {"q": "order"})), text("Found it.")])
        agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(lookup)])),
                           middlewares=[harness.middlewares()[1]])  # the tool adapter alone
        with caplog.at_level(logging.ERROR, logger="agentscope_harness"), harness.acting_for(ALICE):
            await drain(agent, UserMsg("user", "find my order"))
        assert ACTED == []  # not run past a limit nobody holds
        told = last_tool_message(model)  # the model was told it was not made, and why (README "Choices")
        assert told.startswith("[harness:run_concluded]") and "(policy_error)" in told, told
        records = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any("concurrency_limits[1]" in m and "HarnessAgentAdapter" in m for m in records), records
        assert not any("concurrency_limits[0]" in m for m in records)  # a tool's limit is held alone
        caplog.clear()


async def test_the_tool_adapter_alone_still_holds_a_tools_concurrency_limit(tmp_path: Path) -> None:
    """The tool-scoped limits need no ``on_reply``: the tool adapter alone runs its calls under them."""
    ACTED.clear()
    harness = Harness(HarnessConfig(store=store_of("sqlite", tmp_path)(), concurrency_limits=[
        ConcurrencyLimit(scope="tool", tool="lookup", max_in_flight=1)]), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "order"})), text("Found it.")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(lookup)])), middlewares=[harness.middlewares()[1]])
    with harness.acting_for(ALICE):
        await drain(agent, UserMsg("user", "find my order"))
    assert ACTED == [("lookup", "order")]
