"""Round 115 (red team on round 114). Round 115 (red team on round 114). Three different failures of one call,
each fixed by a successful mutation in between, are taken for "the same
failure three times": the fourth, honest, attempt is refused
``repeated_failure`` (hard, never escapes) and the checkout never happens.

Round 114 leaves every word with a digit or an underscore out of the
failure-streak comparison (``GuardState.record_outcome``, ``_VOLATILE_WORD``)
so that a request id (``req_8mxbV2dPuPSfCU``) cannot restart the streak. But
the field a validation error names is written in snake_case: "missing
shipping_address", then (the address set) "missing billing_address", then
"missing payment_method" all read "cannot check out cart c missing". The model
fixed what made the call fail each time, and the call would now succeed.
The same tool naming its fields in camelCase (``shippingAddress``) is let
through (control): only the spelling of a field name decides.

README, repeat_call_gate: "Same call failing the same way
`max_identical_failures` times in a row: `repeated_failure` (never escapes;
across a successful mutation the streak goes on only if the call fails in the
same words again, words with a digit or an underscore (ids, times, amounts)
left out: the model may have fixed what made it fail)"."""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio

CART: dict[str, str] = {}
FIELDS = {"snake_case": ["shipping_address", "billing_address", "payment_method"],
          "camelCase": ["shippingAddress", "billingAddress", "paymentMethod"]}
SPELLING: list[str] = []
CHECKED_OUT: list[str] = []


async def checkout(cart_id: str) -> str:
    """Check out a cart.

    Args:
        cart_id (str): The cart.
    """
    for field in FIELDS[SPELLING[0]]:
        if field not in CART:
            raise ValueError(f"cannot check out cart {cart_id}: missing {field}")
    CHECKED_OUT.append(cart_id)
    return f"cart {cart_id} checked out: order placed"


async def set_cart_field(cart_id: str, field: str, value: str) -> str:
    """Set a field of a cart.

    Args:
        cart_id (str): The cart.
        field (str): The field.
        value (str): Its value.
    """
    CART[field] = value
    return f"cart {cart_id}: {field} set"


@pytest.mark.parametrize("spelling", ["camelCase", "snake_case"])  # control first
async def test_a_fixed_validation_failure_does_not_continue_the_streak(spelling: str) -> None:
    CART.clear(), CHECKED_OUT.clear()
    SPELLING[:] = [spelling]
    shipping, billing, payment = FIELDS[spelling]
    h = Harness(HarnessConfig(tools={"checkout": ToolPolicy(role="mutation"),
                                     "set_cart_field": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("checkout", {"cart_id": "C-1"})),
        calls(("set_cart_field", {"cart_id": "C-1", "field": shipping, "value": "1 Main St"})),
        calls(("checkout", {"cart_id": "C-1"})),
        calls(("set_cart_field", {"cart_id": "C-1", "field": billing, "value": "1 Main St"})),
        calls(("checkout", {"cart_id": "C-1"})),
        calls(("set_cart_field", {"cart_id": "C-1", "field": payment, "value": "card on file"})),
        calls(("checkout", {"cart_id": "C-1"})),
        text("Your order is placed."),
    ])
    agent = make_agent(model, [checkout, set_cart_field], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    await run(agent, "check out my cart C-1")
    report = h.last_report(agent)
    last = tool_messages(model.calls[-1])[-1]
    assert CHECKED_OUT == ["C-1"], (
        f"three different failures, each fixed, taken for one: the 4th checkout was told {last!r}; "
        f"report {report.terminal_state.value}/{report.reason}, refusals {report.refusals}")
