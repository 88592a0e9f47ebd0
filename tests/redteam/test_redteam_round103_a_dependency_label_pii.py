"""Red team, round 103 (a): a tool that raises ``DependencyDown`` names its
dependency (a per-customer endpoint: ``https://crm.internal/customers/<email>``).
The tool's ``pii`` (``email: redact``) rewrites the error text inside the
fence, but the harness repeats the name twice more through
``outputs.dependency_label``, which redacts secrets only: in the
``[harness:dependency_down] <name> is unavailable`` line outside the fence
(what the model reads and the user's stream shows) and in the result's
``metadata["harness"]["dependency"]`` (streamed in the ``ToolResultEndEvent``).
Both carry the email the fence just hid. README: personal data "as each
tool's ``pii`` ... say (a tool's results, as the model reads and the stream
shows them, by its tool's ...)"; the result's metadata, "its personal data as
the tool's ``pii`` says: it streams to the UI in the result's end event".

Real ``Agent``, a real tool in a real ``Toolkit`` (instrumented, so its
``DependencyDown`` is kept)."""

from __future__ import annotations

import json

from agentscope.event import ToolResultEndEvent, ToolResultTextDeltaEvent
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import DependencyDown, Harness, HarnessConfig, ToolPolicy

EMAIL = "bob.smith@example.com"


async def crm_lookup(email: str) -> str:
    """Look a customer up in the CRM.

    Args:
        email (str): The customer.
    """
    raise DependencyDown(f"https://crm.internal/customers/{email}")


async def test_a_dependency_named_after_a_customer_follows_the_tools_pii() -> None:
    h = Harness(HarnessConfig(tools={"crm_lookup": ToolPolicy(pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("crm_lookup", {"email": EMAIL})), text("The CRM is down.")], stream=True)
    agent = make_agent(model, [crm_lookup], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "look bob up")
    read = model.calls[1].last_result
    assert "dependency_down" in read and "[pii:email]" in read  # inside the fence: the tool's pii applied
    assert EMAIL not in read, f"the model read the email the tool's pii hides: {read!r}"
    shown = "".join(e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))
    assert EMAIL not in shown, f"the stream showed it: {shown!r}"
    ends = [json.dumps(e.metadata) for e in events if isinstance(e, ToolResultEndEvent)]
    assert not any(EMAIL in m for m in ends), f"the end event's metadata carries it: {ends}"
