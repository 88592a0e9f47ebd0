"""Round 137 a: ``sentinels.unusable_by`` (round 136 b) reads a principal's attribute
with ``Principal.attr``, which knows only ``user_id``, ``tenant`` and ``model_extra``.

README Security / hook 6 (authorization_gate): "each ``identity_args`` argument must equal
the bound principal's attribute exactly"; README Security (round 136 b): permission_denied
"at once" only for a tool "the caller cannot use whatever its arguments (...; identity-bound
with no principal bound, or one without the attribute)". CHANGELOG round 136 a treats a
``Principal`` subclass's declared fields as the principal's attributes ("``acting_for``
checks every Principal field (subclass fields, ...)"), and the report keeps them
(``RunReport.principal``).
"""
from __future__ import annotations

from typing import Any

import pytest

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

RAN: list[Any] = []


async def account_op(order_id: str, account: str) -> str:
    """Act on the customer's account.

    Args:
        order_id (str): The order.
        account (str): The account.
    """
    RAN.append((order_id, account))
    return "done"


class AppPrincipal(Principal):
    """The application's typed principal: its account id a declared field (JSON data)."""

    account_id: str | None = None


async def test_a_typed_principals_own_identity_call_is_refused_as_if_it_lacked_the_attribute() -> None:
    """Attack: ``AppPrincipal(Principal)`` declares ``account_id: str`` (the typed form
    round 136 a accepts and checks); the principal is bound with ``account_id="acc-1"``;
    the tool's ``identity_args`` is ``{"account": "account_id"}``; the model calls
    ``account_op`` with exactly ``account="acc-1"``.

    Happened: ``Principal.attr("account_id")`` is ``None`` (a declared field is not in
    ``model_extra``), so ``unusable_by`` refuses: the model is told "account_op needs the
    signed-in user's account_id, which this user does not have. Do not retry", the tool
    never runs, while the report's ``principal`` shows ``account_id: acc-1``. Should: the
    call runs (the argument equals the bound principal's attribute exactly), or
    ``acting_for`` refuses a principal whose fields the gate cannot read."""
    RAN.clear()
    h = Harness(HarnessConfig(tools={"account_op": ToolPolicy(identity_args={"account": "account_id"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("account_op", {"order_id": "o-1", "account": "acc-1"})), text("Done."), text("x")])
    agent = make_agent(model, [account_op], h.middlewares())
    with h.acting_for(AppPrincipal(user_id="u-42", tenant="acme", account_id="acc-1")):
        await run(agent, "act on order o-1")
    report = h.last_report(agent)
    assert report.principal["account_id"] == "acc-1"  # the report knows the attribute
    told = model.calls[1].last_result
    assert RAN == [("o-1", "acc-1")], (told, report.refusals)
    assert "permission_denied" not in told
