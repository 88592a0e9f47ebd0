"""Red team, round 102 (a): round 101 applies ``quoted_pii`` to the whole of
a gate's refusal (``runner._refusal_text``), the harness's own words too.
``authorization_gate`` tells the model the signed-in user's value of an
``identity_args`` argument ("user_id must be 'alice.w@example.com'"); with
``HarnessConfig.pii = {"email": "redact"}`` that becomes "must be
'[pii:email]'": the model is never told the value, so a signed-in user whose
id is an email can never be served (each retry is refused again). README
(Limits): "An ``identity_args`` argument the model leaves out is refused like
a wrong one; the sentinel tells the model the signed-in user's value" (as
``bad_arguments`` still does, unfiltered).

Real ``Agent``, real tool in a real ``Toolkit``."""

from __future__ import annotations

from scripted import ScriptedModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy

ALICE = Principal(user_id="alice.w@example.com", tenant="acme")


async def lookup_order(order_id: str, user_id: str = "") -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
        user_id (str): Whose order.
    """
    return f"order {order_id}: shipped"


async def test_an_identity_refusal_tells_the_model_the_signed_in_users_value() -> None:
    config = HarnessConfig(pii={"email": "redact"},
                           tools={"lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})})
    h = Harness(config, load_entry_points=False)
    model = ScriptedModel([calls(("lookup_order", {"order_id": "A-1"})), text("Sorry.")])  # user_id left out
    agent = make_agent(model, [lookup_order], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "where is my order A-1?")
    said = model.calls[1].last_result
    assert "permission_denied" in said
    assert "alice.w@example.com" in said, f"the model was not told the signed-in user's value: {said!r}"
