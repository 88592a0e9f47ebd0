"""Round 135 a (scenarios, "Writing a hook"): what an `on_system_prompt` hook appends.

1. Its text was glued to the harness's rules ("...into your answer.Always be polite."):
   each addition is a paragraph of its own.
2. An observer that failed once (a timeout: its store slow at startup) left the prompt
   without its text for the Harness's whole life: README "only a clean pass is kept",
   so a hook that failed open is asked again by the next run.
"""
from __future__ import annotations

import asyncio

from agentscope_harness import Harness, HarnessConfig, HookContext, harness_hook
from tests.scripted import ScriptedModel, make_agent, run, text

SLOW: list[bool] = [True]


@harness_hook("on_system_prompt", name="be_polite")
def be_polite(ctx: HookContext) -> None:
    ctx.prompt_addition.append("Always be polite.")


@harness_hook("on_system_prompt", name="house_style")
async def house_style(ctx: HookContext) -> None:
    if SLOW[-1]:
        await asyncio.sleep(5)  # its style service is slow at startup: past hook_timeout_s
    ctx.prompt_addition.append("Answer in the house style.")


def _prompt(model: ScriptedModel) -> str:
    return str(model.calls[-1].formatted[0]["content"])


async def test_an_addition_is_a_paragraph_of_its_own() -> None:
    h = Harness(HarnessConfig(), hooks=[be_polite], load_entry_points=False, environ={})
    model = ScriptedModel([text("hello")])
    await run(make_agent(model, [], h.middlewares()))
    prompt = str(model.calls[-1].formatted[0]["content"][0]["text"])
    assert "\n\nAlways be polite.\n\n# Harness rules" in prompt, prompt


async def test_a_prompt_hook_that_failed_open_is_asked_again() -> None:
    SLOW.append(True)
    h = Harness(HarnessConfig(hook_timeout_s=0.2), hooks=[house_style], load_entry_points=False, environ={})
    first = ScriptedModel([text("hello")])
    await run(make_agent(first, [], h.middlewares()))
    assert "house style" not in _prompt(first)  # the control: it timed out, it failed open
    SLOW.append(False)  # the service answers now
    second = ScriptedModel([text("hello")])
    await run(make_agent(second, [], h.middlewares()))
    assert "Answer in the house style." in _prompt(second), _prompt(second)[-160:]
