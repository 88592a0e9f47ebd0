"""Scenario round 135 (a): a ``Principal`` carrying an application object as one of
its ``**attrs`` makes every reply raise.

DESIGN §3.1: "``Principal(user_id: str, tenant: str | None = None, allowed_tools:
set[str] | None = None, **attrs)``"; README "Use it": ``harness.acting_for(Principal(...))
# from your authenticated session``. README "What the caller receives": a model that
answered, no finishing tool required: ``completed`` (``answered``), "the final ``Msg``:
the model's text, audited"; "any other exception: ``failed``". DESIGN §3.1 ``RunReport``:
"JSON-serialisable"; README ``on_report``: "callback for each settled ``RunReport``".

Attack: the web app binds its authenticated session's principal with an extra
attribute that is an application object (``Principal(user_id="u-42", tenant="acme",
account=Account("acme-gold"))``), a plain class, not JSON data. The model just
answers "Hello.".
Happened: the reply raises ``PydanticSerializationError: Unable to serialize unknown
type: <class '...Account'>`` from ``run_state.principal_dict`` (``model_dump(mode="json")``)
while the run settles: the caller receives no answer at all, no report is kept and
``on_report`` never sees the run. A free ``**attrs`` value is turned into a crash of
the user's reply instead of being recorded as text (or refused when the principal is
bound).

Real Agent, scripted model.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, Principal
from tests.scripted import ScriptedModel, make_agent, run, text


class Account:
    """An application's own object (an ORM row, a session's account)."""

    def __init__(self, plan: str) -> None:
        self.plan = plan

    def __str__(self) -> str:
        return f"account {self.plan}"


@pytest.mark.asyncio
async def test_control_json_attrs() -> None:  # holds
    h = Harness(HarnessConfig(), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("Hello.")]), [], h.middlewares())
    with h.acting_for(Principal(user_id="u-42", tenant="acme", plan="gold")):
        _, msg = await run(agent)
    assert msg.get_text_content() == "Hello."


def test_an_application_object_among_the_principals_attrs_is_refused_named() -> None:
    """It would fail every reply at its end (the report and park records are JSON):
    refused at construction, the attribute named; JSON data (a UUID, a date, a set) stands."""
    with pytest.raises(ValueError, match="attribute 'account': a Account is not data"):
        Principal(user_id="u-42", tenant="acme", account=Account("acme-gold"))
