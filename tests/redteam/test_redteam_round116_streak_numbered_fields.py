"""Round 116 (red team on round 115). An honest run refused: three different validation failures of one call, each
fixed by a successful mutation in between, are taken for "the same failure three
times" because what tells them apart is a word with a digit: the field
``address_line1``, then ``address_line2``, then ``phone2`` (or line items 1, 2,
3). The fourth, honest, checkout is refused ``repeated_failure`` (hard, never
escapes) and the order is never placed. The same tool naming its fields without
digits (control) checks out. Round 115 fixed this for snake_case names; names
with digits are as common (street1/street2, address_line1/2, line items).

README, repeat_call_gate: "across a successful mutation the streak goes on only if
the call fails in the same words again, words with a digit or switching case over
and over (ids, times, amounts) left out: the model may have fixed what made it
fail"."""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio

CART: dict[str, str] = {}
FIELDS = {"words": ["street", "city", "phone"],
          "numbered": ["address_line1", "address_line2", "phone2"]}
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


@pytest.mark.parametrize("spelling", ["words", "numbered"])  # control first
async def test_fixed_numbered_field_failures_are_not_one_streak(spelling: str) -> None:
    CART.clear(), CHECKED_OUT.clear()
    SPELLING[:] = [spelling]
    a, b, c = FIELDS[spelling]
    h = Harness(HarnessConfig(tools={"checkout": ToolPolicy(role="mutation"),
                                     "set_cart_field": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("checkout", {"cart_id": "C-1"})),
        calls(("set_cart_field", {"cart_id": "C-1", "field": a, "value": "1 Main St"})),
        calls(("checkout", {"cart_id": "C-1"})),
        calls(("set_cart_field", {"cart_id": "C-1", "field": b, "value": "Apt 4"})),
        calls(("checkout", {"cart_id": "C-1"})),
        calls(("set_cart_field", {"cart_id": "C-1", "field": c, "value": "+1 555 0100"})),
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
