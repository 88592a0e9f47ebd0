"""A tiny streamable-HTTP MCP server: ``lookup`` answers, ``crash`` exits the
process mid-call (an OOM kill, a crash). argv: port."""
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

RO = ToolAnnotations(readOnlyHint=True)
server = MCPServer("orders")


@server.tool(annotations=RO)
async def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


@server.tool(annotations=RO)
async def slow(order_id: str) -> str:
    """Look up an order (its upstream hangs)."""
    import asyncio
    await asyncio.sleep(30)
    return "late"


@server.tool(annotations=RO)
async def crash(order_id: str) -> str:
    """Look up an order (the server dies mid-call)."""
    os._exit(1)


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
