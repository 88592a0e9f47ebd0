"""Round 128 d (tell the user the truth): a run stopped at its call cap loses
both its fallback answer and its reason because the harness's own "what I
found" list quotes an e-mail the answer's `pii` blocks.

README "What the caller receives": "deadline, call cap, budget, ... ->
`incomplete` (`deadline`, `max_model_calls`, ...) -> `fallback_text` (`{reason}`
filled in) plus a short, redacted list of what the run found"; `audit_failed`
is for "the final answer carries personal data a `HarnessConfig.pii` kind
`block`s" (the MODEL's answer). "An answer the harness gives in the model's
place (a stop's text, the fallback and what the run found) is filtered".
Elsewhere a field the harness writes is "no answer to withhold": a `block` kind
there is redacted.

Attack: `HarnessConfig(pii={"email": "block"}, max_model_calls=2)`; a lookup
tool (no `pii` of its own) returns a customer record with an e-mail. The run
reaches its cap: the harness answers in the model's place with the fallback
and the list of what it found (which quotes the record).

What happened: the stream shows the fallback (the e-mail already redacted to
`[pii:email]`), then "I'm sorry, I could not produce an answer I can stand
behind": the final message withholds the harness's own fallback, and the
report says `incomplete`/`audit_failed` instead of `max_model_calls`: the
caller is told the answer failed an audit, not that the run ran out of steps,
and the user loses what was found.

Should: the harness's own stop text (the fallback and found list) is filtered
with a `block` kind redacted, never withheld; the report keeps the stop's
reason (`max_model_calls`).
"""
from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, tool

pytestmark = pytest.mark.asyncio


async def lookup(q: str) -> str:
    """Look up a customer.

    Args:
        q (str): Who.
    """
    return f"customer {q}: 2 open orders, contact jane.doe@example.com"


async def test_a_capped_run_keeps_its_fallback_and_its_reason() -> None:
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="lookup")}, pii={"email": "block"},
                              max_model_calls=2), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": f"c-{i}"})) for i in range(6)])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), middlewares=h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "what does customer c-0 have open?")
    report = h.last_report(agent)
    received = final.get_text_content() or ""

    assert "jane.doe@example.com" not in received  # never shown, either way
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "max_model_calls"), report.reason
    assert received.startswith("I could not complete this request"), received
    assert "2 open orders" in received  # what the run found is handed over (its e-mail redacted)
