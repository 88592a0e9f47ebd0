"""A tiny OpenAI-style SSE server with explicit chunk lists and explicit endings
(``side_kit.model`` points AgentScope's real ``OpenAIChatModel`` at it)."""
import asyncio
import json
import socket
import uuid

from aiohttp import web


def chunk(delta=None, finish=None, usage=None, model="gpt-main"):
    c = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model,
         "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        c["usage"] = usage
    return c


def usage(i=100, o=10):
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


def text_answer(text, u=(100, 10), pieces=4):
    """A streamed text answer in ``pieces`` deltas, then its usage."""
    step = max(1, len(text) // pieces)
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": text[i:i + step]}) for i in range(0, len(text), step)]
    out += [chunk({}, "stop")]
    return [*out, chunk(usage=usage(*u))] if u is not None else out


def call_answer(name, args, u=(100, 10)):
    """A streamed tool call, its arguments in three deltas, then its usage."""
    a = json.dumps(args)
    out = [chunk({"role": "assistant", "content": ""}),
           chunk({"tool_calls": [{"index": 0, "id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                                  "function": {"name": name, "arguments": ""}}]})]
    third = max(1, len(a) // 3)
    out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": a[i:i + third]}}]})
            for i in range(0, len(a), third)]
    out += [chunk({}, "tool_calls")]
    return [*out, chunk(usage=usage(*u))] if u is not None else out


class SSE:
    """``script``: one (chunks, ending) per request; ending is "done" (``[DONE]``),
    "eof" (clean end without ``[DONE]``), "abort" (connection cut) or "stall" (hangs);
    or ("status", code): an error answer. A chunk may be ("sleep", seconds). Counts
    requests and chunks sent; ``ended_by``: how each streamed request ended
    ("client-gone": the client closed it first)."""

    def __init__(self):
        self.script = []
        self.requests = []
        self.sent = []
        self.ended_by = {}

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
        return self

    async def close(self):
        await self.runner.cleanup()

    async def handle(self, request):
        body = await request.json()
        self.requests.append(body)
        at = len(self.requests) - 1
        chunks, ending = self.script.pop(0)
        if chunks == "status":
            kind = "rate_limit_exceeded" if ending == 429 else "server_error"
            return web.json_response({"error": {"message": f"scripted {ending}", "type": kind, "code": kind}},
                                     status=ending)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent = []
        self.sent.append(sent)
        try:
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
                self.ended_by[at] = ending
                return resp
            elif ending == "stall":
                await asyncio.sleep(3600)
            await resp.write_eof()
            self.ended_by[at] = ending
        except (asyncio.CancelledError, ConnectionResetError):
            self.ended_by[at] = "client-gone"
            raise
        return resp
