"""Red team, round 103 (a): round 102 rewrites "every result of a call no
gate judged" with ``quoted_pii`` in the user's stream
(``arguments.refusal_shown``), telling judged calls by
``run.judged_calls``. That set is not carried by a park record
(``park_record.NOT_CARRIED``). A client-executed call judged on worker A,
its result answered on worker B (state restored, one SQLite store), is
taken there as unjudged: its result, shaped by its tool's ``pii`` (none)
and read by the model whole, streams to the user with
``HarnessConfig.pii`` applied (``account [pii:email]``), where the same
answer on worker A streams what the model read. README (Configuration,
``pii``): "a tool result, streamed too, follows its tool's
``ToolPolicy.pii``: what the model read"; a reply resumed elsewhere "goes on
from exactly where it was, as a resume in the parking process does".

Real ``Agent``, a real (client-executed) tool in a real ``Toolkit``."""

from __future__ import annotations

from pathlib import Path

from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent, ToolResultTextDeltaEvent
from agentscope.message import ToolResultBlock, ToolResultState, UserMsg
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from scripted import ALICE, ScriptedModel, calls, client_tool, drain, make_agent, text

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.stores import SQLiteStore

EMAIL = "alice.w@example.com"


async def test_a_client_result_answered_on_another_worker_streams_as_the_model_read_it(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")

    def worker() -> Harness:
        return Harness(HarnessConfig(store=SQLiteStore(path), pii={"email": "redact"}),
                       load_entry_points=False, environ={})

    h = worker()
    model = ScriptedModel([calls(("verify_code", {"code": "1234"})), text("Your code is verified.")], stream=True)
    agent = make_agent(model, h.instrument(Toolkit(tools=[client_tool()])), h.middlewares())
    with h.acting_for(ALICE):
        out = await drain(agent, UserMsg("user", "verify my code"))
    call = next(e for e in out if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]
    # worker B: a new Harness and Agent on the same store, the state restored (on worker A the
    # same answer streams the email, as the model reads it)
    h = worker()
    agent = make_agent(model, h.instrument(Toolkit(tools=[client_tool()])), h.middlewares(),
                       state=AgentState.model_validate_json(agent.state.model_dump_json()))
    sent = [ToolResultBlock(id=call.id, name="verify_code", output=f"code ok for {EMAIL}",
                            state=ToolResultState.SUCCESS)]
    with h.acting_for(ALICE):
        out = await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=sent))
    assert EMAIL in model.calls[-1].last_result  # what the model read: the tool has no pii
    shown = "".join(e.delta for e in out if isinstance(e, ToolResultTextDeltaEvent))
    assert EMAIL in shown, f"the stream rewrote the result the model read: {shown!r}"
