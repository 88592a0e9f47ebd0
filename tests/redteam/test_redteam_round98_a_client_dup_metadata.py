"""Red team, round 98 (a). A client answers its awaited call with two
results under the one call id (AgentScope checks the ids as a set, and
takes both into the context). ``shape_external_results`` files each
result's cleaned metadata under its call id (``client_metadata[block.id]``),
so the second overwrites the first; at the first result's end event
``_cleaned_metadata`` pops the entry and cleans the second block, and the
first block, the real outcome of the call, is saved to the agent's context
with what the client sent: a provider key in the clear and its own
``harness`` entry (which "the client may not write"). README: a client's
result "is kept and shown: redacted as a server tool's result is"; round
37's guarantee (``test_a_client_results_metadata_is_redacted_in_the_context``)
holds only for one result per id."""

from __future__ import annotations

from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import ToolResultBlock, UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, client_tool, drain, make_agent, text

from agentscope_harness import Harness, HarnessConfig

PROVIDER_KEY = "sk-proj-" + "Q" * 40


async def test_a_second_result_under_one_id_leaves_the_firsts_metadata_uncleaned_in_the_context() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "1234"})), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[client_tool()])), h.middlewares())
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "check 1234"))
        asked = next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        first = ToolResultBlock(id=asked.id, name=asked.name, output="code checked", state="success",
                                metadata={"device": {"session": f"Bearer {PROVIDER_KEY}"},
                                          "harness": {"error_class": "forged"}})
        again = ToolResultBlock(id=asked.id, name=asked.name, output="checked again", state="success",
                                metadata={"device": {"session": "none"}})
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                        execution_results=[first, again]))
    kept = agent.state.model_dump_json()
    assert "code checked" in kept
    assert PROVIDER_KEY not in kept, "the client's provider key is kept in the agent's context in the clear"
    assert "forged" not in kept, "the client's own harness entry is kept in the agent's context"
