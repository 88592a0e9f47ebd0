"""Round 147 b: a structured reply whose dependency went down is not ended by the harness.

README "Choices where the design is silent": "A run in which a dependency went down ends
`incomplete` (reason `dependency_down`) unless a finishing tool completed it, and its user
gets the fallback answer with what the run found, not the model's text ..., nor a
structured output". README "What the caller receives": "An end that leaves the run no
model call gets no narrowed round either: ... a dependency it needed gone down"; a stopped
structured reply ends "without AgentScope's further rounds".

Attack: a reply owing a structured output (`structured_schema`); the one tool raises
`DependencyDown`; the model (AgentScope's real `OpenAIChatModel` over real HTTP) then
answers in text, as a model does after "do not retry; tell the user".

What happens: the text answer is not where the run ends: AgentScope asks for the structured
output again and again (`tool_choice` forced to `GenerateStructuredOutput`), and the harness
lets every one of those rounds go out, to AgentScope's `max_iters` and past it; the drift
ladder finally stops it as `stalled`. The report says `stalled`, not `dependency_down`, and
the provider was paid for every round after the outage.
Should: the text answer after the outage ends the reply with the fallback (no structured
output), `incomplete`/`dependency_down`, and no further model call (the model-call path in
`liveness_watchdog`/`agent_adapter` already does this for a structured call made after the
outage: the same end is owed when AgentScope's structured-output loop asks again)."""
from __future__ import annotations

import pytest
from agentscope.credential import OpenAICredential
from agentscope.message import Msg, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import FunctionTool, Toolkit
from pydantic import BaseModel, SecretStr

from agentscope_harness import DependencyDown, Harness, HarnessConfig, TerminalState
from agentscope_harness.testing import ScriptedModel, calls, text
from tests.realclient.server import FakeOpenAI, Reply
from tests.scripted import ALICE, ALLOW, make_agent

pytestmark = pytest.mark.asyncio


class Status(BaseModel):
    status: str


async def orders(order_id: str) -> str:
    """Look an order up in the orders service.

    Args:
        order_id (str): The order.
    """
    raise DependencyDown("orders-api", ConnectionError("connection refused"))


async def _reply(h: Harness, agent) -> Msg:
    final = None
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "where is A-1?"), structured_schema=Status,
                                             yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
    return final


async def test_structured_reply_after_outage_ends_dependency_down_real_model() -> None:
    server = FakeOpenAI()
    await server.start()
    try:
        # after the outage the model answers in text; the server's runaway answer is text too
        server.plan(Reply(tool_calls=[("orders", {"order_id": "A-1"})]),
                    Reply(text="The orders service is down; I cannot tell where A-1 is."))
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
            model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
            client_kwargs={"max_retries": 0, "timeout": 30.0},
        )
        h = Harness(HarnessConfig(), load_entry_points=False, environ={})
        agent = make_agent(model, h.instrument(Toolkit(tools=[FunctionTool(orders, permission=ALLOW)])),
                           h.middlewares(), max_iters=10)
        final = await _reply(h, agent)
        report = h.last_report(agent)
        sent = len(server.requests)
    finally:
        await server.close()
    assert final.structured_output is None
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "dependency_down"), (
        f"report says {report.terminal_state.value}/{report.reason} after {sent} requests "
        f"({server.runaway} after the script ran out)")
    assert sent <= 3, f"{sent} model requests went out after the dependency went down"


async def test_structured_reply_after_outage_ends_dependency_down_scripted() -> None:
    model = ScriptedModel([calls(("orders", {"order_id": "A-1"})),
                           text("The orders service is down; I cannot tell where A-1 is.")], repeat=True)
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[FunctionTool(orders, permission=ALLOW)])), h.middlewares())
    await _reply(h, agent)
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "dependency_down"), (
        f"report says {report.terminal_state.value}/{report.reason} after {len(model.calls)} model calls")
    assert len(model.calls) <= 3, f"{len(model.calls)} model calls after the dependency went down"


class Ids(BaseModel):
    ids: list[str]


@pytest.mark.parametrize(("case", "config", "script", "schema", "expected"), [
    ("fallback", {}, [calls(("orders", {"order_id": "A-1"})), text("z")], None,
     ("completed", "incomplete", "dependency_down")),
    ("structured, text replaced", {}, [calls(("orders", {"order_id": "A-1"})), text("z")], Ids,
     ("exceed_max_iters", "incomplete", "dependency_down")),
    ("structured, output withheld", {}, [calls(("orders", {"order_id": "A-1"})),
                                         calls(("GenerateStructuredOutput", {"ids": ["x"]}))], Ids,
     ("completed", "incomplete", "dependency_down")),
    ("structured, model_error_text", {"model_error_text": "model down"}, [RuntimeError("provider 500")], Ids,
     ("exceed_max_iters", "failed", "model_error")),
    ("model_error_text", {"model_error_text": "model down"}, [RuntimeError("provider 500")], None,
     ("completed", "failed", "model_error")),
])
async def test_finished_reason_is_agentscopes_account_of_its_loop(case, config, script, schema, expected) -> None:
    """README "Choices where the design is silent": AgentScope's ``finished_reason``
    says how its loop ended, the report what the task came to."""
    h = Harness(HarnessConfig(**config), load_entry_points=False, environ={})
    model = ScriptedModel(script)
    agent = make_agent(model, h.instrument(Toolkit(tools=[FunctionTool(orders, permission=ALLOW)])), h.middlewares())
    with h.acting_for(ALICE):
        kwargs = {"structured_schema": schema} if schema is not None else {}
        final = [item async for item in agent.reply_stream(UserMsg("user", "where is A-1?"), yield_final_msg=True,
                                                           **kwargs)][-1]
    report = h.last_report(agent)
    reason = str(getattr(final.finished_reason, "value", final.finished_reason))
    assert (reason, report.terminal_state.value, report.reason) == expected, case
    assert final.structured_output is None
