"""Red team, round 88 (on rounds 85-87). A consumer that stops reading a harnessed stream (``break`` while it keeps
the stream object, as ``stream = agent.reply_stream(...)`` does) stays in
HANDED_TO for as long as the generator lives: a structured-output call its
own code makes afterwards (no middleware, no run of its own) is attributed to
the abandoned run: counted there, and refused by its limits."""

import asyncio

from agentscope.event import ReplyStartEvent
from agentscope.message import UserMsg
from pydantic import BaseModel
from scripted import ALICE, ScriptedModel, calls, make_agent, text

import agentscope_harness
from agentscope_harness import Harness, HarnessConfig

ModelCallRefused = getattr(agentscope_harness, 'ModelCallRefused', RuntimeError)


class Verdict(BaseModel):
    ok: bool


async def test_own_call_after_abandoning_a_stream_is_not_the_abandoned_runs() -> None:
    h = Harness(HarnessConfig(deadline_s=0.3), load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([text("never read")]), [], h.middlewares())
    judge = ScriptedModel([calls(("generate_structured_output", {"ok": True}))], model="judge")
    with h.acting_for(ALICE):
        stream = agent.reply_stream(UserMsg("user", "hi"))
        async for event in stream:
            if isinstance(event, ReplyStartEvent):
                break  # the UI's user navigated away
    await asyncio.sleep(0.5)  # later, the app's own code (no agent, no harness) asks a model
    try:
        res = await judge.generate_structured_output([UserMsg("user", "is it ok?")], structured_model=Verdict)
    except ModelCallRefused as exc:
        raise AssertionError(f"the app's own call was refused by an abandoned run's deadline: {exc}") from exc
    assert res.content == {"ok": True}
    del stream
