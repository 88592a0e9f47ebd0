"""Three different failures of one call, each fixed by a successful mutation
in between, taken for "the same failure three times": the fourth, honest,
attempt was refused ``repeated_failure`` (hard, never escapes) and the
checkout never happened. What tells the failures apart is the field each
names, and the failure-streak comparison (``facts._failure_words``) left it
out as volatile, spelt:

- round 115: in snake_case (``shipping_address``): round 114 left out every
  word with an underscore (camelCase let through: the control);
- round 116: with a digit (``address_line1``, ``phone2``): round 115 left out
  every word with one;
- round 118: long, with a digit (``shipping_address_line1``): round 117 read it
  whole through the drift tracker's id rule (20+ characters with a digit);
- round 119: camelCase of three words (``shippingPostCode``): round 118 counted
  its case switches (four) as a random id's;
- round 120: camelCase with short words (``shipToId``, ``taxIDs``): round 119
  took two short words of three for a random id's;
- round 121: with no vowel (``lxml``, ``nltk``): round 120 took any four
  letters with no vowel for a pod's random suffix.

README, repeat_call_gate: "across a successful mutation the streak goes on
only if the call fails in the same words again, ... left out: the model may
have fixed what made it fail"."""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio

CART: dict[str, str] = {}
FIELDS = {"camelCase": ["shippingAddress", "billingAddress", "paymentMethod"],  # control
          "words": ["street", "city", "phone"],  # control
          "snake_case": ["shipping_address", "billing_address", "payment_method"],
          "numbered": ["address_line1", "address_line2", "phone2"],
          "long_numbered": ["shipping_address_line1", "shipping_address_line2", "billing_phone_number2"],
          "camel_three_words": ["shippingPostCode", "billingPostCode", "paymentMethodId"],
          "camel_short_word": ["shipToId", "billToId", "soldToId"],
          "camel_acronym": ["taxIDs", "vatIDs", "dunsIDs"],
          "no_vowel": ["lxml", "nltk", "tqdm"]}
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


@pytest.mark.parametrize("spelling", list(FIELDS))
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
