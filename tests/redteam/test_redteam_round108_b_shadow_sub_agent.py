"""Round 108 (b): a shadow-mode Harness's unenforced judgement of a sub-agent
ends its enforcing lead's run and replaces what the lead's user receives.

Round 107 made a sub-agent's outage the lead's (``RunState.dependency_went_down``)
and a finishing call whose own sub-agent fell short end the lead ``incomplete``
(``mark_terminal._fell_short_inside``). Neither asks whether the sub-agent's
end was real or only what its shadow-mode Harness *would* have enforced:

1. (AgentScope's real ``OpenAIChatModel`` against ``tests/realclient/server.py``.)
   The orders agent runs under a shadow-mode Harness (a policy being trialled).
   Its breaker opened during an earlier outage; the database is back. In shadow
   mode the breaker refuses nothing (``enforced=False``): ``order_status`` runs
   and answers "shipped Tuesday, arrives Friday". But ``tool_breaker_gate`` calls
   ``dependency_went_down`` before its would-be refusal is dropped, and that now
   walks up into the enforcing lead: the lead's user is told "I could not complete
   this request (a service it needs is unavailable)", the lead's report says
   ``incomplete`` / ``dependency_down``. Before round 107: the model's answer,
   ``completed``.

2. A writer sub-agent under a shadow Harness with ``max_model_calls=1`` makes 2
   calls: in shadow they run and its report says ``incomplete`` /
   ``max_model_calls`` (as enforcing would have ended it). The enforcing lead's
   finishing tool delivers the writer's full draft, yet the lead ends
   ``incomplete`` / ``max_model_calls`` and its user gets the fallback
   ("it took too many steps"). Before round 107: ``completed`` with the draft.

README "Shadow mode refuses nothing ... The user gets the model's answer";
"A Harness in shadow mode lends no caps: its limits are recorded on its own runs
only, never enforced on an enforcing sub-agent's" (and ``RunLimits.enforced``:
"these caps bind its own runs only (in shadow: recorded), never another
Harness's"). ``RunState.enclosing_end`` checks ``limits.enforced``; these two do not.
"""

from __future__ import annotations

import pytest
from agentscope.credential import OpenAICredential
from agentscope.message import UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import Toolkit
from pydantic import SecretStr

from agentscope_harness import DependencyDown, Harness, HarnessConfig, ToolPolicy
from tests.realclient.server import FakeOpenAI, Reply
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, search, text, tool

pytestmark = pytest.mark.asyncio
UP: list[bool] = []


async def order_status(order_id: str) -> str:
    """Where an order is.

    Args:
        order_id (str): The order.
    """
    if not UP:
        raise DependencyDown("orders database", "connection refused")
    return f"order {order_id}: shipped Tuesday, arrives Friday"


def real_model(server: FakeOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
        model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
        client_kwargs={"max_retries": 0, "timeout": 30},
    )


async def test_a_shadow_breakers_would_be_refusal_ends_the_enforcing_lead() -> None:
    UP.clear()
    lead_h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    shadow_h = Harness(HarnessConfig(mode="shadow", tools={"order_status": ToolPolicy(role="lookup")}),
                       load_entry_points=False, environ={})
    for i in range(3):  # three earlier runs meet the outage: the (shadow) breaker opens
        earlier = make_agent(ScriptedModel([calls(("order_status", {"order_id": f"B-{i}"})), text("sorry")]),
                             shadow_h.instrument(Toolkit(tools=[tool(order_status)])), shadow_h.middlewares(),
                             name="orders")
        with shadow_h.acting_for(ALICE):
            await run(earlier, "status?")
    UP.append(True)  # the database is back

    server = FakeOpenAI()
    await server.start()
    models = [real_model(server), real_model(server)]
    try:
        orders = make_agent(models[0], shadow_h.instrument(Toolkit(tools=[tool(order_status)])),
                            shadow_h.middlewares(), name="orders")

        async def ask_orders(task: str) -> str:
            """Ask the orders agent.

            Args:
                task (str): What to find out.
            """
            return (await orders.reply(UserMsg("lead", task))).get_text_content() or ""

        lead = make_agent(models[1], lead_h.instrument(Toolkit(tools=[tool(ask_orders)])), lead_h.middlewares(),
                          name="lead")
        server.plan(
            Reply(tool_calls=[("ask_orders", {"task": "where is A-1?"})]),  # lead
            Reply(tool_calls=[("order_status", {"order_id": "A-1"})]),  # orders (shadow)
            Reply(text="A-1 shipped Tuesday, arrives Friday."),  # orders
            Reply(text="Your order A-1 shipped Tuesday and arrives Friday."),  # lead
        )
        with lead_h.acting_for(ALICE):
            _, final = await run(lead, "where is my order A-1?")
    finally:
        for m in models:
            await m.client.close()
        await server.close()
    breaker = [d for d in shadow_h.last_report(orders).decisions if d.hook == "tool_breaker_gate"]
    assert [(d.code, d.enforced) for d in breaker] == [("dependency_down", False)]  # recorded, not enforced
    said = final.get_text_content()
    report = lead_h.last_report(lead)
    # the break: the service answered, the lead's user is told it was unavailable
    assert not said.startswith("I could not complete this request"), said
    assert said == "Your order A-1 shipped Tuesday and arrives Friday.", said
    assert (report.terminal_state.value, report.reason) == ("completed", "answered"), (
        report.terminal_state.value, report.reason)


async def test_a_shadow_cap_on_the_writer_ends_the_enforcing_leads_finishing_call() -> None:
    lead_h = Harness(HarnessConfig(tools={"publish_report": ToolPolicy(role="finish")}),
                     load_entry_points=False, environ={})
    shadow_h = Harness(HarnessConfig(mode="shadow", max_model_calls=1), load_entry_points=False, environ={})
    writer = make_agent(ScriptedModel([calls(("search", {"q": "EU sales"})), text("EU sales grew 12% in Q3.")]),
                        shadow_h.instrument(Toolkit(tools=[tool(search)])), shadow_h.middlewares(), name="writer")

    async def publish_report(region: str, audience: str) -> str:
        """Have the writer draft the report, and deliver it.

        Args:
            region (str): The region.
            audience (str): Who reads it.
        """
        return (await writer.reply(UserMsg("lead", f"sales report on {region} for the {audience}"))
                ).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("publish_report", {"region": "EU", "audience": "board"}))]),
                      lead_h.instrument(Toolkit(tools=[tool(publish_report)])), lead_h.middlewares(), name="lead")
    with lead_h.acting_for(ALICE):
        _, final = await run(lead, "the EU sales report")
    report = lead_h.last_report(lead)
    assert [(c.agent, c.terminal_state.value, c.reason) for c in report.children] == [
        ("writer", "incomplete", "max_model_calls")]  # shadow: what enforcing would have said
    said = final.get_text_content()
    # the break: the draft was made and delivered; the enforcing lead's user gets the fallback
    assert "EU sales grew 12% in Q3." in said, said
    assert (report.terminal_state.value, report.reason) == ("completed", "finished"), (
        report.terminal_state.value, report.reason)
