"""Round 107 (d): A finishing tool registered in an AgentScope tool group (``ToolGroup``)
that the model has not activated (``reset_tools``) is not in the tool table
AgentScope sends. When the model answers in text, ``terminal_enforcer`` asks
for one more round with ``tool_choice`` narrowed to the finishing tool
(``agent_adapter._conclude_choice`` -> ``ToolChoice(mode="submit_answer")``),
a tool name the request does not carry. AgentScope's real provider models
validate ``tool_choice`` against the tools sent (``ChatModelBase._validate_tool_choice``)
and raise ``ValueError`` before any request goes out: the reply raises to the
caller, and the report says ``failed`` / ``model_error``, a provider failure
that never happened (the server got two requests, both answered).

README, hook 23 ``terminal_enforcer``: "Text answer while a finishing tool is
required: one more round with a nudge and ``tool_choice`` narrowed to the
finishing tool (``max_enforce_retries``), then ``incomplete``
(``finish_tool_not_called``): ... the fallback and what the run found are."
README "What the caller receives": ``failed`` (``model_error``) is for "the
provider fails after its retries".

Real ``Agent``, AgentScope's real ``OpenAIChatModel`` (real ``openai`` client,
real HTTP to the repo's scripted server), real tools in a real, instrumented
``Toolkit`` with a tool group."""

from __future__ import annotations

import pytest
from agentscope.credential import OpenAICredential
from agentscope.message import UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import FunctionTool, ToolGroup, Toolkit
from pydantic import SecretStr

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.realclient.server import FakeOpenAI, Reply
from tests.scripted import ALICE, ALLOW, make_agent

pytestmark = pytest.mark.asyncio


async def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id}: paid"


async def submit_answer(answer: str) -> str:
    """Submit the final answer to the user.

    Args:
        answer (str): The answer.
    """
    return answer


def _toolkit(harness: Harness, grouped: bool) -> Toolkit:
    """The finishing tool in a tool group not activated, or not in this agent's toolkit at all (one
    Harness may serve agents whose toolkits differ)."""
    groups = [ToolGroup(name="reporting", description="Tools to report to the user.",
                        tools=[FunctionTool(submit_answer, permission=ALLOW)])] if grouped else []
    return harness.instrument(Toolkit(tools=[FunctionTool(lookup, permission=ALLOW)], tool_groups=groups))


@pytest.mark.parametrize("grouped", [True, False])
async def test_text_answer_with_finishing_tool_not_sent_ends_incomplete_not_crashed(grouped: bool) -> None:
    server = FakeOpenAI()
    await server.start()
    server.plan(Reply(tool_calls=[("lookup", {"order_id": "A-1"})]),
                Reply(text="Order A-1 is paid."), Reply(text="Order A-1 is paid."), Reply(text="Order A-1 is paid."))
    model = OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
        model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
        client_kwargs={"max_retries": 0, "timeout": 30.0},
    )
    harness = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}),
                      load_entry_points=False, environ={})
    agent = make_agent(model, _toolkit(harness, grouped), harness.middlewares())
    raised: BaseException | None = None
    final = None
    try:
        with harness.acting_for(ALICE):
            final = await agent.reply(UserMsg("user", "is order A-1 paid?"))
    except Exception as exc:
        raised = exc
    finally:
        await model.client.close()
        await server.close()
    report = harness.last_report(agent)
    # the provider never failed: every request it got was answered 200
    assert server.statuses == [200] * len(server.statuses)
    # README: the text answer around the required finishing tool -> one narrowed round, then
    # incomplete (finish_tool_not_called) with the fallback answer; not an exception
    assert raised is None, f"reply raised {type(raised).__name__}: {raised}"
    assert (report.terminal_state.value, report.reason) == ("incomplete", "finish_tool_not_called"), (
        report.terminal_state, report.reason)
    assert final is not None and "Order A-1 is paid." not in (final.get_text_content() or "")
