"""Round 172 b (a team's scenarios on "Writing a hook" and "The hooks"; 85 of 91 held): a prompt
hook that failed open left its (half-written) text in that run's prompt, and a hook name
given blank or as no text was replaced by the function's name."""
from __future__ import annotations

import asyncio
import json

import pytest
from scripted import make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError, harness_hook
from agentscope_harness.testing import ScriptedModel

CALLS = {"n": 0}


@harness_hook("on_system_prompt", name="vat_rules", kind="transform")
def vat_rules(ctx) -> None:
    CALLS["n"] += 1
    ctx.prompt_addition.append("Prices include VAT.")
    if CALLS["n"] == 1:
        ctx.prompt_addition.append("Refunds are capped at")  # half-written, then the hook crashes
        raise RuntimeError("rules service returned a partial document")


@harness_hook("on_system_prompt", name="slow_vat_rules", kind="observer")
async def slow_vat_rules(ctx) -> None:
    CALLS["n"] += 1
    ctx.prompt_addition.append("Refunds are capped at")  # appended, then the hook hangs
    if CALLS["n"] == 1:
        await asyncio.sleep(30)


def system_text(turn) -> str:
    return json.dumps([m["content"] for m in turn["formatted"] if m["role"] == "system"])


async def test_prompt_hook_that_failed_open_still_has_its_text_in_the_prompt():
    """README "Writing a hook": on_system_prompt hooks' text is kept for every later prompt
    "unless ... one failed open (an observer or a transform: its text is missing) ...: then
    the next run asks them again". Attack: a transform appends its rules, half-written, then
    raises. Happened: the first run's prompt carries the failed hook's (partial) text, so the
    model reads "Refunds are capped at" with nothing after it. Should: its text is missing."""
    CALLS["n"] = 0
    h = Harness(HarnessConfig(), hooks=[vat_rules], load_entry_points=False)
    model = ScriptedModel([text("a"), text("b")])
    agent = make_agent(model, [], h.middlewares())
    await run(agent, "one")
    report = h.last_report(agent)
    assert any(d.hook == "vat_rules" and d.action == "error" for d in report.decisions)
    assert "Refunds are capped at" not in system_text(model.calls[0]), system_text(model.calls[0])
    assert "Prices include VAT." not in system_text(model.calls[0])


async def test_prompt_hook_that_timed_out_still_has_its_text_in_the_prompt():
    """Same promise, the hook failing by running past hook_timeout_s (an async observer
    appends, then hangs): its text reached the model all the same."""
    CALLS["n"] = 0
    h = Harness(HarnessConfig(hook_timeout_s=0.3), hooks=[slow_vat_rules], load_entry_points=False)
    model = ScriptedModel([text("a")])
    agent = make_agent(model, [], h.middlewares())
    await run(agent, "one")
    report = h.last_report(agent)
    assert any(d.hook == "slow_vat_rules" and d.action == "error" for d in report.decisions)
    assert "Refunds are capped at" not in system_text(model.calls[0]), system_text(model.calls[0])


@pytest.mark.parametrize("name", ["", 0, False, b""])
def test_hook_name_blank_or_not_text_is_refused(name):
    """README "Writing a hook": "Refused at construction too, named: a hook's name that is no
    text, blank, or holds a comma or surrounding spaces". Attack: name="" (blank), name=0 or
    b"" (no text), e.g. read from an unset setting. Happened: silently replaced by the
    function's name (`<lambda>` or the def's), so reports and HARNESS_DISABLED_HOOKS name a
    hook the author never named. Should: HarnessConfigError naming the hook name."""
    with pytest.raises(HarnessConfigError, match="hook name"):
        spec = harness_hook("pre_tool_call", name=name, kind="observer")(lambda ctx: None)
        Harness(HarnessConfig(), hooks=[spec], load_entry_points=False)


async def test_the_next_run_asks_a_failed_prompt_hook_again_and_keeps_its_clean_text():
    CALLS["n"] = 0
    h = Harness(HarnessConfig(), hooks=[vat_rules], load_entry_points=False)
    model = ScriptedModel([text("a"), text("b"), text("c")])
    agent = make_agent(model, [], h.middlewares())
    for message in ("one", "two", "three"):
        await run(agent, message)
    assert CALLS["n"] == 2  # asked again by the second run, kept from then on
    assert [system_text(call).count("Prices include VAT.") for call in model.calls] == [0, 1, 1]
    assert "Refunds are capped at" not in system_text(model.calls[-1])
