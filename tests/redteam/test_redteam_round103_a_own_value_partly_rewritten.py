"""Red team, round 103 (a): round 102 keeps the signed-in user's own
identity values in a gate's refusal (``runner._own_values``), but compares
each personal-data *finding* with them exactly (``outputs.quoted_shown``:
``f.value not in own``). The email detector does not take an apostrophe
into an address, so for ``liam.o'brien@example.com`` (a legal, common
address) it finds ``brien@example.com``: no own value, so rewritten. The
``permission_denied`` sentinel then says ``user_id must be
"liam.o'[pii:email]"``: the model is never told the value, and that user
can never be served (each retry is refused again). README (Personal data):
a refusal is rewritten "except the signed-in user's own identity values,
which a ``permission_denied`` sentinel tells the model to send".

Real ``Agent``, a real tool in a real ``Toolkit``."""

from __future__ import annotations

from scripted import ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy

OWN = "liam.o'brien@example.com"
LIAM = Principal(user_id=OWN, tenant="acme")


async def lookup_order(order_id: str, user_id: str = "") -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
        user_id (str): Whose order.
    """
    return f"order {order_id}: shipped"


async def test_an_identity_refusal_tells_the_model_the_whole_signed_in_value() -> None:
    config = HarnessConfig(pii={"email": "redact"},
                           tools={"lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})})
    h = Harness(config, load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup_order", {"order_id": "A-1"})), text("Sorry.")])  # user_id left out
    agent = make_agent(model, [lookup_order], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(LIAM):
        await run(agent, "where is my order A-1?")
    said = model.calls[1].last_result
    assert "permission_denied" in said
    assert OWN in said, f"the model was not told the signed-in user's value: {said!r}"


def test_another_address_containing_the_users_short_value_is_still_rewritten() -> None:
    """The kept span is the user's value itself: an address that merely
    contains it (the tenant ``acme`` in ``bob@acme.com``) is another's."""
    from agentscope_harness.outputs import quoted_shown

    own = frozenset({"alice@acme.com", "acme"})
    text = "user_id must be 'alice@acme.com', not 'bob@acme.com' (tenant acme)"
    shown = quoted_shown(text, {"email": "redact"}, b"", own)
    assert shown == "user_id must be 'alice@acme.com', not '[pii:email]' (tenant acme)", shown
