"""Round 156 a: README "The hooks", row 15 truncate_result: "Caps a result at
`result_max_tokens`: head and tail kept, a marker with a ref to the full text in the run's
artifacts; for errors the first error line is kept (its first 500 characters)."

Attack: a tool raises with a long first line that names no error word (AgentScope writes the
exception's message alone, without its class, so `LookupError("no match for A-1 among: ...")`
reaches the harness as "no match for A-1 among: ..."), followed by a stack of detail lines; the
result is over `result_max_tokens`.

Happened: the error's first line is cut with the head (about 160 characters reach the model); the
harness keeps only a line that contains "error", "exception", "traceback" or "failed"
(`context_shaping._ERROR_LINE`), so nothing of the first line past the head is kept.
Should: the first line of an error result (its first 500 characters) is kept.
"""
from __future__ import annotations

from typing import Any

from agentscope.tool import FunctionTool, Toolkit
from scripted import ALLOW, RAN, make_agent, run

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.testing import ScriptedModel, calls, text


def tk(*fns: Any) -> Toolkit:
    return Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in fns])


ORDERS = ", ".join(f"A-{i}" for i in range(2, 200))


async def failing(order_id: str) -> str:
    """Look up an order in the legacy system. Args: order_id (str): The order."""
    RAN.append("failing")
    raise LookupError(f"no match for {order_id} among: {ORDERS}\n" + "  at legacy.lookup line 12\n" * 300)


async def test_error_result_keeps_its_first_line_first_500_chars() -> None:
    """Row 15: truncate_result caps a result at result_max_tokens: head and tail kept; "for errors the
    first error line is kept (its first 500 characters)". Attack: a tool error whose first line is
    long and does not contain the words error/exception/failed (a LookupError's message, as AgentScope
    writes it: the message alone). Happened: only the head's ~160 characters of that line reach the
    model; the first 500 characters are not kept."""
    h = Harness(HarnessConfig(result_max_tokens=64), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("failing", {"order_id": "A-1"})), text("It failed.")])
    agent = make_agent(model, h.instrument(tk(failing)), h.middlewares())
    await run(agent, "go")
    told = model.calls[1].last_result
    assert "omitted" in told  # it was truncated
    first_line = f"no match for A-1 among: {ORDERS}"
    assert first_line[:500] in told, told
