"""Scenario round 135 (a): a ``HookSpec`` built by hand (``HookSpec`` is public,
exported from ``agentscope_harness``) against the README's "Writing a hook":

  "An efficiency gate (``kind="efficiency"``) gets an ``escape_key`` (default: its
  name)" ... "a ``HookSpec`` built by hand is checked as a declared one"
  "A hook returns ``None`` (...; a generator is refused at construction)"

Real Agent, real tool in a real instrumented Toolkit, scripted model.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, HarnessConfigError, HookRejectSignal, HookSpec, harness_hook
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

RAN: list[str] = []


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    RAN.append(q)
    return f"found {q}: item {len(RAN)}"


def enough_already(ctx) -> None:
    """An efficiency presumption: "you probably have enough"."""
    if ctx.tool.name == "search":
        raise HookRejectSignal("You probably have enough results; answer now.", code="enough_results")


async def _searches(hook) -> tuple[list[str], Harness, ScriptedModel]:
    RAN.clear()
    h = Harness(HarnessConfig(), hooks=[hook], load_entry_points=False)
    model = ScriptedModel([calls(("search", {"q": f"q{i}"})) for i in range(4)] + [text("done")])
    agent = make_agent(model, h.instrument(make_agent(model, [tool(search)]).toolkit), h.middlewares())
    await run(agent)
    return list(RAN), h, model


@pytest.mark.asyncio
async def test_control_declared_efficiency_gate_latches_open() -> None:  # holds
    declared = harness_hook("pre_tool_call", priority=36, name="enough_already", kind="efficiency")(
        lambda ctx: enough_already(ctx))
    ran, h, _ = await _searches(declared)
    assert ran == ["q2", "q3"], ran  # refused twice (escape_after_rejects=2), then latched open
    assert any(d.action == "allow_escape" for d in h.reports[-1].decisions)


@pytest.mark.asyncio
async def test_handbuilt_efficiency_gate_latches_open_like_a_declared_one() -> None:
    """Promise: an efficiency gate gets an ``escape_key`` (default: its name), and a
    hand-built ``HookSpec`` is checked as a declared one.
    Attack: the same gate as ``HookSpec(fn, "pre_tool_call", 36, "enough_already",
    "efficiency", None, __name__, False)``: escape_key left at None.
    Happened: no default escape key, so the presumption never latches open: it
    refuses every search of the run as if it were a safety gate (the task is blocked
    by a wrong presumption, the very thing the latch exists to prevent)."""
    spec = HookSpec(enough_already, "pre_tool_call", 36, "enough_already", "efficiency", None, __name__, False)
    ran, h, _ = await _searches(spec)
    assert ran == ["q2", "q3"], ran  # a presumption latches open after escape_after_rejects refusals
    assert any(d.action == "allow_escape" for d in h.reports[-1].decisions)


def gen_hook(ctx):
    """A generator by mistake: its body would never run."""
    if ctx.tool.name == "refund":
        yield HookRejectSignal("no refunds", code="policy_refused")


def test_control_declared_generator_refused() -> None:  # holds
    with pytest.raises(HarnessConfigError, match="generator"):
        harness_hook("pre_tool_call", name="gen_hook")(gen_hook)


def test_handbuilt_generator_hook_refused_at_construction() -> None:
    """Promise: "a generator is refused at construction"; "a HookSpec built by hand
    is checked as a declared one".
    Attack: ``HookSpec(gen_hook, "pre_tool_call", 25, "gen_hook", "observer", None, ...)``.
    Happened: the spec and the ``Harness`` built with it are accepted; the mistake
    surfaces only at run time as a hook failure (an observer: failing open, the
    intended refusal silently never happens)."""
    with pytest.raises(HarnessConfigError, match="generator"):
        spec = HookSpec(gen_hook, "pre_tool_call", 25, "gen_hook", "observer", None, __name__, False)
        Harness(HarnessConfig(), hooks=[spec], load_entry_points=False)
