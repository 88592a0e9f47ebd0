"""A TCP proxy before a real server (Redis) that loses or delays its
replies: the command ran on the server, its caller waits, or never hears."""

from __future__ import annotations

import asyncio


class ReplyProxy:
    """Forwards commands at once. While ``delay_s`` is set, each reply is
    held back that long; with ``drop_next`` set, the connection is dropped
    when the server's next reply arrives (once)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.delay_s = 0.0
        self.drop_next = False
        self.server: asyncio.Server | None = None
        self.conns: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        """Listen on 127.0.0.1; the proxy's port."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self.port)
        self.conns += [client_out, server_out]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, replies: bool) -> None:
            try:
                while data := await src.read(65536):
                    if replies and self.drop_next:
                        self.drop_next = False
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
