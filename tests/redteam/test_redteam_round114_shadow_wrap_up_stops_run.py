"""Round 114 (shadow mode). Round 114 (shadow): in shadow mode the wrap-up window's *recorded-only*
constrain ends the run early, with the "time ran out" fallback, long before the
deadline.

README, HarnessConfig ``mode``: "``shadow``: decide and record, refuse nothing
(... the deadline still ends the run: time is not a refusal)". README hook
table, ``liveness_watchdog``: "Near the deadline (``wrap_up_s``): constrain and
hint (a model ignoring it: ``incomplete``, ``deadline``) ... Shadow mode
enforces the deadline only". README, Security: "Shadow mode ... The user gets
the model's answer".

A lookup agent, ``deadline_s=5``, ``wrap_up_s=4.5``, each lookup takes 1 s.
Round 2 starts at ~1 s (4 s left): the watchdog constrains (shadow: recorded,
``tool_choice`` not narrowed, no hint given, correctly). The model, told
nothing, makes its second lookup; ``terminal_enforcer`` then concludes the run
``incomplete`` with the constrain's code, ``deadline``. At round 3 (~2 s, 3 s
before the deadline) ``_shadow_answer`` reads ``facts.out_of_time()`` (reason
``deadline``) as if the deadline had passed: the model is not called and the
user gets "the time allowed for it ran out" instead of the model's answer. The
decision is even recorded ``enforced=True``. Bare AgentScope answers at ~2 s.

Cause: ``hooks/termination.py:liveness_watchdog`` constrains with
``code="deadline"`` (``facts.constrained_for``), ``terminal_enforcer`` /
``_ignored`` conclude with that reason, and
``adapters/agent_adapter.py:_shadow_answer`` treats any end whose reason is
``deadline`` (``GuardState.out_of_time``) as the deadline itself.

Real ``Agent``, a real tool in a real ``Toolkit``; the scripted model and
AgentScope's real ``OpenAIChatModel`` against ``tests/realclient/server.py``."""

from __future__ import annotations

import asyncio
import time

import pytest
from agentscope.credential import OpenAICredential
from agentscope.message import Msg, UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import Toolkit
from pydantic import SecretStr

from agentscope_harness import Harness, HarnessConfig
from tests.realclient.server import FakeOpenAI, Reply
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, text, tool

pytestmark = pytest.mark.asyncio

ANSWER = "Item b-7 is in stock."
RAN: list[str] = []


async def lookup(q: str) -> str:
    """Look an item up in the warehouse.

    Args:
        q (str): The item.
    """
    await asyncio.sleep(1.0)
    RAN.append(q)
    return f"{q}: item {q}-7 in stock"


async def _drive(mode: str | None, client: str) -> tuple[str, int, float, object]:
    """(what the user got, model calls, seconds, report)."""
    RAN.clear()
    server = None
    if client == "scripted":
        model = ScriptedModel([calls(("lookup", {"q": "a"})), calls(("lookup", {"q": "b"})), text(ANSWER)])
    else:
        server = FakeOpenAI()
        await server.start()
        server.plan(Reply(tool_calls=[("lookup", {"q": "a"})]), Reply(tool_calls=[("lookup", {"q": "b"})]),
                    Reply(text=ANSWER))
        model = OpenAIChatModel(
            credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=server.base_url),
            model="gpt-test", stream=True, max_retries=0, retry_delay=0.01,
            client_kwargs={"max_retries": 0, "timeout": 30},
        )
    h = None
    toolkit = Toolkit(tools=[tool(lookup)])
    started = time.monotonic()
    try:
        if mode is None:
            agent = make_agent(model, toolkit)
            items = [e async for e in agent.reply_stream(UserMsg("user", "is b in stock?"), yield_final_msg=True)]
        else:
            h = Harness(HarnessConfig(mode=mode, deadline_s=5, wrap_up_s=4.5), load_entry_points=False, environ={})
            agent = make_agent(model, h.instrument(toolkit), h.middlewares())
            with h.acting_for(ALICE):
                items = [e async for e in agent.reply_stream(UserMsg("user", "is b in stock?"),
                                                             yield_final_msg=True)]
    finally:
        if server is not None:
            await model.client.close()
            await server.close()
    took = time.monotonic() - started
    final = [e for e in items if isinstance(e, Msg)][-1].get_text_content() or ""
    calls_made = len(model.calls) if client == "scripted" else len(server.requests)  # type: ignore[union-attr]
    return final, calls_made, took, (h.last_report(agent) if h else None)


@pytest.mark.parametrize("client", ["scripted", "openai"])
async def test_shadow_mode_does_not_stop_a_run_inside_its_deadline(client: str) -> None:
    bare, bare_calls, _, _ = await _drive(None, client)
    assert bare == ANSWER and bare_calls == 3

    said, made, took, report = await _drive("shadow", client)
    assert took < 4.0  # the deadline (5 s) never passed
    fallback = [(d.hook, d.action, d.enforced) for d in report.decisions if d.action in ("fallback", "stop")]
    assert said == ANSWER and made == 3, (
        f"shadow run stopped at {took:.1f}s of a 5s deadline after {made} model calls; the user got {said!r}; "
        f"report {report.terminal_state.value}/{report.reason}, {fallback}")
