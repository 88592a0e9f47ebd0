"""Round 138 a: round 137's "a `Principal` subclass's declared field is its attribute for
`identity_args`" (harness.py `Principal.attr` reads `type(self).model_fields`).

README hook 6 (authorization_gate): "each `identity_args` argument must equal the bound
principal's attribute exactly"; CHANGELOG round 137: "A `Principal` subclass's declared
field is its attribute for `identity_args` (the user was refused its own account)". Round
137 a's test: "Should: the call runs (...), or `acting_for` refuses a principal whose
fields the gate cannot read."

Attack: the application's typed principal declares its account id as pydantic types it
(`account_id: UUID`, or a `str` enum `Region`). `acting_for` accepts it (the report keeps
it as JSON: the UUID's string); the model calls the identity-bound tool with exactly that
string, the only form a tool call's JSON can carry.

What happened: `Principal.attr` now returns the `UUID` object, and the gate's exact
comparison (`type(given) is not type(expected)`) can never hold for any argument the model
can write: the user is refused their own account ("account must be UUID('…')"; the
refusal quotes Python's repr), the tool never runs. Should: the attribute compared as the
report keeps it (its JSON form), or the principal refused at `acting_for`, named.
"""
from __future__ import annotations

from enum import Enum
from typing import Any
from uuid import UUID

import pytest

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

RAN: list[Any] = []
ACCOUNT = UUID("3f2c9a1e-7b4d-4c2a-9e1f-0a1b2c3d4e5f")


class Region(str, Enum):
    EU = "eu"
    US = "us"


class UuidPrincipal(Principal):
    account_id: UUID | None = None


class RegionPrincipal(Principal):
    account_id: Region | None = None


async def account_op(order_id: str, account: str) -> str:
    """Act on the customer's account.

    Args:
        order_id (str): The order.
        account (str): The account.
    """
    RAN.append((order_id, account))
    return "done"


@pytest.mark.parametrize("principal,wire", [
    (UuidPrincipal(user_id="u-42", tenant="acme", account_id=ACCOUNT), str(ACCOUNT)),
    (RegionPrincipal(user_id="u-42", tenant="acme", account_id=Region.EU), "eu"),
], ids=["uuid", "str_enum"])
async def test_a_typed_principal_field_the_model_can_only_write_as_text(principal, wire) -> None:
    RAN.clear()
    h = Harness(HarnessConfig(tools={"account_op": ToolPolicy(identity_args={"account": "account_id"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("account_op", {"order_id": "o-1", "account": wire})), text("Done."), text("x")])
    agent = make_agent(model, [account_op], h.middlewares())
    with h.acting_for(principal):
        await run(agent, "act on order o-1")
    report = h.last_report(agent)
    assert report.principal["account_id"] == wire  # the report keeps it as this text
    told = model.calls[1].last_result
    assert RAN == [("o-1", wire)], told
