"""Red team, round 97 (a). A client-executed tool promises a shape for its
results' metadata (``metadata_schema``); its policy masks e-mail addresses
(``ToolPolicy(pii={"email": "mask"})``). ``shape_external_results`` checks
the client's result against that schema (``_shape_kept``) and finds it
good, and only then ``_shape_client_result`` masks the metadata in place.
AgentScope checks the result after the harness, on the masked metadata:
``'*****@******e.com' does not match`` the schema, the ``ValidationError``
reaches the caller and the reply stays parked. Every resend is masked the
same way, so a well-formed client result can never be taken: the harness's
own shaping refuses it. README: a client's result "is kept and shown:
redacted as a server tool's result is (its tool's pii)"; the shape check
is the client's promise, which this client kept."""

from __future__ import annotations

from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
from agentscope.message import ToolResultBlock, ToolResultState, UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, client_tool, drain, make_agent, text

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy


async def test_a_well_formed_client_result_is_taken_though_its_metadata_is_masked() -> None:
    client = client_tool()
    type(client).metadata_schema = {
        "type": "object",
        "properties": {"contact": {"type": "string", "pattern": "^[a-z.]+@[a-z.]+$"}},
        "required": ["contact"],
    }
    h = Harness(HarnessConfig(tools={"verify_code": ToolPolicy(pii={"email": "mask"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("verify_code", {"code": "1234"})), text("Your code is verified.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[client])), h.middlewares())
    with h.acting_for(ALICE):
        out = await drain(agent, UserMsg("user", "verify my code"))
        call = next(e for e in out if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
        sent = [ToolResultBlock(id=call.id, name="verify_code", output="code ok", state=ToolResultState.SUCCESS,
                                metadata={"contact": "alice@example.com"})]  # as the tool promises
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=sent))
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state, report.reason)
    assert "alice@example.com" not in str(model.calls[-1].formatted)  # still masked for the model
