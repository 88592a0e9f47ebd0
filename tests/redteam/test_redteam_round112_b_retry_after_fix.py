"""Red team r112 (seq): a call retried after the model fixed what made it
fail is refused for good as a ``repeated_failure``.

An honest checkout: ``place_order(cart_id)`` fails three times, each time
for a *different* reason the tool names (the cart is empty, then no address,
then no payment method), and after each failure the model fixes exactly that
with a successful mutation (``add_item``, ``set_address``, ``add_payment``).
The fourth ``place_order`` would succeed, but the harness refuses it for the
rest of the run ("This exact call failed 3 times in a row ... Do not retry
it"), hard: it never escapes, and the run cannot place the order.

README: "Same call failing the same way ``max_identical_failures`` times:
``repeated_failure``" and "A productive 30-round run is never stopped";
DESIGN §1.5/§3: the safety variant judges "an exact fact". Three failures
for three different reasons, each followed by a successful mutation the
failure asked for, are neither "the same way" nor "in a row" (state changed
in between), and each round made progress (a successful mutation is progress,
README hook 20).
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

STATE: dict[str, bool] = {}


async def place_order(cart_id: str) -> str:
    """Place the order of a cart.

    Args:
        cart_id (str): The cart.
    """
    if not STATE.get("item"):
        raise RuntimeError("cart is empty: add an item first")
    if not STATE.get("address"):
        raise RuntimeError("no shipping address: set one first")
    if not STATE.get("payment"):
        raise RuntimeError("no payment method: add one first")
    STATE["placed"] = True
    return f"order for cart {cart_id} placed: #O-5521"


async def add_item(cart_id: str, sku: str) -> str:
    """Add an item.

    Args:
        cart_id (str): The cart.
        sku (str): The item.
    """
    STATE["item"] = True
    return f"added {sku} to {cart_id}"


async def set_address(cart_id: str, address: str) -> str:
    """Set the shipping address.

    Args:
        cart_id (str): The cart.
        address (str): The address.
    """
    STATE["address"] = True
    return f"address of {cart_id} set to {address}"


async def add_payment(cart_id: str, card_last4: str) -> str:
    """Add a payment method.

    Args:
        cart_id (str): The cart.
        card_last4 (str): The card.
    """
    STATE["payment"] = True
    return f"card ending {card_last4} added to {cart_id}"


async def test_a_call_retried_after_each_cause_was_fixed_is_not_refused_for_good() -> None:
    STATE.clear()
    config = HarnessConfig(tools={
        "place_order": ToolPolicy(role="mutation"),
        "add_item": ToolPolicy(role="mutation"),
        "set_address": ToolPolicy(role="mutation"),
        "add_payment": ToolPolicy(role="mutation"),
    })
    h = Harness(config, load_entry_points=False)
    place = calls(("place_order", {"cart_id": "C-1"}))
    model = ScriptedModel([
        place, calls(("add_item", {"cart_id": "C-1", "sku": "mug-red"})),
        place, calls(("set_address", {"cart_id": "C-1", "address": "1 Main St, Springfield"})),
        place, calls(("add_payment", {"cart_id": "C-1", "card_last4": "4242"})),
        place, text("Your order #O-5521 is placed."),
    ])
    agent = make_agent(model, [place_order, add_item, set_address, add_payment], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    _, final = await run(agent, "buy the red mug and ship it to 1 Main St, card 4242")
    report = h.last_report(agent)
    told = model.calls[7].last_result
    assert STATE.get("placed"), f"the order was never placed; the model was told: {told!r}"
    assert "repeated_failure" not in report.refusals, report.refusals
    assert report.terminal_state.value == "completed", (report.terminal_state, report.reason)
