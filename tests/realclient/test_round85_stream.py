"""Red team, round 85, AgentScope's real ``OpenAIChatModel`` streaming from
a local server: the text and thinking of a round that is no final answer
(text before a tool call, thinking in a tool round, a thinking-only step)
were redacted in the stream but stored raw in the agent's context; the
fallback after an answer the deadline cut mid-stream came as more of the
cut text block, not as a block of its own (as the README says)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from agentscope.credential import OpenAICredential
from agentscope.event import (
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ThinkingBlockDeltaEvent,
)
from agentscope.model import OpenAIChatModel
from aiohttp import web
from pydantic import SecretStr
from scripted import make_agent, run

from agentscope_harness import Harness, HarnessConfig, Principal, TerminalState

KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
EXACT = "tenant-db-pass-9f8e7d6c"


def chunk(delta=None, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-test",
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}


def call(cid: str, name: str, args: str) -> list[dict]:
    return [chunk({"tool_calls": [{"index": 0, "id": cid, "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}),
            chunk({}, "tool_calls")]


FIRST_ROUNDS = {
    "text_before_a_tool_call": [chunk({"content": f"Your key is {KEY[:9]}"}), chunk({"content": f"{KEY[9:]} and {EXACT}."}),
                                *call("c1", "lookup", '{"q": "x"}')],
    "thinking_in_a_tool_round": [chunk({"reasoning_content": f"The key is {KEY[:9]}"}),
                                 chunk({"reasoning_content": f"{KEY[9:]} and {EXACT}."}),
                                 *call("c1", "lookup", '{"q": "x"}')],
    "thinking_only_round": [chunk({"reasoning_content": f"The key is {KEY[:9]}"}),
                            chunk({"reasoning_content": f"{KEY[9:]} and {EXACT}."}), chunk({}, "stop")],
}


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): The query.
    """
    return "nothing"


@pytest.fixture
async def server():
    script: list[list[dict]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.json()
        chunks = script.pop(0) if script else [chunk({"content": "All set."}), chunk({}, "stop")]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for c in [chunk({"role": "assistant", "content": ""}), *chunks]:
            await resp.write(f"data: {json.dumps(c)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    yield script, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    await runner.cleanup()


@pytest.mark.parametrize("first", list(FIRST_ROUNDS))
async def test_stored_context_keeps_no_secret_of_an_intermediate_round(server, first: str) -> None:
    script, base_url = server
    script.append(FIRST_ROUNDS[first])
    model = OpenAIChatModel(credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=base_url),
                            model="gpt-test", stream=True, max_retries=0, client_kwargs={"max_retries": 0})
    h = Harness(HarnessConfig(secret_values=[EXACT]), load_entry_points=False)
    agent = make_agent(model, [lookup], middlewares=h.middlewares())
    with h.acting_for(Principal(user_id="u-42")):
        events, final = await run(agent, "go")
    await model.client.close()
    streamed = "".join(e.delta for e in events if isinstance(e, (TextBlockDeltaEvent, ThinkingBlockDeltaEvent)))
    # the stream and the final message hold: redacted
    assert KEY not in streamed and EXACT not in streamed and "[redacted:openai_key]" in streamed
    assert final.get_text_content() == "All set."
    assert h.last_report(agent).terminal_state is TerminalState.COMPLETED
    # the stored conversation does not
    stored = json.dumps([m.model_dump(mode="json") for m in agent.state.context])
    assert KEY not in stored, f"{first}: the stored context keeps the key raw"
    assert EXACT not in stored, f"{first}: the stored context keeps the secret value raw"


async def test_stored_context_keeps_no_configured_pii_of_text_before_a_tool_call(server) -> None:
    """The same with ``HarnessConfig.pii``: the email is rewritten in the
    stream, kept whole in the stored context."""
    script, base_url = server
    script.append([chunk({"content": "I will write to john.doe@"}), chunk({"content": "example.com now."}),
                   *call("c1", "lookup", '{"q": "x"}')])
    model = OpenAIChatModel(credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=base_url),
                            model="gpt-test", stream=True, max_retries=0, client_kwargs={"max_retries": 0})
    h = Harness(HarnessConfig(pii={"email": "redact"}), load_entry_points=False)
    agent = make_agent(model, [lookup], middlewares=h.middlewares())
    with h.acting_for(Principal(user_id="u-42")):
        events, _ = await run(agent, "go")
    await model.client.close()
    streamed = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert "john.doe" not in streamed and "[pii:email]" in streamed
    stored = json.dumps([m.model_dump(mode="json") for m in agent.state.context])
    assert "john.doe@example.com" not in stored, "the stored context keeps the email raw"


async def test_deadline_fallback_follows_a_cut_answer_as_a_new_text_block() -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for c in [chunk({"role": "assistant", "content": ""}), chunk({"content": "Your refund of $80 was issued "}),
                  chunk({"content": "and order A-1 is "})]:
            await resp.write(f"data: {json.dumps(c)}\n\n".encode())
        await asyncio.sleep(5)  # the provider stalls: the run's deadline cuts the call
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.2)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    model = OpenAIChatModel(
        credential=OpenAICredential(api_key=SecretStr("sk-test"), base_url=f"http://127.0.0.1:{sock.getsockname()[1]}/v1"),
        model="gpt-test", stream=True, max_retries=0, client_kwargs={"max_retries": 0})
    try:
        h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
        agent = make_agent(model, [], middlewares=h.middlewares())
        with h.acting_for(Principal(user_id="u-42")):
            events, final = await run(agent, "refund?")
    finally:
        await model.client.close()
        await runner.cleanup()
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    assert final.get_text_content().startswith("I could not complete this request")
    model_block = next(e.block_id for e in events if isinstance(e, TextBlockDeltaEvent) and "refund" in e.delta)
    fallback_block = next(e.block_id for e in events if isinstance(e, TextBlockDeltaEvent) and "could not complete" in e.delta)
    starts = [e.block_id for e in events if isinstance(e, TextBlockStartEvent)]
    assert fallback_block != model_block and fallback_block in starts, (
        f"the fallback was streamed inside the cut answer's block {model_block} (text block starts: {starts})")
    ends = [e.block_id for e in events if isinstance(e, TextBlockEndEvent)]
    assert ends.index(model_block) < ends.index(fallback_block)  # the cut block ends first, then the fallback's
    fallback = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent) and e.block_id == fallback_block)
    assert fallback == final.get_text_content()  # the block is the answer, no paragraph break before it
