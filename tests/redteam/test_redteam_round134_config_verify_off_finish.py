"""Round 134 (a): ``verify`` on a tool whose role is not ``finish`` constructs fine
and is never called.

README, Configuration: "invalid values fail at construction with the field named
... A config that would silently disable a limit is invalid too" (``units=0`` on a
tool naming ledgers, ``waivable_facts`` outside ``requires_facts``,
``require_finish_tool=True`` without a finish tool are all refused for doing
nothing). README table: ``tools``: "per tool: ... ``verify`` ..."; README:
"``verify`` returns what is *missing* ... anything else fails the ... call
(``verification_failed``)". DESIGN §3.1: ``verify: Callable | None`` (finish tools).

Attack: ``ToolPolicy(role="mutation", verify=...)`` on a refund tool, the check
the operator relies on to catch a refund that did not really go through (no
confirmation number). ``mark_terminal`` reads ``verify`` only for role
``finish``: the check is never called, the unconfirmed refund stays a success,
and the answer claiming it passes the claims audit. Construction, ``Harness``
and ``instrument`` all succeed, silently.

Real ``Agent``, real tool in a real instrumented ``Toolkit``, scripted model."""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit
from pydantic import ValidationError

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.errors import HarnessConfigError
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

VERIFIED: list[str] = []


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    return f"refund for {order_id} queued (no confirmation yet)"


def needs_confirmation(out: str) -> str | None:
    VERIFIED.append(out)
    return None if "CONF-" in out else "no confirmation number: the refund is not confirmed"


async def test_verify_on_a_mutation_is_refused_or_applied() -> None:
    VERIFIED.clear()
    try:
        h = Harness(HarnessConfig(tools={"refund": ToolPolicy(
            role="mutation", verify=needs_confirmation,
            claims=[r"order (?P<order_id>[\w-]+) (?:was |has been )?refunded"],
        )}), load_entry_points=False, environ={})
    except (ValidationError, HarnessConfigError) as exc:  # the standard: refused, naming the field
        assert "verify" in str(exc)
        return
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("Order A-1 has been refunded.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), h.middlewares())
    _, final = await run(agent, "refund A-1")
    report = h.last_report(agent)
    codes = [d.code for d in report.decisions]
    assert VERIFIED and "verification_failed" in codes, (
        f"verify was called {len(VERIFIED)} times; decisions={codes}; "
        f"the user received {final.get_text_content()!r} ({report.terminal_state.value})"
    )
