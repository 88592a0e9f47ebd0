"""Round 129 d: the budget status line the model quotes is stripped from the
final answer but streamed to the user.

Promise (README, "Budgets users can see": the status line is given to the
model "as a prefix-safe hint"; `hooks/budget._disclose`: "The audit strips it
should the answer quote it"; hook 24 `final_answer_audit`: "Strips every
harness marker from the answer (issued sentinels, ...)"; "What a streaming
UI shows tells the same story."). A hint is for the model, never shown to
the user.

Attack: `disclose_budget="every_call"`; a streaming model quotes the status
line it was given, word for word, in its answer.

What happens: the final `Msg` drops the whole issued line (`strip_issued`),
but the stream only strips the `[harness:budget]` marker
(`outputs` strips "sentinel codes, issued or not"), so the streaming UI shows
the hint's body, "... 9 model calls left", and nothing in the stream
corrects it afterwards: the stream and the final answer tell different
stories, and the hint reaches the user.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.asyncio

from hookkit import streamed
from scripted import calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig
from agentscope_harness.testing import ScriptedModel

SEEN: list[str] = []


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    return f"3 products for {q}: red mug, blue mug, green mug"


def quote_the_status_line(turn) -> object:
    """The model answers, quoting the budget line it was just given."""
    line = re.findall(r"\[harness:budget\][^<\"]*", str(turn.formatted))[-1].strip()
    SEEN.append(line)
    return text(f"Three mugs match: red, blue and green. ({line})")


@pytest.mark.xfail(strict=True, reason="README limit: the stream strips only a quoted budget line's marker")
async def test_a_quoted_budget_line_is_not_streamed_to_the_user():
    SEEN.clear()
    h = Harness(HarnessConfig(disclose_budget="every_call", max_model_calls=10), load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": "mug"})), quote_the_status_line], stream=True)
    agent = make_agent(model, [search], middlewares=h.middlewares())
    events, final = await run(agent, "which mugs do you have?")
    line = SEEN[-1]
    body = line.removeprefix("[harness:budget]").strip()
    assert "model calls left" in body  # the hint the model read
    answer = final.get_text_content() or ""
    assert body not in answer, answer  # the final answer: the issued line is stripped whole
    shown = streamed(events)
    assert "Three mugs match" in shown
    assert body not in shown, shown  # the streaming UI must not show the hint either
