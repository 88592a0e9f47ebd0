"""A self-check middleware (placed before the harness's): a judge model decides at the reply's end."""
from __future__ import annotations

from typing import Any

from agentscope.event import ReplyEndEvent
from agentscope.message import HintBlock
from agentscope.middleware import MiddlewareBase

from agentscope_harness import ModelCallRefused

VERDICT = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


class Judge(MiddlewareBase):
    """At the reply's first ``rounds`` ends a judge decides; a bad answer gets one
    more round (end swallowed). A refused judge passes the end."""

    def __init__(self, judge: Any, key: str = "judge", rounds: int = 1) -> None:
        self.judge, self.key, self.rounds, self.judged, self.refused = judge, key, rounds, 0, []

    async def get_middleware_key(self) -> str:
        return self.key

    async def on_reply(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        async for event in next_handler(**input_kwargs):
            if isinstance(event, ReplyEndEvent) and self.judged < self.rounds:
                self.judged += 1
                try:
                    verdict = await self.judge.generate_structured_output(
                        list(agent.state.context)[-2:], structured_model=VERDICT)
                except ModelCallRefused as exc:
                    self.refused.append(str(exc))
                    yield event
                    continue
                if not verdict.content.get("ok", True):
                    agent.state.append_context(agent.name, [HintBlock(hint="The judge found a gap: check again.")])
                    continue
            yield event
