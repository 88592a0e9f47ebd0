"""Round 173 a (a red team on round 172): a prompt hook that put its text first and then
failed left it there and cut the harness's own rules (round 172 b cut from the end). Each
hook appends to a copy of its own now. Text a task the hook left appends after it timed out
lands in a later hook's share: a README limit, held as a strict xfail."""
from __future__ import annotations

import asyncio
import json

import pytest
from scripted import make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, harness_hook
from agentscope_harness.testing import ScriptedModel

CALLS = {"n": 0}


@harness_hook("on_system_prompt", name="house_rules", kind="transform")
def house_rules(ctx) -> None:
    ctx.prompt_addition.append("Never promise a refund over 50 EUR.")


@harness_hook("on_system_prompt", name="greeting_first", kind="transform", priority=90)
def greeting_first(ctx) -> None:
    CALLS["n"] += 1
    # puts its paragraph first (a greeting rule), then its rules service fails
    ctx.prompt_addition.insert(0, "Greet the customer by")
    if CALLS["n"] == 1:
        raise RuntimeError("rules service returned a partial document")


def system_text(turn) -> str:
    return json.dumps([m["content"] for m in turn["formatted"] if m["role"] == "system"])


async def test_failed_prompt_hook_that_inserted_keeps_its_text_and_drops_anothers():
    """README "Writing a hook": an on_system_prompt hook's text is kept "unless ... one
    failed open (an observer or a transform: its text is missing) ...: then the next run
    asks them again" (round 172 b: "it adds nothing now").

    Attack: a transform puts its paragraph first (`ctx.prompt_addition.insert(0, ...)`,
    a list method like `append`), half-written, then raises.

    Happened: the runner deletes the list's tail from the length it had before the hook
    (`del additions[added:]`), so the failed hook's half sentence stays in that run's
    prompt and the paragraph an earlier, clean hook appended is what is taken out: here the
    harness's own rules ("# Harness rules": fenced output is data, sentinels are final). Should: the failed hook's
    text is missing and the clean hooks' text is there."""
    CALLS["n"] = 0
    h = Harness(HarnessConfig(), hooks=[house_rules, greeting_first], load_entry_points=False)
    model = ScriptedModel([text("a")])
    agent = make_agent(model, [], h.middlewares())
    await run(agent, "one")
    report = h.last_report(agent)
    assert any(d.hook == "greeting_first" and d.action == "error" for d in report.decisions)
    prompt = system_text(model.calls[0])
    assert "Greet the customer by" not in prompt, prompt
    assert "Never promise a refund over 50 EUR." in prompt, prompt
    assert "# Harness rules" in prompt, prompt  # here the harness's own rules (fence: data) were dropped


LATE: list = []


@harness_hook("on_system_prompt", name="slow_rules", kind="observer")
async def slow_rules(ctx) -> None:
    async def fetch():
        await asyncio.sleep(1.3)
        ctx.prompt_addition.append("Refunds are capped at")  # the fetch lands after the hook timed out
    task = asyncio.create_task(fetch())
    LATE.append(task)
    await asyncio.shield(task)  # a shared fetch other callers may await too: not cancelled with the hook


@harness_hook("on_system_prompt", name="tone_rules", kind="observer")
async def tone_rules(ctx) -> None:
    await asyncio.sleep(0.6)  # a second, slower but in-time rules lookup
    ctx.prompt_addition.append("Be brief.")


@pytest.mark.xfail(strict=True, reason="README limit: a task a timed-out prompt hook left may append later")
async def test_prompt_hook_text_appended_after_its_timeout_reaches_the_prompt():
    """README "Writing a hook": one that failed open (ran past hook_timeout_s) "its text is
    missing". Attack: an async prompt hook awaits a shielded fetch that appends its text;
    the hook times out at 1.0 s (its text is taken out then), the fetch appends at 1.3 s
    while the next prompt hook is still running (it finishes cleanly at 1.6 s).

    Happened: the late text is counted as the second hook's and kept: the timed-out hook's
    half sentence is in that run's prompt. Should: missing (only a hook's own in-time text
    counts; the list could be copied per hook, or a hook's additions taken by identity)."""
    LATE.clear()
    h = Harness(HarnessConfig(hook_timeout_s=1.0), hooks=[slow_rules, tone_rules], load_entry_points=False)
    model = ScriptedModel([text("a")])
    agent = make_agent(model, [], h.middlewares())
    await run(agent, "one")
    report = h.last_report(agent)
    assert any(d.hook == "slow_rules" and d.action == "error" for d in report.decisions), report.decisions
    prompt = system_text(model.calls[0])
    assert "Be brief." in prompt, prompt
    assert "Refunds are capped at" not in prompt, prompt
