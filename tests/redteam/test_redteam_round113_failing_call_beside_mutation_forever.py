"""Round 113 (red team on rounds 111-112). The same call failing the same way, forever, is never stopped once each
round also makes one unrelated successful mutation.

Round 112 b made "a successful mutation in between ends every streak"
(``GuardState.record_call``: ``failures.clear()`` on any mutation's success);
a successful mutation is also progress (drift), so the loop detector
(``rounds_without_progress`` is 0) and the drift ladder never climb either.
A model working through a list of cancellations retries
``refund(order_id="A-1")`` beside each one; the payment processor answers the
same error 12 times. Before the fix ``repeated_failure`` refused the 4th.

README: "Same call failing the same way ``max_identical_failures`` times in a
row: ``repeated_failure`` (never escapes ...)"; "Stops when it should: ...
the same call forever in 6". The cancellations fixed nothing ``refund``
said was wrong (its error is word for word the same each time).
"""
from __future__ import annotations

import random
import string

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

REFUNDS: list[str] = []


ALNUM = string.ascii_letters + string.digits
IDS = random.Random(113)  # seeded: a random id may read as words (a README limit), and the run then goes on
ERRORS = {
    "word for word": lambda: "payment processor: card ending 4242 is closed; refund cannot be issued",
    "a request id": lambda: f"Request req_{''.join(IDS.choice(ALNUM) for _ in range(14))}: Your card was declined.",
}
RAISED: list[str] = []


async def refund(order_id: str) -> str:
    """Refund an order's payment.

    Args:
        order_id (str): The order.
    """
    REFUNDS.append(order_id)
    raise RuntimeError(ERRORS[RAISED[0]]())


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id} cancelled"


@pytest.mark.parametrize("error", list(ERRORS))
async def test_the_same_failing_refund_beside_unrelated_cancellations_is_stopped(error: str) -> None:
    REFUNDS.clear()
    RAISED[:] = [error]
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation"),
                                     "cancel_order": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    rounds = [calls(("refund", {"order_id": "A-1"}), ("cancel_order", {"order_id": f"B-{i}"})) for i in range(12)]
    model = ScriptedModel([*rounds, text("Done.")])
    agent = make_agent(model, [refund, cancel_order], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    await run(agent, "cancel orders B-0 to B-11 and refund A-1")
    report = h.last_report(agent)
    assert len(REFUNDS) <= 3 + 1, (
        f"refund(A-1) failed the same way {len(REFUNDS)} times and was never stopped; "
        f"report: {report.terminal_state.value}/{report.reason}, refusals {report.refusals}")
