"""Red team, round 111 (what the user receives while a reply streams; AgentScope's
real ``OpenAIChatModel``, a real ``Agent``, real tools in a real ``Toolkit``).

1. The text of an answer the harness holds back (a run with a finishing tool;
   any answer once a dependency the run needed went down) was released when
   the deadline cut its model call mid-answer: "Your refund of $80 was issued"
   streamed, then the fallback. It never stood, so it is dropped; the stop's
   text the harness answered in its place is shown.
2. A model that speaks its answer (OpenAI ``delta.audio``: its speech as a
   ``DataBlock``, its transcript as the text) had the speech of an answer the
   harness withheld or replaced delivered: streamed, and kept in the final
   ``Msg``. The speech is held, shown and dropped with its text.

README "What the caller receives": "In a run with a finishing tool, a text
answer is shown at the end of its model call, once it is known to stand";
the audit-failed row: "the answer is withheld"."""

from __future__ import annotations

import base64

from agentscope.event import DataBlockDeltaEvent, TextBlockDeltaEvent
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import model
from sse_kit import SSE, chunk

from agentscope_harness import DependencyDown, Harness, HarnessConfig, TerminalState, ToolPolicy

RAN: list[str] = []
SPEECH = b"\x10\x00\x20\x00" * 16  # PCM16 of the spoken answer


async def submit_answer(answer: str) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
    """
    RAN.append(answer)
    return answer


async def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    raise DependencyDown("orders db", ConnectionError("refused"))


def said(text: str) -> dict:
    return chunk({"content": text})


ROLE = chunk({"role": "assistant", "content": ""})


async def streamed_reply(script: list, config: HarnessConfig, tools: list) -> tuple[str, str, object]:
    """The text the user was streamed, the final text, the report."""
    sse = SSE()
    await sse.start()
    sse.script.extend(script)
    h = Harness(config, load_entry_points=False, environ={})
    agent = make_agent(model(sse, "gpt-main"), tools, h.middlewares())
    h.instrument(agent.toolkit)
    try:
        with h.acting_for(ALICE):
            events, final = await run(agent, "did my refund go through?")
    finally:
        await agent.model.client.close()
        await sse.close()
    shown = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    return shown, final.get_text_content() or "", h.last_report(agent)


CUT_ANSWER = ([ROLE, said("Your refund of $80 was issued "), said("and order A-1 is "), ("sleep", 3)], "stall")
FINISHING = {"submit_answer": ToolPolicy(role="finish")}


async def test_control_a_broken_stream_withholds_the_held_answer() -> None:
    shown, final, report = await streamed_reply(
        [(CUT_ANSWER[0], "abort")], HarnessConfig(tools=FINISHING, model_error_text="The model is unavailable."),
        [submit_answer])
    assert final == "The model is unavailable." and report.terminal_state is TerminalState.FAILED
    assert "refund" not in shown, shown


async def test_an_answer_the_deadline_cut_is_not_released_in_a_finishing_tool_run() -> None:
    RAN.clear()
    shown, final, report = await streamed_reply([CUT_ANSWER], HarnessConfig(tools=FINISHING, deadline_s=1.0),
                                                [submit_answer])
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert final.startswith("I could not complete this request") and not RAN
    assert "refund" not in shown, shown
    assert shown == final  # the stop's text, said in the cut answer's place, is shown


async def test_a_made_up_answer_the_deadline_cut_is_not_released_after_a_dependency_went_down() -> None:
    lookup = [ROLE, chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                           "function": {"name": "lookup_order", "arguments": ""}}]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"order_id": "A-1"}'}}]}),
              chunk({}, "tool_calls"), chunk(usage={"prompt_tokens": 100, "completion_tokens": 10,
                                                    "total_tokens": 110})]
    made_up = [ROLE, said("Your order A-1 has shipped "), said("and arrives on "), ("sleep", 3)]
    shown, final, report = await streamed_reply([(lookup, "done"), (made_up, "stall")],
                                                HarnessConfig(deadline_s=1.5), [lookup_order])
    assert report.terminal_state is TerminalState.INCOMPLETE
    assert "has shipp" not in final and "has shipp" not in shown, shown


def spoken(transcript: str) -> dict:
    """One streamed piece of a spoken answer: its audio and its transcript."""
    return {"audio": {"data": base64.b64encode(SPEECH).decode(), "transcript": transcript}}


async def spoken_reply(replies: list[Reply], config: HarnessConfig, tools: list) -> tuple[list, object, object]:
    server = FakeOpenAI()
    await server.start()
    server.plan(*replies)
    h = Harness(config, load_entry_points=False, environ={})
    agent = make_agent(model(server, "gpt-test"), tools, h.middlewares())
    h.instrument(agent.toolkit)
    try:
        with h.acting_for(ALICE):
            events, final = await run(agent, "what did you charge?")
    finally:
        await agent.model.client.close()
        await server.close()
    return events, final, h.last_report(agent)


async def test_a_withheld_answer_is_not_delivered_as_speech() -> None:
    events, final, report = await spoken_reply(
        [Reply(deltas=[spoken("Your card 4111 1111 "), spoken("1111 1111 was charged $80.")])],
        HarnessConfig(pii={"card": "block"}), [])
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "audit_failed")
    assert final.get_text_content().startswith("I'm sorry, I could not produce an answer")
    assert not [b for b in final.content if b.type == "data"], final.content


async def test_control_an_answer_that_stands_keeps_its_speech() -> None:
    events, final, report = await spoken_reply(
        [Reply(deltas=[spoken("Your order "), spoken("shipped.")])], HarnessConfig(), [])
    assert report.terminal_state is TerminalState.COMPLETED
    assert [b for b in final.content if b.type == "data"]
    assert [e for e in events if isinstance(e, DataBlockDeltaEvent)]


async def test_a_replaced_text_answer_is_not_streamed_as_speech() -> None:
    events, final, report = await spoken_reply(
        [Reply(deltas=[spoken("Your refund of $80 "), spoken("was issued.")]),
         Reply(tool_calls=[("submit_answer", {"answer": "Refund not possible: order A-1 shipped."})])],
        HarnessConfig(tools=FINISHING), [submit_answer])
    assert report.terminal_state is TerminalState.COMPLETED
    assert final.get_text_content() == "Refund not possible: order A-1 shipped."
    shown = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert "was issued" not in shown
    assert not [e for e in events if isinstance(e, DataBlockDeltaEvent)]
