"""A tiny MCP server, "orders", the MCP red-team tests start as a real
process: ``lookup`` answers; ``slow_lookup`` never answers in time (its
upstream hangs); ``find_order`` answers an unknown order with a JSON-RPC
error in the MCP client's own words for a closed connection, ``slow_find``
with its words for a timeout; ``crash`` exits the process mid-call.

``python mcp_orders_server.py [PIDFILE]``: over stdio, writing its pid to
PIDFILE; ``python mcp_orders_server.py --http PORT``: streamable HTTP."""
import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations

RO = ToolAnnotations(readOnlyHint=True)
server = MCPServer("orders")


@server.tool(annotations=RO)
async def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


@server.tool(annotations=RO)
async def slow_lookup(order_id: str) -> str:
    """Look up an order (slow upstream)."""
    await asyncio.sleep(30)
    return f"order {order_id}: shipped"


@server.tool(annotations=RO)
async def find_order(order_id: str) -> str:
    """Find an order (a server error for an unknown one)."""
    if order_id != "A-1":
        raise MCPError(code=-32000, message="Connection closed")
    return f"order {order_id}: shipped"


@server.tool(annotations=RO)
async def slow_find(order_id: str) -> str:
    """Find an order (its upstream times out: the server says so)."""
    raise MCPError(code=-32001, message="Request 'tools/call' timed out")


@server.tool(annotations=RO)
async def crash(order_id: str) -> str:
    """Look up an order (the server dies mid-call)."""
    os._exit(1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        if len(sys.argv) > 1:
            with open(sys.argv[1], "w") as f:
                f.write(str(os.getpid()))
        server.run("stdio")
