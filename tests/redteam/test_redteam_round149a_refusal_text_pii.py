"""Round 149 a: AgentScope's refusal of a call's arguments (its `jsonschema` message
quoting the model's values) is now held to the call's end (`held_deltas`) and shown
through `_held_shown`, which FIRST applies the tool's result `pii`
(`result_pii`, a withheld text left out) and only then `refusal_shown`.

README "Security" (Personal data): "A refusal that quotes a call's arguments
(AgentScope's of arguments it cannot read or that fail the schema, ...) is rewritten, in
the user's stream and for the model, with the stronger of `HarnessConfig.pii` and the
tool's `pii` per kind (as the streamed arguments were)".

Attack: the model sends `lookup(q=[<email>, <card>, <phone>])` (a list where a string is
due); AgentScope refuses it quoting the values.
(a) tool `pii={"email": "block"}`: the refusal is left out of the user's stream entirely
    (round 147: shown, the address as `[pii:email]`);
(b) `HarnessConfig.pii={"card": "redact"}`, tool `pii={"card": "mask"}`: the user is shown
    `**** **** **** 1111` (the tool's weaker mode ran first, the stronger found nothing
    left); likewise `email` redact vs mask shows `*****.********@******e.org`, phone redact
    vs hash shows a linkable hash tag. Round 147 showed `[pii:card]` etc.
Should: the refusal is shown, each kind rewritten with the stronger of the two modes.
"""
from __future__ import annotations

import pytest
from agentscope.event import ToolResultTextDeltaEvent
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

EMAIL = "maria.gonzalez@example.org"
CARD = "4111 1111 1111 1111"
PHONE = "+49 30 12345678"


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): The query.
    """
    return "none"


async def _refusal_shown(config_pii: dict, tool_pii: dict) -> str:
    h = Harness(HarnessConfig(pii=config_pii, tools={"lookup": ToolPolicy(role="retrieval", pii=tool_pii)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": [EMAIL, CARD, PHONE]})), text("Sorry, I could not look that up.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent, "look up maria")
    return "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))


async def test_a_refusal_is_shown_when_the_tool_blocks_a_kind_it_quotes() -> None:
    shown = await _refusal_shown({}, {"email": "block"})
    assert "Input validation failed for tool 'lookup'" in shown, f"AgentScope's refusal was left out: {shown!r}"
    assert EMAIL not in shown


@pytest.mark.parametrize(("kind", "tag", "value", "weaker"), [
    ("card", "payment_card", "1111", "mask"), ("email", "email", "e.org", "mask"), ("phone", "phone", "[pii:phone:", "hash")])
async def test_a_refusal_is_rewritten_with_the_stronger_mode(kind: str, tag: str, value: str, weaker: str) -> None:
    shown = await _refusal_shown({kind: "redact"}, {kind: weaker})
    assert "Input validation failed for tool 'lookup'" in shown
    assert f"[pii:{tag}]" in shown and value not in shown, (
        f"the tool's {weaker} ran, not the stronger redact of HarnessConfig.pii: {shown!r}")
