"""Round 178 (red team of the round's reuse of a run's stream filter): a run now keeps one
filter for the model's events and starts it afresh each round. A user's middleware before
the harness that runs a round twice at once (best-of-two) and shows one candidate had both
rounds share it: the second round's start wiped the first's state, both candidates' text ran
through one text stream, and the user saw them mixed, pieces of the hidden candidate's key
among them ("r keysk-proonA1bke3d4[redacted:openai_key] ok"). A round now takes the run's
filter only when no other round holds it; one beside another gets its own.

Found with it, and already so before the round: the final message of such a reply can carry
the key one candidate wrote (the rounds share the reply's message in the context). A README
limit; a strict xfail below."""
from __future__ import annotations

from typing import Any

import pytest
from agentscope.message import Msg, UserMsg
from agentscope.middleware import MiddlewareBase
from scripted import ALICE, ScriptedModel, make_agent, search, text

from agentscope_harness import Harness, HarnessConfig

pytestmark = pytest.mark.asyncio

KEY = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
FIRST = "Your key is " + KEY + " keep it"
SECOND = "Second: key " + KEY + " ok"


class Twice(MiddlewareBase):
    """Runs the round twice: one after the other (the first a discarded
    draft), or at once, showing the first or the second candidate."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def get_middleware_key(self) -> str:
        return "twice"

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        if self.mode == "one after the other":
            async for _ in next_handler(**input_kwargs):
                pass
            async for item in next_handler(**input_kwargs):
                yield item
            return
        rounds = [next_handler(**input_kwargs), next_handler(**input_kwargs)]
        shown = rounds[0] if self.mode == "at once, the first shown" else rounds[1]
        live = list(rounds)
        while live:
            for stream in list(live):
                try:
                    item = await stream.__anext__()
                except StopAsyncIteration:
                    live.remove(stream)
                    continue
                if stream is shown:
                    yield item


async def _reply(mode: str) -> tuple[str, str]:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    answers = iter([FIRST, SECOND])
    model = ScriptedModel(lambda turn: text(next(answers, "x")), stream=True, chunk=5)
    agent = make_agent(model, [search], [Twice(mode), *h.middlewares()])
    h.instrument(agent.toolkit)
    events = []
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "hi"), yield_final_msg=True):
            events.append(item)
    seen = "".join(e.delta for e in events if isinstance(getattr(e, "delta", None), str))
    final = events[-1].get_text_content() if events and isinstance(events[-1], Msg) else ""
    return seen, final or ""


@pytest.mark.parametrize(("mode", "candidate"), [
    ("one after the other", SECOND),
    ("at once, the first shown", FIRST),
    ("at once, the second shown", SECOND),
])
async def test_each_round_is_filtered_alone(mode: str, candidate: str) -> None:
    seen, _ = await _reply(mode)
    assert seen == candidate.replace(KEY, "[redacted:openai_key]"), seen


@pytest.mark.parametrize("mode", [
    "one after the other",
    pytest.param("at once, the first shown", marks=pytest.mark.xfail(
        strict=True, reason="README limit: rounds of one reply run at once share its message in the context",
    )),
    "at once, the second shown",
])
async def test_the_final_message_carries_no_key(mode: str) -> None:
    _, final = await _reply(mode)
    assert KEY not in final, final
