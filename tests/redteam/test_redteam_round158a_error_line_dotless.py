"""Round 158 a: round 157 c's sliced _error_line reads words by str.lower(), where the old
pattern (re.IGNORECASE) also read a dotless i as i."""
from __future__ import annotations

from typing import Any

from agentscope.tool import FunctionTool, Toolkit
from scripted import ALLOW, make_agent, run

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.testing import ScriptedModel, calls, text


def tk(*fns: Any) -> Toolkit:
    return Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in fns])


LINE = "odeme servisi: charge faıled, card declined by issuer (code 51)"  # "FAILED".lower() in tr-TR


async def pay(order_id: str) -> str:
    """Pay an order. Args: order_id (str): The order."""
    raise RuntimeError("calling the payment gateway\n" + "  at gw.call line 12\n" * 300 + LINE + "\n"
                       + "  at gw.retry line 40\n" * 300)


async def test_a_turkish_lowercased_failed_line_is_kept() -> None:
    """README hooks table, truncate_result: "for errors the first error line is kept (its
    first 500 characters)"; context_shaping: "A line naming one of these, in any case, reads
    as an error's line". Attack: an upstream in a Turkish locale lowercases FAILED to
    "faıled" (dotless i). Before round 157 c, `^.*(error|...|failed).*$` with re.IGNORECASE
    matched it (Python's sre folds ı with i); the sliced search reads `piece.lower()` and
    finds no word. Happened: the marker keeps the first line ("calling the payment gateway")
    and the model never reads why the charge failed."""
    h = Harness(HarnessConfig(result_max_tokens=64), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("pay", {"order_id": "A-1"})), text("It failed.")])
    agent = make_agent(model, h.instrument(tk(pay)), h.middlewares())
    await run(agent, "go")
    told = model.calls[1].last_result
    assert "omitted" in told
    assert "card declined by issuer" in told, told
