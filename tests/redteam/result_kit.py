"""What the model reads of one tool result, shaped by the tool's policy: the
scenario of the injection and personal-data rounds (honest texts, disguises,
addresses)."""

from __future__ import annotations

from typing import Any

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages


async def model_after(result: str, **policy: Any) -> ScriptedModel:
    """A tool (``ToolPolicy(**policy)``, a retrieval by default) returns
    ``result``; the model, after its next call."""

    async def fetch(url: str) -> str:
        """Fetch a document.

        Args:
            url (str): The document.
        """
        return result

    policy.setdefault("role", "retrieval")
    h = Harness(HarnessConfig(tools={"fetch": ToolPolicy(**policy)}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("fetch", {"url": "https://example.org/doc"})), text("ok")])
    agent = make_agent(model, [fetch], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "what does it say?")
    return model


async def read_by_model(result: str, injection: str = "block") -> str:
    """The model's next payload (``repr`` of its formatted messages) after a
    retrieval judged for injected instructions returned ``result``."""
    return repr((await model_after(result, injection=injection)).calls[-1].formatted)


async def result_read(result: str, **policy: Any) -> str:
    """The tool result the model read, as it was shaped."""
    return tool_messages((await model_after(result, **policy)).calls[-1])[-1]
