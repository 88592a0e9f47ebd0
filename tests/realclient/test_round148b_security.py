"""Round 148 b (scenarios: README "Security: the guarantees and their limits", as a bank's
reviewer writes them; about 25 held): AgentScope's real OpenAIChatModel against the test
server. Facts a tool declares in its metadata's ``harness`` entry (as the README tells tool
authors to) streamed to the UI and stayed in the context raw, and ``RunReport.facts`` kept
them as written; the ``bad_arguments`` guide quoted a bound identity value that is a secret
(a session JWT, a ``secret_values`` entry) to the provider, where ``permission_denied``
redacts the same value. Each test fails on the code before its fix."""

from __future__ import annotations

import json

from agentscope.event import ToolResultEndEvent
from agentscope.message import TextBlock
from agentscope.tool import FunctionTool, ToolChunk, Toolkit
from scripted import ALICE, ALLOW, make_agent, run
from server import Reply
from side_kit import model

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy

EMAIL = "jane.doe@examplebank.com"
SECRET = "vault-pw-Zq9Zx9R7"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1LTQyIn0.c2lnbmF0dXJlLXZhbHVl"


async def locate(cid: str) -> ToolChunk:
    """Locate a customer.

    Args:
        cid (str): The customer id.
    """
    return ToolChunk(content=[TextBlock(text=f"customer {cid} located")],
                     metadata={"harness": {"facts": [f"customer {EMAIL} located", f"session {SECRET} {JWT}"]}})


async def balance(account: str, token: str) -> str:
    """Balance.

    Args:
        account (str): The account.
        token (str): The customer's session token.
    """
    return "balance 100"


def _agent(h: Harness, server, fn) -> object:
    return make_agent(model(server, "gpt-test"), h.instrument(Toolkit(tools=[FunctionTool(fn, permission=ALLOW)])),
                      h.middlewares())


async def test_facts_a_tool_declares_are_redacted_in_the_stream_the_context_and_the_report(server) -> None:
    """README "Secrets": a result's metadata is redacted (its personal data as the tool's
    ``pii`` says): it streams to the UI in the result's end event and stays in the context;
    "Personal data": reports carry none unless ``record_raw``."""
    h = Harness(HarnessConfig(secret_values=[SECRET], tools={"locate": ToolPolicy(role="lookup", pii={"email": "redact"})}),
                load_entry_points=False, environ={})
    server.plan(Reply(tool_calls=[("locate", {"cid": "c1"})]), Reply(text="Located."))
    agent = _agent(h, server, locate)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "find c1")
    ends = json.dumps([e.metadata for e in events if isinstance(e, ToolResultEndEvent)])
    context = json.dumps([m.model_dump(mode="json") for m in agent.state.context])
    report = h.last_report(agent)
    for value in (SECRET, JWT, EMAIL):
        assert value not in ends and value not in context and value not in report.to_json(), value
    assert "located" in ends and len(report.facts) == 2  # declared, kept, redacted


async def test_the_bad_arguments_guide_never_quotes_a_secret_identity_value(server) -> None:
    """README "Secrets": JWTs and exact values never reach the provider; the guide's
    template gives the bound value as the authorization gate shows it (redacted)."""
    for value, attribute, config in (
        (JWT, "session_jwt", {}),
        (SECRET, "pin", {"secret_values": [SECRET]}),
    ):
        server.requests.clear()
        h = Harness(HarnessConfig(**config, tools={"balance": ToolPolicy(role="lookup", identity_args={"token": attribute})}),
                    load_entry_points=False, environ={})
        server.plan(Reply(tool_calls=[("balance", {"account": "CHK-1"})]), Reply(text="ok"))
        agent = _agent(h, server, balance)
        with h.acting_for(Principal(user_id="u-42", tenant="bank", **{attribute: value})):
            await run(agent, "my balance")
        read = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"][-1]
        assert "[harness:bad_arguments]" in read and '"token": "[redacted' in read, read
        assert value not in json.dumps(server.requests), attribute
