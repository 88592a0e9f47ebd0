"""Round 136a: round 135's "a Principal attribute that is no JSON data is refused at
construction, named" is a check of ``model_extra`` in a validator: a principal whose
application object is a declared field of a subclass, or was put in by ``model_copy``
(pydantic's way to derive a per-request principal from the session's), passes it.

README "Use it": "extra attributes are data (JSON): an application object is refused,
named"; README "What the caller receives": a model that answered: ``completed``, "the
final ``Msg``: the model's text"; DESIGN §3.1 ``RunReport``: JSON-serialisable.

Attack: ``AppPrincipal(Principal)`` with a typed ``account: Account`` field
(``arbitrary_types_allowed``), or ``ALICE.model_copy(update={"account": Account(...)})``.
What happened: nothing refuses it; the reply raises ``PydanticSerializationError`` from
``principal_dict`` as the run settles (round 135's original symptom): the caller gets no
answer and no report is kept. Should: refused, named (at construction or at
``acting_for``), or the reply answers and the report keeps the attribute as text.
"""
from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ConfigDict

from agentscope_harness import Harness, HarnessConfig, Principal
from tests.scripted import ScriptedModel, make_agent, run, text

pytestmark = pytest.mark.asyncio


class Account:
    """An application's own object (an ORM row)."""

    def __init__(self, plan: str) -> None:
        self.plan = plan


class AppPrincipal(Principal):
    """The app's typed principal."""

    model_config = ConfigDict(extra="allow", frozen=True, arbitrary_types_allowed=True)
    account: Account | None = None


MAKE = {
    "subclass_field": lambda: AppPrincipal(user_id="u-42", tenant="acme", account=Account("gold")),
    "model_copy": lambda: Principal(user_id="u-42", tenant="acme").model_copy(update={"account": Account("gold")}),
}


@pytest.mark.parametrize("how", sorted(MAKE))
async def test_an_application_object_in_a_principal_is_refused_or_harmless(how: str) -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([text("Hello.")]), [], h.middlewares())
    msg: Any = None
    try:
        principal = MAKE[how]()
        with h.acting_for(principal):
            _, msg = await run(agent)
    except ValueError as exc:
        if "account" in str(exc) and "not data" in str(exc):
            return  # refused, named: as round 135 promised
        raise
    assert msg is not None and msg.get_text_content() == "Hello."
    assert h.last_report(agent) is not None


@pytest.mark.parametrize(("attrs", "where"), [
    ({"session": Account("gold")}, "'attrs'['session']: a Account"),
    ({"a": [1, {"b": Account("gold")}]}, "'attrs'['a'][1]['b']: a Account"),
])
async def test_an_application_object_inside_an_attribute_is_named_where_it_is(attrs: Any, where: str) -> None:
    """Round 165 a (doc note): an object inside ``attrs={...}`` was named as the whole
    attribute ("a dict is not data"), though a dict of plain values is data: the error
    points at the value that is not."""
    with pytest.raises(ValueError, match="Principal attribute " + re.escape(where)):
        Principal(user_id="u-42", attrs=attrs)
