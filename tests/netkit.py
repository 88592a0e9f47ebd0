"""A TCP proxy before a real server (Redis) that loses or delays its
replies: the command ran on the server, its caller waits, or never hears;
or that is cut off from it (a partition)."""

from __future__ import annotations

import asyncio
import hashlib


class ReplyProxy:
    """Forwards commands at once. While ``delay_s`` is set, each reply is
    held back that long; with ``drop_next`` set, the connection is dropped
    when the server's next reply arrives (once); ``drop_after(marker)``: so
    is the reply to each of the next ``times`` commands holding ``marker``
    (a key, or a script's SHA1 as ``EVALSHA`` names it: ``sha``), counted
    in ``dropped``. ``down()`` cuts every connection and refuses new ones
    until ``up()``."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.delay_s = 0.0
        self.drop_next = False
        self.marker: bytes | None = None
        self.drops_left = 0
        self.dropped = 0
        self.is_down = False
        self.server: asyncio.Server | None = None
        self.conns: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        """Listen on 127.0.0.1; the proxy's port."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    def drop_after(self, marker: bytes, times: int = 1) -> None:
        self.marker, self.drops_left = marker.lower(), times

    def down(self) -> None:
        self.is_down = True
        for writer in self.conns:
            writer.close()
        self.conns.clear()

    def up(self) -> None:
        self.is_down = False

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        if self.is_down:
            client_out.close()
            return
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self.port)
        self.conns += [client_out, server_out]
        armed = [False]  # this connection's next reply is dropped

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, replies: bool) -> None:
            try:
                while data := await src.read(65536):
                    if self.is_down:
                        break
                    if not replies and self.drops_left and self.marker in data.lower():
                        armed[0], self.drops_left = True, self.drops_left - 1
                    if replies and (self.drop_next or armed[0]):
                        self.drop_next = armed[0] = False
                        self.dropped += 1
                        break
                    if replies and self.delay_s:
                        await asyncio.sleep(self.delay_s)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()
                if replies:
                    server_out.close()

        try:
            await asyncio.gather(pipe(client_in, server_out, False), pipe(server_in, client_out, True))
        except asyncio.CancelledError:
            pass

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.conns:
            writer.close()


def sha(script: str) -> bytes:
    """A Lua script's SHA1, as ``EVALSHA`` names it."""
    return hashlib.sha1(script.encode()).hexdigest().encode()
