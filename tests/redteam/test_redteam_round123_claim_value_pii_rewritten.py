"""Round 123 (personal data). A claim whose value HarnessConfig.pii rewrote is compared, rewritten, with
the call's real argument: a refund that did succeed, with exactly the email the
answer names, is "corrected" as one that did not.

README (final_answer_audit): "a claim pattern's named groups name the tool's
arguments ...: then every such claim needs a successful call with those values
... a claimed value and a call's argument compare as the user reads them".
The user reads the call's streamed arguments rewritten by the same
HarnessConfig.pii (README, Configuration: "streamed arguments are shown
rewritten"), so both sides read `[pii:email:<tag>]` (hash) / `[pii:email]`.
The audit (safety.audit_answer) reads claims from the *pii-rewritten* answer
(`cleaned`) while `_Successes` indexes the *raw* arguments.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

EMAIL = "alice.w@example.com"
DONE: list[tuple[str, str]] = []


async def refund(order_id: str, email: str) -> str:
    """Refund an order to the customer's account.

    Args:
        order_id (str): The order.
        email (str): The account to refund to.
    """
    DONE.append((order_id, email))
    return f"refunded {order_id}"


@pytest.mark.parametrize("mode", ["hash", "redact", "mask"])
async def test_a_true_claim_about_a_rewritten_value_stands(mode: str) -> None:
    DONE.clear()
    policy = ToolPolicy(role="mutation",
                        claims=[r"order (?P<order_id>[\w-]+) was refunded to (?P<email>\S+?)\.?(?:\s|$)"])
    h = Harness(HarnessConfig(pii={"email": mode}, tools={"refund": policy}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "A-1", "email": EMAIL})),
                           text(f"Done: order A-1 was refunded to {EMAIL}.")])
    agent = make_agent(model, [refund], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        _, final = await run(agent, "refund order A-1 to my account")
    assert DONE == [("A-1", EMAIL)]  # the very call ran, with the very value
    report = h.last_report(agent)
    answer = final.get_text_content()
    assert (report.terminal_state.value, report.reason) == ("completed", "answered"), (
        report.reason, answer)
    assert "did not succeed" not in answer and "not" not in answer.lower().split("refunded")[0], answer
