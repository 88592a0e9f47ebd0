"""Round 143 a: a swallowed end's verdict is not provisional. When the first answer
says nothing, the settle at that end concludes the run's facts `incomplete`
(`no_answer`); `_went_on` reopens the report but not the facts, so the round the
middleware asked for is answered by the harness's fallback without a model call.

README "Combining": "A middleware of yours that swallows the `ReplyEndEvent` to ask for
another round (AgentScope's way) gets that round under the same run (its caps, deadline
and refusals); the report settled at the swallowed end was provisional: the reply's true
end settles the one that supersedes it".

Attack: round 142 c's `OneMoreRound` (swallows the first end after a hint). The
provider's first answer is empty (a glitch); the model would answer in the next round.
Seen: one model call in all; the extra round is never made; the user gets "I could not
complete this request (no answer was given)" and the report `incomplete` (`no_answer`).
Should: the extra round is made (2 model calls, as bare AgentScope makes) and its answer
delivered, `completed`. Control: a first answer that says something.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, TerminalState
from tests.scripted import OneMoreRound, ScriptedModel, make_agent, run, search, text

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("harnessed", [False, True], ids=["bare", "harnessed"])
@pytest.mark.parametrize("first", ["first draft", ""], ids=["control", "empty_first_answer"])
async def test_the_round_asked_for_is_made(first: str, harnessed: bool) -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([text(first), text("The answer is 42.")])
    agent = make_agent(model, [search], [OneMoreRound(), *(h.middlewares() if harnessed else [])])
    _, final = await run(agent, "what is the answer?")
    said = final.get_text_content() or ""
    report = h.last_report(agent)
    assert len(model.calls) == 2, f"the round the middleware asked for made no model call; the user got {said!r}"
    assert "42" in said
    if harnessed:
        assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "answered"), report.reason
