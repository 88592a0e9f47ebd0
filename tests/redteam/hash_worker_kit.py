"""Shared parts of the hash-across-workers test: tools, config, and worker B's
main (run as a separate process: another worker)."""

from __future__ import annotations

import asyncio
import json
import re
import sys

from agentscope.event import RequireUserConfirmEvent
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from agentscope_harness.stores import SQLiteStore

EMAIL = "alice.w@example.com"
TAG = re.compile(r"\[pii:email:[0-9a-f]+\]")
ALICE = Principal(user_id="u-42", tenant="acme")


async def find_customer(name: str) -> str:
    """Find a customer by name.

    Args:
        name (str): The name.
    """
    return f"customer {name}: {EMAIL}"


async def pay_out(customer: str, amount: int) -> str:
    """Pay a customer.

    Args:
        customer (str): Who.
        amount (int): How much.
    """
    return f"paid {amount} to {EMAIL}"


def worker(db: str) -> Harness:
    config = HarnessConfig(store=SQLiteStore(db), tools={
        "find_customer": ToolPolicy(role="lookup", pii={"email": "hash"}),
        "pay_out": ToolPolicy(role="mutation", pii={"email": "hash"},
                              ask_when=lambda args: "over 50" if args["amount"] > 50 else None),
    })
    return Harness(config, load_entry_points=False, environ={})


def toolkit(h: Harness) -> Toolkit:
    from tests.scripted import tool
    return h.instrument(Toolkit(tools=[tool(find_customer), tool(pay_out)]))


async def resume(db: str, state_json: str, asked_json: str) -> dict:
    from tests.scripted import ScriptedModel, confirm, drain, make_agent, text, tool_messages
    h = worker(db)
    model = ScriptedModel([text("Paid.")])
    agent = make_agent(model, toolkit(h), h.middlewares(), state=AgentState.model_validate_json(state_json))
    asked = RequireUserConfirmEvent.model_validate_json(asked_json)
    with h.acting_for(ALICE):
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    report = h.last_report(agent)
    results = tool_messages(model.calls[-1])
    return {"end": [report.terminal_state.value, report.reason],
            "tags": [t for r in results for t in TAG.findall(r)]}


if __name__ == "__main__":
    db, state_path, asked_path = sys.argv[1:4]
    with open(state_path) as f:
        state_json = f.read()
    with open(asked_path) as f:
        asked_json = f.read()
    print(json.dumps(asyncio.run(resume(db, state_json, asked_json))))
