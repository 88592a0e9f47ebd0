"""Round 107 (c): a sub-agent's failure reached its lead only as text: the
lead's run ended ``completed`` whatever the sub-agent's run ended with. A
dependency down in a sub-agent is down for every run it is nested in now
(``RunState.dependency_went_down``), and a finishing call whose own
sub-agent fell short does not complete the run (``mark_terminal``).

1. AgentScope's real ``OpenAIChatModel`` (real HTTP, SSE, tool-call arguments
   split across deltas) against ``tests/realclient/server.py``. The orders
   database is down. Called by the agent itself, the harness ends the run
   ``incomplete`` (``dependency_down``) and gives the user the fallback, not
   the model's made-up answer (README, "Choices where the design is silent":
   "A run in which a dependency went down ends incomplete (reason
   dependency_down) ... and its user gets the fallback answer with what the
   run found, not the model's text (a model left without its data is the one
   most tempted to make the answer up)"). Called through an orders sub-agent
   (same Harness, nested run: "run-wide, sub-agents included"; the breaker
   already counts "a run (with its sub-agents)"), the dependency went down in
   the run all the same, but the user is streamed and given the lead model's
   invented "Your order A-1 has shipped", reported ``completed`` (``answered``).

2. A finishing tool that has a writer sub-agent draft the answer. The writer's
   warehouse is down: it ends ``incomplete`` (``dependency_down``) with the
   fallback, which the finishing tool delivers. The user's final message reads
   "I could not complete this request (a service it needs is unavailable)"; the
   lead's report (and its ``harness.report`` event) says ``completed``
   (``finished``). DESIGN §1.10: "A run ends completed only when its delivery
   contract holds ... Leaving the loop is not success"; README ``ctx.stop``:
   "a completed run never tells the user it failed".
"""

from __future__ import annotations

import pytest
from agentscope.credential import OpenAICredential
from agentscope.event import TextBlockDeltaEvent
from agentscope.message import UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import Toolkit
from pydantic import SecretStr

from agentscope_harness import DependencyDown, Harness, HarnessConfig, ToolPolicy
from tests.realclient.server import FakeOpenAI, Reply
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

MADE_UP = "Your order A-1 has shipped and arrives Friday."


MADE: list[OpenAIChatModel] = []


def real_model(server: FakeOpenAI) -> OpenAIChatModel:
    MADE.append(OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
        model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
        client_kwargs={"max_retries": 0, "timeout": 30},
    ))
    return MADE[-1]


async def order_status(order_id: str) -> str:
    """Look up where an order is.

    Args:
        order_id (str): The order.
    """
    raise DependencyDown("orders database", "connection refused")


def streamed_text(events: list) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))


async def test_control_the_agent_itself_meeting_the_outage_gets_the_fallback() -> None:
    server = FakeOpenAI()
    await server.start()
    try:
        h = Harness(HarnessConfig(tools={"order_status": ToolPolicy(role="lookup")}),
                    load_entry_points=False, environ={})
        model = real_model(server)
        agent = make_agent(model, h.instrument(Toolkit(tools=[tool(order_status)])), h.middlewares(), name="lead")
        server.plan(Reply(tool_calls=[("order_status", {"order_id": "A-1"})]), Reply(text=MADE_UP))
        with h.acting_for(ALICE):
            events, final = await run(agent, "where is my order A-1?")
        report = h.last_report(agent)
        assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
        assert "shipped" not in final.get_text_content() and "shipped" not in streamed_text(events)
    finally:
        while MADE:
            await MADE.pop().client.close()
        await server.close()


async def test_the_outage_met_by_its_orders_sub_agent_gives_the_made_up_answer() -> None:
    server = FakeOpenAI()
    await server.start()
    try:
        h = Harness(HarnessConfig(tools={"order_status": ToolPolicy(role="lookup")}),
                    load_entry_points=False, environ={})
        child_model, lead_model = real_model(server), real_model(server)
        orders = make_agent(child_model, h.instrument(Toolkit(tools=[tool(order_status)])), h.middlewares(),
                            name="orders")

        async def ask_orders(task: str) -> str:
            """Ask the orders agent.

            Args:
                task (str): What to find out.
            """
            return (await orders.reply(UserMsg("lead", task))).get_text_content() or ""

        lead = make_agent(lead_model, h.instrument(Toolkit(tools=[tool(ask_orders)])), h.middlewares(), name="lead")
        server.plan(
            Reply(tool_calls=[("ask_orders", {"task": "where is order A-1?"})]),  # lead
            Reply(tool_calls=[("order_status", {"order_id": "A-1"})]),  # orders sub-agent
            Reply(text="A-1 has shipped."),  # the sub-agent's own made-up answer (replaced: its fallback)
            Reply(text=MADE_UP),  # lead, left without its data
        )
        with h.acting_for(ALICE):
            events, final = await run(lead, "where is my order A-1?")
        report = h.last_report(lead)
        assert [(c.agent, c.terminal_state.value, c.reason) for c in report.children] == [
            ("orders", "incomplete", "dependency_down")]
        # the break: what the user receives and what the report says
        assert MADE_UP not in streamed_text(events), "the invented answer was streamed to the user"
        assert MADE_UP not in final.get_text_content(), "the invented answer was delivered"
        assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down"), (
            report.terminal_state.value, report.reason)
    finally:
        while MADE:
            await MADE.pop().client.close()
        await server.close()


