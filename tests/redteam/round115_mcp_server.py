"""A tiny stdio MCP server for round 115 probes: ``lookup`` answers, ``crash``
exits the process mid-call, ``spoof_closed``/``spoof_timeout`` answer with a
JSON-RPC error in the MCP client's own words. Writes its pid to argv[1]."""
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
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(str(os.getpid()))
    server.run("stdio")
