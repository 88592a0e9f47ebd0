"""Round 118 (red team on rounds 116-117). Round 117 leaves the drift tracker's volatile tokens out of a failure's words first
(``facts._failure_words`` -> ``_words``), and the drift tracker's ``_ID_WORD`` takes any
WHOLE ``\\w+`` word of 20+ ``[a-z0-9_]`` characters with a letter and a digit for an id:
a snake_case field name with a numbered part, ``shipping_address_line1`` (22 characters),
is dropped before the word is split at ``_``. Round 116 fixed exactly this honest run for
``address_line1``/``address_line2``/``phone2`` ("short ones name fields"); with the same
fields spelt a little longer, three different validation failures, each fixed by a
successful mutation, read as one failure three times, and the fourth, honest, checkout is
refused ``repeated_failure`` (hard, never escapes): the order is never placed.

README, repeat_call_gate: "across a successful mutation the streak goes on only if the
call fails in the same words again, the drift tracker's volatile tokens (UUIDs, times,
durations, named ids), numbers, long parts with a digit and parts switching case over and
over left out: the model may have fixed what made it fail". ``line1`` is a short part,
none of the listed tokens; the stated limit is only an id made of words (the other way).
Same scenario as tests/redteam/test_redteam_round116_streak_numbered_fields.py."""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio

CART: dict[str, str] = {}
FIELDS = {"words": ["street", "city", "phone"],
          "long_numbered": ["shipping_address_line1", "shipping_address_line2", "billing_phone_number2"],
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


@pytest.mark.parametrize("spelling", ["words", "long_numbered"])  # control first
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