async def sales_db(region: str) -> str:
    """Sales figures of a region.

    Args:
        region (str): The region.
    """
    raise DependencyDown("sales warehouse", "connection refused")


async def test_a_finishing_tool_delivering_its_writers_failure_is_not_reported_completed() -> None:
    h = Harness(HarnessConfig(tools={"sales_db": ToolPolicy(role="retrieval"),
                                     "publish_report": ToolPolicy(role="finish")}),
                load_entry_points=False, environ={})
    writer = make_agent(ScriptedModel([calls(("sales_db", {"region": "EU"})), text("EU sales grew 12%.")]),
                        h.instrument(Toolkit(tools=[tool(sales_db)])), h.middlewares(), name="writer")

    async def publish_report(region: str, audience: str) -> str:
        """Have the writer draft the report, and deliver it to the user.

        Args:
            region (str): The region.
            audience (str): Who reads it.
        """
        return (await writer.reply(UserMsg("lead", f"sales report on {region} for the {audience}"))
                ).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("publish_report", {"region": "EU", "audience": "board"}))]),
                      h.instrument(Toolkit(tools=[tool(publish_report)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        events, final = await run(lead, "the EU sales report for the board, please")
    report = h.last_report(lead)
    said = final.get_text_content()
    assert said.startswith("I could not complete this request")  # what the user reads: a failure
    assert [(c.agent, c.terminal_state.value) for c in report.children] == [("writer", "incomplete")]
    published = [e.value for e in events if getattr(e, "name", None) == "harness.report"][-1]
    # the break: the report (and the event a UI reads) says the task was done
    assert published["terminal_state"] != "completed", (published["terminal_state"], published["reason"], said)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "dependency_down")
    assert published["reason"] == "dependency_down"


async def test_a_finishing_tool_whose_writer_completed_on_a_retry_completes_the_run() -> None:
    """The last sub-agent a finishing call ran decides: a writer retried after
    its warehouse was down, and completing then, delivered what it owed."""
    attempts: list[str] = []

    async def flaky_sales_db(region: str) -> str:
        """Sales figures of a region.

        Args:
            region (str): The region.
        """
        attempts.append(region)
        if len(attempts) == 1:
            raise DependencyDown("sales warehouse", "connection refused")
        return "EU: +12%"

    h = Harness(HarnessConfig(tools={"flaky_sales_db": ToolPolicy(role="retrieval"),
                                     "publish_report": ToolPolicy(role="finish")}),
                load_entry_points=False, environ={})
    writer = make_agent(ScriptedModel([calls(("flaky_sales_db", {"region": "EU"})), text("no data"),
                                       calls(("flaky_sales_db", {"region": "EU"})), text("EU sales grew 12%.")]),
                        h.instrument(Toolkit(tools=[tool(flaky_sales_db)])), h.middlewares(), name="writer")

    async def publish_report(region: str) -> str:
        """Have the writer draft the report (retried once), and deliver it to the user.

        Args:
            region (str): The region.
        """
        draft = (await writer.reply(UserMsg("lead", f"sales report on {region}"))).get_text_content() or ""
        if draft.startswith("I could not complete"):
            draft = (await writer.reply(UserMsg("lead", f"sales report on {region}, again"))).get_text_content()
        return draft or ""

    lead = make_agent(ScriptedModel([calls(("publish_report", {"region": "EU"}))]),
                      h.instrument(Toolkit(tools=[tool(publish_report)])), h.middlewares(), name="lead")
    with h.acting_for(ALICE):
        await run(lead, "the EU sales report, please")
    report = h.last_report(lead)
    assert [(c.terminal_state.value, c.reason) for c in report.children] == [
        ("incomplete", "dependency_down"), ("completed", "answered")]
    assert (report.terminal_state.value, report.reason) == ("completed", "finished")
