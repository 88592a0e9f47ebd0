"""A tiny stdio MCP server: ``lookup(order_id)`` answers; ``slow_lookup``
never answers in time (its upstream hangs)."""
import asyncio

from mcp.server.mcpserver import MCPServer
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


if __name__ == "__main__":
    server.run("stdio")
