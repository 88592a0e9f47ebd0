"""Red team, round 106 (a). A structured reply whose model is streaming its
text when the deadline passes: the text shown so far is a block the stream
started (``TextBlockStartEvent``), and the cut's end (model_guard's
``_final_stream``: "a chunk of nothing first ends the blocks the cut left
open") is held with the stop's text and then dropped: that block never gets
its ``TextBlockEndEvent``. A UI keeps it open (a cursor blinking in an
answer that was cut). The same reply without ``structured_schema`` ends it
(and at 5386ff2 so did this one).

README: "What a streaming UI shows tells the same story ... an answer the
deadline cut mid-stream, by the fallback answer" (a new text block);
model_guard ``_final_stream``: the answer "follows as a text block of its
own, never as more of the cut one". Cause: ``agent_adapter.on_reasoning``
(line 174) holds every text event once ``owed and run.facts.terminal is not
None`` (set by the cut mid-stream), the cut block's end included, and
``unsaid`` (line 231) drops all of them.

Real ``Agent``, a real tool in a real (instrumented) ``Toolkit``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from agentscope.event import TextBlockEndEvent, TextBlockStartEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import Toolkit
from scripted import ALICE, Ids, ScriptedModel, calls, make_agent, search, text, tool

from agentscope_harness import Harness, HarnessConfig


class _SlowText(ScriptedModel):
    """Streams its second answer slowly (the deadline lands in it)."""

    async def _stream(self, res: Any) -> AsyncGenerator[Any, None]:
        async for chunk in super()._stream(res):
            if len(self.calls) == 2:
                await asyncio.sleep(0.05)
            yield chunk


async def test_a_structured_replys_cut_text_block_is_ended() -> None:
    h = Harness(HarnessConfig(deadline_s=0.6, wrap_up_s=0), load_entry_points=False, environ={})
    model = _SlowText([calls(("search", {"q": "orders"})), text("I found order A-1 for you. " * 8),
                       calls(("GenerateStructuredOutput", {"ids": ["A-1"]}))], stream=True)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    started, ended, final = [], set(), None
    with h.acting_for(ALICE):
        async for item in agent.reply_stream(UserMsg("user", "which orders?"), structured_schema=Ids,
                                             yield_final_msg=True):
            if isinstance(item, Msg):
                final = item
            elif isinstance(item, TextBlockStartEvent):
                started.append(item.block_id)
            elif isinstance(item, TextBlockEndEvent):
                ended.add(item.block_id)
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", "deadline")
    assert final is not None and started  # the cut answer's text was shown
    # every text block the stream opened is closed
    assert [b for b in started if b not in ended] == [], (started, ended)
