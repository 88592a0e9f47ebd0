"""A tiny stdio MCP server whose ``find_order`` refuses an unknown order
with a JSON-RPC error (code -32000, the spec's generic "server error" of the
implementation-defined range): the server is up and answered."""
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations

server = MCPServer("orders")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def find_order(order_id: str) -> str:
    """Find an order."""
    if order_id != "A-1":
        raise MCPError(code=-32000, message=f"no order {order_id}")
    return f"order {order_id}: shipped"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def lookup_order(order_id: str) -> str:
    """Find an order (its refusal an isError result)."""
    if order_id != "A-1":
        raise ValueError(f"no order {order_id}")
    return f"order {order_id}: shipped"


if __name__ == "__main__":
    server.run("stdio")
