"""Round 127 c, real client: a reply stream the UI closes (or abandons) leaves
the provider's HTTP stream open, so the provider goes on generating (and
billing) after the run was settled and charged.

README ("Choices where the design is silent"): "A new reply settles
(`cancelled`, reason `abandoned`) a run whose stream its consumer stopped
reading without closing ... and frees all it held ... that stream, closed
later, changes nothing, and read on, it ends (nothing more of it runs)";
"Nothing leaks from a run"; "Budgets users can see": "`spent_usd <=
cap_usd` ... whenever the estimates hold", a call stopped mid-stream being
"charged its request and what it sent". The deadline cut and a caller's
cancellation do close the HTTP stream (measured: the server sees the client
go at once), and so does bare AgentScope when its reply stream is closed.

Attack (AgentScope's real OpenAIChatModel, real HTTP SSE): the provider
streams a long answer slowly (120 chunks, 0.05 s apart, final usage 6,000
output tokens); the UI reads three text deltas and then (a) closes the
stream properly with ``aclose()`` or (b) just stops reading; the next reply
on the same agent settles the run.

What happens: in both cases the harnessed run is settled ``cancelled``
(``abandoned``) and charged the few characters that streamed (7 output
tokens), but its HTTP stream stays open and the server sends every chunk,
the 6,000-token usage and ``[DONE]`` (~6 s later): a real provider generates
and bills the whole answer for a run the harness closed and charged ~0.
With (a), bare AgentScope closes the provider stream at once (control):
the harness's model-call layer (``ModelGuard._counted`` swallowing
GeneratorExit without closing the inner stream) breaks that chain.
"""
from __future__ import annotations

import asyncio
import gc

import pytest
from agentscope.event import TextBlockDeltaEvent
from agentscope.message import UserMsg
from scripted import ALICE, make_agent, run
from side_kit import model
from sse_kit import SSE, chunk, text_answer

from agentscope_harness import CostPolicy, Harness, HarnessConfig

pytestmark = pytest.mark.asyncio
PIECES = [chunk({"content": f"word{i} "}) for i in range(120)]
LONG = [chunk({"role": "assistant", "content": ""}),
        *[x for c in PIECES for x in (("sleep", 0.05), c)],
        chunk({}, "stop"),
        chunk(usage={"prompt_tokens": 100, "completion_tokens": 6000, "total_tokens": 6100})]


async def _read_a_little_then_leave(harnessed: bool, close: bool) -> tuple[SSE, list]:
    srv = await SSE().start()
    m = model(srv, "gpt-main")
    try:
        srv.script += [(LONG, "done"), (text_answer("Here is your second answer."), "done")]
        h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=5.0, prices={"gpt-main": (1.0, 10.0)})),
                    load_entry_points=False, environ={})
        agent = make_agent(m, [], h.middlewares() if harnessed else [])
        deltas = 0
        with h.acting_for(ALICE):
            stream = agent.reply_stream(UserMsg("user", "tell me everything"), yield_final_msg=True)
            async for item in stream:  # the UI reads a little, then the user closes the tab
                if isinstance(item, TextBlockDeltaEvent):
                    deltas += 1
                    if deltas == 3:
                        break
            gc.disable()  # closed by aclose() itself (as bare AgentScope does), not by a later collection
            try:
                if close:
                    await stream.aclose()
                await asyncio.sleep(0.2)
                right_after = srv.ended_by.get(0)
            finally:
                gc.enable()
        with h.acting_for(ALICE):
            _, final = await run(agent, "next question")  # settles an abandoned run first
        assert final.get_text_content() == "Here is your second answer."
        for _ in range(200):  # the first handler either sees the client go, or answers to its end (~6 s)
            if len(srv.ended_by) >= 2:
                break
            await asyncio.sleep(0.05)
        return srv, [right_after, *[(r.terminal_state.value, r.reason, r.output_tokens) for r in h.reports]]
    finally:
        await m.client.close()
        await srv.close()


async def test_control_bare_agentscope_closes_the_provider_stream_on_aclose() -> None:
    srv, reports = await _read_a_little_then_leave(harnessed=False, close=True)
    assert reports[0] == "client-gone"  # closed by aclose() itself
    assert srv.ended_by.get(0) == "client-gone" and len(srv.sent[0]) < len(PIECES)


@pytest.mark.parametrize("close", [True, False], ids=["aclose", "stopped-reading"])
async def test_a_settled_runs_provider_stream_is_closed(close: bool) -> None:
    srv, reports = await _read_a_little_then_leave(harnessed=True, close=close)
    detail = (srv.ended_by, len(srv.sent[0]), len(PIECES), reports)
    if close:  # closed by aclose(), as bare AgentScope's is
        assert reports[0] == "client-gone", detail
    # the settled run's provider stream was closed: the provider stopped, it did not answer to its end
    assert srv.ended_by.get(0) == "client-gone", detail
    assert len(srv.sent[0]) < len(PIECES), detail
