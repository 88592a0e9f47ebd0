"""Round 140 b: the arguments check reads the NEWEST block of a call id, so the first
of two parallel calls under one id is compared with the second's arguments and refused.

README "Tools" (call ids): "A call under an id another call of the run holds (being
judged, admitted, running or parked: a provider that numbers or repeats its calls' ids)
is refused (`duplicate_call`, decision `call_id_check`) before any gate sees it: ... a
second call there would take the first one's place. Calls under one id that run one
after the other are each judged."  README "Combining": only a middleware that passes
changed arguments on gets `policy_error` / `arguments_check`.

Attack: a provider that numbers ids per message (`call_0` twice in one parallel batch:
round 133's setup), no middleware changing anything. `as_parsed` -> `_stored_input`
scans the context newest first and returns the SECOND block's input for the FIRST call:
`{"sku": "B-7"}` != `{"q": "boots"}`, so the honest first call is refused as
"arguments changed by a middleware" (arguments_check) and never runs; before bfe0d49 it
ran and only the second was refused (duplicate_call).
Should: the first call runs; at most the second is refused as duplicate_call.
"""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.tool import Toolkit

import agentscope_harness.testing as harness_testing
from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.redteam.test_redteam_round133_shadow_repeated_call_id import AwaitingAudit, _tools
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("audit", [True, False], ids=["judged_together", "plain"])
async def test_first_call_under_a_repeated_id_is_not_an_arguments_change(monkeypatch: Any, audit: bool) -> None:
    ran: list[str] = []
    monkeypatch.setattr(harness_testing, "_call_id", lambda: "call_0")
    model = ScriptedModel([calls(("search", {"q": "boots"}), ("stock", {"sku": "B-7"})), text("Boots: B-7, 4 left.")])
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval"), "stock": ToolPolicy(role="lookup")}),
                load_entry_points=False, environ={})
    mws = [AwaitingAudit()] if audit else []
    agent = make_agent(model, h.instrument(Toolkit(tools=_tools(ran))), middlewares=[*mws, *h.middlewares()])
    with h.acting_for(ALICE):
        await run(agent, "boots in stock?")
    report = h.last_report(agent)
    refused = [(d.hook, d.code, d.tool) for d in report.decisions if d.action == "refuse"]
    told = tool_messages(model.calls[1])
    assert "search:boots" in ran, f"ran={ran}; refusals={refused}; the model read {told}"
    assert not any(hook == "arguments_check" for hook, _, _ in refused), refused
