"""An MCP server (stdio, the PyPI `mcp` package) whose tool list changes, for troupe's tests.

It starts with `grow`, `whisper` and `drop_silently`. Calling `grow` adds `shout`, removes
`whisper` and sends `notifications/tools/list_changed`, as a server whose tools depend on its
state does. Calling `drop_silently` removes `whisper` without any notification (a server that
forgets to tell), so a later call to `whisper` is refused as an unknown tool.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing-tools")


def shout(text: str) -> str:
    """Say the text loudly."""
    return text.upper() + "!"


@server.tool()
def whisper(text: str) -> str:
    """Say the text quietly."""
    return text.lower()


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `shout`, remove `whisper`, and tell the client its tools changed."""
    server.add_tool(shout)
    server.remove_tool("whisper")
    await ctx.session.send_tool_list_changed()
    return "added shout, removed whisper"


@server.tool()
def drop_silently() -> str:
    """Remove `whisper` without telling the client."""
    server.remove_tool("whisper")
    return "removed whisper"


if __name__ == "__main__":
    server.run("stdio")
