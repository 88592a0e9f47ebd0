"""Round 176 a: a `HookSpec` built by hand in a hook pack needed `escape_key`, `module` and
`is_async` spelled out (README "Writing a hook": a module's `HookSpec`s are loaded; "a `HookSpec`
built by hand is checked as a declared one"). They default as `harness_hook` declares them."""
from __future__ import annotations

from scripted import RAN, ScriptedModel, calls, make_agent, run, search, text

from agentscope_harness import Harness, HarnessConfig, HookRejectSignal, HookSpec


async def no_secrets(ctx):
    if "secret" in str(ctx.tool.args):
        raise HookRejectSignal("Do not search for secrets.", code="policy_refused")


async def test_a_handbuilt_spec_takes_the_declared_defaults_and_gates():
    spec = HookSpec(no_secrets, "pre_tool_call", 30, "no_secrets", "safety")
    assert (spec.module, spec.is_async, spec.fail_closed, spec.escape_key) == (__name__, True, True, None)
    assert HookSpec(no_secrets, "pre_tool_call", 30, "probably_enough", "efficiency").escape_key == "probably_enough"
    h = Harness(HarnessConfig(), hooks=[spec], load_entry_points=False, environ={})
    agent = make_agent(ScriptedModel([calls(("search", {"q": "the secret plan"})), text("done")]), [search],
                       h.middlewares())
    RAN.clear()
    await run(agent, "go")
    assert RAN == [] and list(h.last_report(agent).refusals) == ["policy_refused"], RAN
