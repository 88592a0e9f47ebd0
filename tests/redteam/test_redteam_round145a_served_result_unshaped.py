"""Round 145 a: a result a middleware before the harness's served (a cache) is shaped only
at the next model call of the SAME run (agent_adapter `_pre_think`, the call still in
`run.admitted`). When the run makes no further model call, the result stays in the
agent's context as served, and the model of the agent's next reply reads it raw.

README "Combining": "A result a middleware of yours before the harness's serves in
`on_acting` without the tool (a cache) is shaped as the tool's would be (redacted, its
`pii` applied, fenced) before the model reads it." README "Security": secrets are never
sent to the model; a tool's `pii` `block` withholds its result.

Controls: the same scripts with no cache (the tool itself returns the same text): the
next reply's model reads `[harness:pii_blocked] ...`, no key, no address.
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultEndEvent
from agentscope.message import UserMsg

from tests.redteam.served_kit import EMAIL, KEY, RAN, served_agent
from tests.scripted import (
    ALICE,
    Ids,
    calls,
    payload_bytes,
    run,
    text,
    tool_messages,
)

pytestmark = pytest.mark.asyncio



@pytest.mark.parametrize("cached", [False, True], ids=["control_tool_ran", "served_by_cache"])
async def test_a_served_result_in_the_structured_outputs_round_reaches_the_next_replys_model_raw(cached: bool) -> None:
    """Attack: a reply owing a structured output; the model calls `lookup` and
    `GenerateStructuredOutput` in one round, so the reply ends after acting (no next
    model call in this run). The user asks again. Happened: the second reply's model
    read `customer: maria.gonzalez@example.org (crm api_key=sk-proj-…)`, unfenced (the
    e-mail the tool's pii blocks, the key every result is scrubbed of).
    Should: the result shaped before any model reads it (withheld: pii_blocked)."""
    h, model, agent = served_agent(cached, [
        calls(("lookup", {"q": "maria"}), ("GenerateStructuredOutput", {"ids": ["c-1"]})),
        text("Anything else?"),
    ])
    with h.acting_for(ALICE):
        out = [e async for e in agent.reply_stream(UserMsg("user", "find maria"), structured_schema=Ids,
                                                   yield_final_msg=True)]
        assert out[-1].structured_output == {"ids": ["c-1"]}
        await run(agent, "and what did you find?")
    assert RAN == ([] if cached else ["maria"])
    assert len(model.calls) == 2
    read = payload_bytes(model.calls[1])
    assert KEY not in read, tool_messages(model.calls[1])
    assert EMAIL not in read, tool_messages(model.calls[1])


@pytest.mark.parametrize("cached", [False, True], ids=["control_tool_ran", "served_by_cache"])
async def test_a_served_result_of_a_reply_the_user_left_reaches_the_next_replys_model_raw(cached: bool) -> None:
    """Attack: the UI stops reading the reply (the tab closed) right after the served
    result's end event; the run ends there (no next model call). The user comes back
    and asks again. Happened: the new reply's model read the served result raw (key
    and blocked e-mail, unfenced). Should: shaped before any model reads it."""
    h, model, agent = served_agent(cached, [calls(("lookup", {"q": "maria"})), text("never read"), text("Hello again")])
    with h.acting_for(ALICE):
        stream = agent.reply_stream(UserMsg("user", "find maria"), yield_final_msg=True)
        async for event in stream:
            if isinstance(event, ToolResultEndEvent):
                break
        await stream.aclose()
        await run(agent, "are you there?")
    assert RAN == ([] if cached else ["maria"])
    read = payload_bytes(model.calls[-1])
    assert KEY not in read, tool_messages(model.calls[-1])
    assert EMAIL not in read, tool_messages(model.calls[-1])


@pytest.mark.parametrize("cached", [False, True], ids=["control_tool_ran", "served_by_cache"])
async def test_a_withheld_served_result_is_shown_to_the_ui_as_an_error(cached: bool) -> None:
    """README "Sentinel codes": "a result withheld for what it says (`pii_blocked`,
    `injection_blocked`: the call ran)" stays `ERROR`. Attack: the cache serves the
    record; the model reads `[harness:pii_blocked] ...` (state ERROR in the context).
    Happened: the UI's `ToolResultEndEvent` says `success` (the tool's own: `error`), and
    the stored context keeps error: the UI and the model disagree on the call's outcome."""
    h, model, agent = served_agent(cached, [calls(("lookup", {"q": "maria"})), text("done")])
    with h.acting_for(ALICE):
        events, _ = await run(agent, "find maria")
    assert "pii_blocked" in tool_messages(model.calls[1])[-1]
    end = next(e for e in events if isinstance(e, ToolResultEndEvent))
    assert str(getattr(end.state, "value", end.state)) == "error", end
