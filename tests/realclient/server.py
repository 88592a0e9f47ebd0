"""A scripted OpenAI-compatible chat-completions server (aiohttp, 127.0.0.1).

It lets tests drive AgentScope's real ``OpenAIChatModel`` (real ``openai``
client, real HTTP) through the cases a provider really produces: SSE with
tool-call arguments split across delta chunks, parallel calls interleaved by
``index``, a trailing usage chunk, slow answers, 429 / 500 errors. Every
request body is logged, so tests can assert on what the provider was sent.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["RUNAWAY_TEXT", "FakeOpenAI", "Reply", "fail"]

RUNAWAY_TEXT = "done"
"""What the server answers once its script is used up, so a runaway loop ends."""

ARG_PIECES = 3
"""Tool-call arguments are sent in at least this many delta chunks."""


@dataclass
class Reply:
    """One planned response. ``text`` may be a callable of the request body
    (to echo something the model was sent); a ``tool_calls`` argument given as
    a ``str`` is sent as raw (possibly malformed) JSON. ``status`` other than
    200 answers with an OpenAI-style error body instead."""

    text: str | Callable[[dict[str, Any]], str] | None = None
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    usage: tuple[int, int] | dict[str, Any] = (100, 10)
    """(prompt, completion) tokens, or the usage object as sent (a broken proxy's)."""
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    status: int = 200
    model: str | None = None
    drop_after: int | None = None
    """Streamed: the connection is cut after this many chunks (a provider
    that breaks mid-answer), with no last chunk and no ``[DONE]``."""
    reasoning: bool = False
    """Streamed: ``text`` is sent as thinking (``reasoning_content``)."""
    stall_after: int | None = None
    """Streamed: after this many chunks the server sends nothing more (a
    provider that hangs mid-answer) until the client gives up."""
    deltas: list[dict[str, Any]] | None = None
    """Streamed: these deltas as they are, in place of ``text``'s pieces (a
    thinking delta amid the text)."""


def fail(status: int, times: int = 1, delay_s: float = 0.0) -> list[Reply]:
    """``times`` error answers with ``status`` (extend the script with them,
    then with the success that follows)."""
    return [Reply(status=status, delay_s=delay_s) for _ in range(times)]


class FakeOpenAI:
    """The server: ``script`` is consumed one reply per request, ``requests``
    holds every request body in arrival order (failed attempts included),
    ``statuses`` the HTTP status each got, ``runaway`` counts requests
    answered after the script ran out."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.runaway = 0
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    def plan(self, *replies: Reply | list[Reply]) -> None:
        """Append replies (or lists of them, e.g. from ``fail``) to the script."""
        for reply in replies:
            self.script.extend(reply if isinstance(reply, list) else [reply])

    async def start(self) -> None:
        """Listen on a free port of 127.0.0.1."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        # handler_cancellation: a client that gave up (timeout) must not keep a
        # sleeping handler alive until shutdown
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.2)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @classmethod
    @asynccontextmanager
    async def running(cls) -> AsyncIterator[FakeOpenAI]:
        """A server started for the block, closed however it ends."""
        fake = cls()
        await fake.start()
        try:
            yield fake
        finally:
            await fake.close()

    # ---------------------------------------------------------------- serving

    def _next(self) -> Reply:
        if self.script:
            return self.script.popleft()
        self.runaway += 1
        return Reply(text=RUNAWAY_TEXT)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        reply = self._next()
        self.statuses.append(reply.status)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            return _error(reply.status)
        text = reply.text(body) if callable(reply.text) else reply.text
        model = reply.model or body.get("model", "unknown")
        calls = [
            (f"call_{uuid.uuid4().hex[:12]}", name,
             args if isinstance(args, str) else json.dumps(args))
            for name, args in reply.tool_calls
        ]
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, reply, model, text, calls, include_usage)
        return web.json_response(_completion(model, text, calls, reply.usage))

    async def _stream(
        self, request: web.Request, reply: Reply, model: str, text: str | None,
        calls: list[tuple[str, str, str]], include_usage: bool,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        first = True
        for sent, (delta, finish, usage) in enumerate(_chunks(text, calls, reply.usage, include_usage, reply.deltas)):
            if sent == reply.drop_after and request.transport is not None:
                request.transport.abort()
                return resp
            if sent == reply.stall_after:
                await asyncio.sleep(3600)  # cancelled when the client disconnects
            if not first and reply.chunk_delay_s:
                await asyncio.sleep(reply.chunk_delay_s)
            first = False
            if reply.reasoning and delta is not None and "content" in delta:
                delta = {"reasoning_content": delta["content"]}
            payload: dict[str, Any] = {
                "id": chunk_id, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [] if delta is None else [
                    {"index": 0, "delta": delta, "finish_reason": finish},
                ],
            }
            if usage is not None:
                payload["usage"] = usage
            await resp.write(f"data: {json.dumps(payload)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _usage(usage: tuple[int, int] | dict[str, Any]) -> dict[str, Any]:
    if isinstance(usage, dict):
        return usage
    return {
        "prompt_tokens": usage[0], "completion_tokens": usage[1],
        "total_tokens": usage[0] + usage[1],
    }


def _pieces(s: str, n: int) -> list[str]:
    """``s`` cut into ``n`` pieces (some may be empty for very short ``s``)."""
    step = max(1, -(-len(s) // n))
    parts = [s[i:i + step] for i in range(0, len(s), step)]
    return parts + [""] * (n - len(parts))


def _chunks(
    text: str | None, calls: list[tuple[str, str, str]], usage: tuple[int, int] | dict[str, Any],
    include_usage: bool, deltas: list[dict[str, Any]] | None = None,
) -> list[tuple[dict[str, Any] | None, str | None, dict[str, Any] | None]]:
    """The SSE deltas of one answer: ``(delta or None, finish_reason, usage)``.
    Text comes in small pieces; each tool call opens with its id and name,
    then its arguments follow in ``ARG_PIECES`` pieces, the calls' pieces
    interleaved by ``index`` as providers do with parallel calls."""
    out: list[tuple[dict[str, Any] | None, str | None, dict[str, Any] | None]] = [
        ({"role": "assistant", "content": ""}, None, None),
    ]
    if deltas is not None:
        out += [(delta, None, None) for delta in deltas]
    elif text:
        out += [({"content": piece}, None, None) for piece in _pieces(text, max(2, len(text) // 4))]
    for index, (call_id, name, _) in enumerate(calls):
        out.append(({"tool_calls": [{
            "index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": ""},
        }]}, None, None))
    pieces = [_pieces(args, ARG_PIECES) for _, _, args in calls]
    for step in range(ARG_PIECES):
        for index, parts in enumerate(pieces):
            out.append(({"tool_calls": [{
                "index": index, "function": {"arguments": parts[step]},
            }]}, None, None))
    out.append(({}, "tool_calls" if calls else "stop", None))
    if include_usage:
        out.append((None, None, _usage(usage)))
    return out


def _completion(
    model: str, text: str | None, calls: list[tuple[str, str, str]], usage: tuple[int, int] | dict[str, Any],
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": 0,
        "model": model,
        "choices": [{
            "index": 0, "message": message,
            "finish_reason": "tool_calls" if calls else "stop",
        }],
        "usage": _usage(usage),
    }


def _error(status: int) -> web.Response:
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    # retry-after-ms keeps the openai client's own backoff short in tests
    return web.json_response(
        {"error": {"message": f"scripted {status}", "type": kind, "code": kind}},
        status=status, headers={"retry-after-ms": "5"},
    )


# ------------------------------------------------ a context AgentScope compresses

SUMMARY = dict.fromkeys(("task_overview", "current_state", "important_discoveries", "next_steps", "context_to_preserve"), "s")
"""The arguments of AgentScope's summary tool (``generate_structured_output``)."""
LONG_PAGE = ("lorem ipsum dolor sit amet " * 600)[:14000]
"""A tool result that takes a 4,000-token context over its compression threshold."""


async def _page(url: str) -> str:
    """Fetch a page.

    Args:
        url (str): The page.
    """
    return LONG_PAGE
