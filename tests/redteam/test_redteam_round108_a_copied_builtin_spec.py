"""Round 108 (a). Whether a hook is "one of the harness's own" (its writes
into ``ctx.result`` not shaped after it, its hints not defanged nor given
the tool's ``pii``) is read from ``HookSpec.module``, a free field of the
public ``HookSpec``: ``builtin = module.startswith("agentscope_harness.")``.
A user's hook whose spec is a built-in's with another function
(``dataclasses.replace(truncate_result.__harness_hook__, fn=mine, ...)``, the
short way to swap a built-in for your own at its place; or a hand-built
``HookSpec`` naming such a module) passes round 107's ``__post_init__``
checks and is taken as the harness's own: what it writes from the tool's
output reaches the model unredacted (a provider key), with the address the
tool's ``pii`` redacts; its hint likewise.

README (Writing a hook): "what a hook of yours writes into ctx.result.text
... is shaped as a notice is, whatever its priority"; "a HookSpec built by
hand is checked as a declared one". The same function declared with
``@harness_hook`` is shaped (control)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy, harness_hook
from agentscope_harness.hooks.context_shaping import truncate_result
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


async def read_config(name: str) -> str:
    """Read a config file.

    Args:
        name (str): The file.
    """
    return f"OPENAI_API_KEY={SECRET}\nowner: jane.doe@example.com\n" + "x " * 50


def head_only(ctx) -> None:
    """My truncation: the first 200 characters of what the tool said."""
    ctx.result.text = ctx.result.raw_text[:200]
    ctx.hint(f"You read only the start of {ctx.tool.name}: {ctx.result.raw_text[:120]}", key="head")


declared = harness_hook("post_tool_call", priority=90, name="head_only", kind="transform")(
    lambda ctx: head_only(ctx))
swapped = dataclasses.replace(truncate_result.__harness_hook__, fn=head_only, name="head_only", priority=90)


async def _read(hook) -> tuple[str, str]:
    h = Harness(HarnessConfig(tools={"read_config": ToolPolicy(pii={"email": "redact"})},
                              disabled_hooks={"truncate_result"}),
                hooks=[hook], load_entry_points=False)
    model = ScriptedModel([calls(("read_config", {"name": "prod.env"})), text("ok")])
    agent = make_agent(model, h.instrument(make_agent(model, [tool(read_config)]).toolkit), h.middlewares())
    await run(agent)
    return tool_messages(model.calls[1])[-1], json.dumps(model.calls[1]["formatted"])


async def test_control_declared_hook_is_shaped() -> None:  # holds
    read, payload = await _read(declared)
    assert SECRET not in read and "jane.doe" not in read, read
    assert SECRET not in payload and "jane.doe" not in payload


async def test_a_builtins_spec_with_my_function_is_shaped_as_mine() -> None:
    read, payload = await _read(swapped)
    assert SECRET not in read, read  # secrets redacted from what the model reads
    assert "jane.doe@example.com" not in read, read  # the tool's pii
    assert SECRET not in payload and "jane.doe@example.com" not in payload, "the hint"
