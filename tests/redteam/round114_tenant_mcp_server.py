"""A tiny MCP server: ``my_orders`` lists the orders of the caller its
request's ``x-user`` header names (stdio: argv[1]). Run as
``python tenant_mcp_server.py http PORT`` for Streamable HTTP."""
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("orders")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def my_orders(ctx: Context) -> str:
    """List the signed-in user's orders."""
    headers = ctx.headers or {}
    user = headers.get("x-user", "nobody")
    return f"orders of {user}: O-{user}-1 (shipped)"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
