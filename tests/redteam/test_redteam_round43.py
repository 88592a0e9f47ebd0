"""Round 43: a helper looked for legitimate answers wrongly replaced by
rounds 40-42's rules of what the user receives. Each break, held here.

- a sub-agent with an MCP server serving no finishing tool was held to it;
- a claim about an earlier reply's call whose JSON AgentScope repaired, or
  one naming an argument the tool ran with by its default, was "corrected";
- a claims correction was given about an answer the user never received (a
  stop's text, or the fallback of an answer around the finishing tool, is);
- an ``on_session_end`` stop that completes the run gave the fallback words;
- "$80." at the end of a sentence was no number.
"""

from __future__ import annotations

import pytest
from agentscope.mcp import HttpMCPConfig, MCPClient
from agentscope.message import UserMsg
from agentscope.tool import Toolkit
from hookkit import streamed
from scripted import ALICE, ScriptedModel, calls, delegating_tool, drain, make_agent, payload_bytes, run, text, tool
from test_redteam_round40 import RAN, cancel_order, submit_answer
from test_redteam_round42 import search, stopping_the_answer

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy, harness_hook

FINISH = {"submit_answer": ToolPolicy(role="finish")}


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


async def test_a_sub_agent_whose_mcp_server_serves_no_finishing_tool_answers_its_lead() -> None:
    unreachable = MCPClient(name="weather", is_stateful=False, mcp_config=HttpMCPConfig(url="http://127.0.0.1:9/mcp"))
    h = Harness(HarnessConfig(tools=FINISH, max_enforce_retries=0), load_entry_points=False)
    child = make_agent(ScriptedModel([text("CHILD-FACT: x costs 5.")]),
                       Toolkit(tools=[tool(search)], mcps=[unreachable]), h.middlewares(), name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "x"})), calls(("submit_answer", {"answer": "done"}))])
    lead = make_agent(lead_model, [delegating_tool(child), submit_answer], h.middlewares())
    await run(lead)
    assert "CHILD-FACT: x costs 5." in payload_bytes(lead_model.calls[1])
    assert next(r for r in h.reports if r.agent == "child").reason == "answered"


# ------------------------------------------------------------------ claims


@pytest.mark.parametrize("raw", ['{"order_id": "A-1", "user_id": "u-42",}', "{'order_id': 'A-1', 'user_id': 'u-42'}"])
async def test_an_earlier_replys_repaired_call_supports_its_claim(raw: str) -> None:
    claim = r"\border (?P<order_id>[A-Z]-\d+) was cancell?ed\b"
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", claims=[claim])}),
                load_entry_points=False)
    model = ScriptedModel([calls(("cancel_order", raw)), text("Done."), text("Order A-1 was cancelled.")])  # not quite JSON
    agent = make_agent(model, [cancel_order], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent)
        if RAN != [("cancel", "A-1")]:
            pytest.skip(f"AgentScope did not run it: {RAN}")
        _, final = await run(agent, "did it work?")
    assert (h.last_report(agent).reason, final.get_text_content()) == ("answered", "Order A-1 was cancelled.")


async def refund_default(order_id: str, amount: int = 80) -> str:
    """Refund an order. Args: order_id (str): The order. amount (int): USD, 80 unless said."""
    RAN.append(("refund", str(amount)))
    return f"refunded {amount}"


@pytest.mark.parametrize("later", [False, True])
@pytest.mark.parametrize("said", ["I refunded $80 for A-1.", "For A-1 I refunded $80."])
async def test_a_claim_of_a_defaulted_argument_stands(later: bool, said: str) -> None:
    claim = r"refunded \$(?P<amount>\d[\d,]*(?:\.\d*)?)"
    h = Harness(HarnessConfig(tools={"refund_default": ToolPolicy(role="mutation", claims=[claim])}),
                load_entry_points=False)
    script = [calls(("refund_default", {"order_id": "A-1"})), *([text("Done.")] if later else []), text(said)]
    agent = make_agent(ScriptedModel(script), [refund_default], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent)
        if later:
            _, final = await run(agent, "how much?")
    assert RAN == [("refund", "80")]
    assert (h.last_report(agent).reason, final.get_text_content()) == ("answered", said)


# ------------------------------------------- what replaces what, and when


stops_the_answer = stopping_the_answer("stops_the_answer", "policy_refused", TerminalState.INCOMPLETE, "STOPPED.")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("finish", [False, True])
async def test_an_answer_not_given_is_not_corrected_either(stream: bool, finish: bool) -> None:
    claims = {"cancel_order": ToolPolicy(role="mutation", claims=[r"\bcancell?ed\b"])}
    if finish:  # the answer goes around the finishing tool: the fallback
        h = Harness(HarnessConfig(tools={**FINISH, **claims}, max_enforce_retries=0), load_entry_points=False)
    else:  # a rule stops the run on the answer: its text
        h = Harness(HarnessConfig(tools=claims), hooks=[stops_the_answer], load_entry_points=False)
    model = ScriptedModel([text("Your order was cancelled.")], stream=stream)
    agent = make_agent(model, [cancel_order, submit_answer], h.middlewares())
    items = await drain(agent, UserMsg("user", "q"))
    final = items[-1].get_text_content()
    assert "correct myself" not in final and streamed(items[:-1]).endswith(final)
    if finish:
        assert final.startswith("I could not complete this request (it did not deliver its result")
    else:
        assert final == "STOPPED."


@harness_hook("on_session_end", priority=50, name="completes_at_the_end", kind="observer")
def completes_at_the_end(ctx: object) -> None:
    ctx.stop("good_enough", state=TerminalState.COMPLETED)  # type: ignore[attr-defined]


async def test_a_stop_at_session_end_that_completes_the_run_lets_the_answer_stand() -> None:
    h = Harness(HarnessConfig(), hooks=[completes_at_the_end], load_entry_points=False)
    agent = make_agent(ScriptedModel([text("MODEL answer.")]), [search], h.middlewares())
    _, final = await run(agent)
    report = h.last_report(agent)
    assert final.get_text_content() == "MODEL answer."
    assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "good_enough")


waits_on_the_answer = stopping_the_answer("waits_on_the_answer", "needs_human", TerminalState.WAITING_INPUT)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_stop_that_leaves_a_finishing_run_waiting_lets_the_question_stand(stream: bool) -> None:
    h = Harness(HarnessConfig(tools=FINISH), hooks=[waits_on_the_answer], load_entry_points=False)
    model = ScriptedModel([text("Which colour do you want?")], stream=stream)
    agent = make_agent(model, [search, submit_answer], h.middlewares())
    items = await drain(agent, UserMsg("user", "a mug"))
    assert items[-1].get_text_content() == "Which colour do you want?"
    assert streamed(items[:-1]) == "Which colour do you want?"
    assert h.last_report(agent).terminal_state == TerminalState.WAITING_INPUT
