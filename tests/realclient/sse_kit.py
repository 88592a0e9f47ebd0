"""A tiny OpenAI-style SSE server with explicit chunk lists and explicit endings."""
import asyncio
import json
import socket

from aiohttp import web


def chunk(delta=None, finish=None, usage=None, model="gpt-main"):
    c = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
         "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        c["usage"] = usage
    return c


class SSE:
    """``script``: one (chunks, ending) per request; ending is "done" (``[DONE]``),
    "eof" (clean end without ``[DONE]``), "abort" (connection cut) or "stall" (hangs).
    A chunk may be ("sleep", seconds). Counts requests and chunks sent."""

    def __init__(self):
        self.script = []
        self.requests = []
        self.sent = []

    async def start(self):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.2)
        await self.runner.setup()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self.runner, sock).start()
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"

    async def close(self):
        await self.runner.cleanup()

    async def handle(self, request):
        body = await request.json()
        self.requests.append(body)
        chunks, ending = self.script.pop(0)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent = []
        self.sent.append(sent)
        for c in chunks:
            if isinstance(c, tuple) and c[0] == "sleep":
                await asyncio.sleep(c[1])
                continue
            await resp.write(f"data: {json.dumps(c)}\n\n".encode())
            sent.append(c)
        if ending == "done":
            await resp.write(b"data: [DONE]\n\n")
        elif ending == "abort":
            await asyncio.sleep(0.05)
            request.transport.abort()
            return resp
        elif ending == "stall":
            await asyncio.sleep(3600)
        await resp.write_eof()
        return resp
