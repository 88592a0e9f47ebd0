"""Round 136a: round 135's "each addition a paragraph of its own" for an addition that
starts with one line break.

README "Writing a hook": an ``on_system_prompt`` hook appends its text with
``ctx.prompt_addition.append(text)`` "(a paragraph of its own ...)".

Attack: a hook (priority 60, after the harness's rules) appends ``"\nReply in French."``
(a writer's habit of starting on a new line). ``system_prompt_addition`` leaves any part
that starts with ``\n`` as it is (the built-in's own ``\n\n# Harness rules`` check).
What happened: the text is glued under the last bullet of "# Harness rules" with one line
break: in markdown a lazy continuation of the harness's last rule (round 135's bug for
this spelling). Should: a blank line before it, as for any other addition.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HookContext, harness_hook
from tests.scripted import ScriptedModel, make_agent, run, text

pytestmark = pytest.mark.asyncio


@harness_hook("on_system_prompt", priority=60, name="in_french")
def in_french(ctx: HookContext) -> None:
    ctx.prompt_addition.append("\nReply in French.")


async def test_an_addition_starting_with_one_line_break_is_still_a_paragraph_of_its_own() -> None:
    h = Harness(HarnessConfig(), hooks=[in_french], load_entry_points=False, environ={})
    model = ScriptedModel([text("bonjour")])
    await run(make_agent(model, [], h.middlewares()))
    prompt = str(model.calls[-1].formatted[0]["content"][0]["text"])
    assert "# Harness rules" in prompt  # the control: the harness's rules are there
    assert "\n\nReply in French." in prompt, prompt[-300:]
