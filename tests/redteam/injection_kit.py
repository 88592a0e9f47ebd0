"""What the model reads of one fetched result judged with ``injection="block"``:
the scenario of the injection rounds' honest-text and disguise cases."""

from __future__ import annotations

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text


async def read_by_model(result: str, injection: str = "block") -> str:
    """A retrieval tool returns ``result``; the payload of the model's next
    call (``repr`` of its formatted messages)."""

    async def fetch(url: str) -> str:
        """Fetch a document.

        Args:
            url (str): The document.
        """
        return result

    h = Harness(HarnessConfig(tools={"fetch": ToolPolicy(role="retrieval", injection=injection)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("fetch", {"url": "https://example.org/doc"})), text("ok")])
    agent = make_agent(model, [fetch], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "what does it say?")
    return repr(model.calls[-1].formatted)
