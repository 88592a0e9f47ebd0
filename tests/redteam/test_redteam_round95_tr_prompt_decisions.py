"""Round 95 red team (transparency and extensibility): what an
``on_system_prompt`` hook decides never reaches any report.

README, "Writing a hook": "``on_system_prompt`` hooks run once per Harness,
in the first run that builds a prompt, bounded by that run's deadline, their
decisions in its report". The hooks run on a scratch run of their own
(``Harness.system_prompt_addition``); its decisions are copied into the
asking run only when a hook stopped it. On a clean pass, a hook's own
``ctx.decide(...)`` (and an observer's failure, which fails open and is
recorded as an ``error`` decision at every other point) is dropped: it is
neither in the first run's report nor streamed as a ``harness.decision``
event."""

from __future__ import annotations

from agentscope.message import UserMsg
from round95_tr_kit import drive, harness
from scripted import ScriptedModel, make_agent, text

from agentscope_harness import HookContext, harness_hook


@harness_hook("on_system_prompt", name="house_style")
def house_style(ctx: HookContext) -> None:
    ctx.prompt_addition.append("\nAnswer in the house style.")
    ctx.decide("rewrite", detail="house style appended")


async def test_an_on_system_prompt_hooks_decision_is_in_the_first_runs_report() -> None:
    h = harness(hooks=[house_style])
    model = ScriptedModel([text("hello")])
    agent = make_agent(model, [], h.middlewares())
    items = await drive(agent, UserMsg("user", "hi"))
    assert "house style" in str(model.calls[0].formatted[0]["content"])  # the hook ran, its text was sent
    report = h.last_report(agent)
    mine = [(d.hook, d.point, d.action) for d in report.decisions if d.hook == "house_style"]
    assert mine == [("house_style", "on_system_prompt", "rewrite")], [
        (d.hook, d.point, d.action) for d in report.decisions]
    streamed = [e.value for e in items if getattr(e, "name", None) == "harness.decision"]
    assert any(d["hook"] == "house_style" for d in streamed), streamed



@harness_hook("on_system_prompt", name="broken_banner")
def broken_banner(ctx: HookContext) -> None:
    raise RuntimeError("the banner service is down")


async def test_an_on_system_prompt_observers_failure_is_recorded_in_the_first_runs_report() -> None:
    """An observer fails open (the reply goes on), and its failure is an ``error`` decision, as at every point."""
    h = harness(hooks=[broken_banner])
    agent = make_agent(ScriptedModel([text("hello")]), [], h.middlewares())
    await drive(agent, UserMsg("user", "hi"))
    report = h.last_report(agent)
    assert report.terminal_state.value == "completed"
    assert [(d.hook, d.action) for d in report.decisions if d.hook == "broken_banner"] == [("broken_banner", "error")]
