"""Round 95 (transparency) helpers: run one script on a bare agent and a
harnessed one and read what each model was sent."""

from __future__ import annotations

from typing import Any

from agentscope_harness import Harness, HarnessConfig


def harness(config: HarnessConfig | None = None, **kw: Any) -> Harness:
    """A Harness with no entry-point hooks and no env overrides."""
    return Harness(config or HarnessConfig(), load_entry_points=False, environ={}, **kw)


async def drive(agent: Any, inputs: Any, **kw: Any) -> list[Any]:
    """Every item of one reply's stream, the final message last."""
    return [e async for e in agent.reply_stream(inputs, yield_final_msg=True, **kw)]

