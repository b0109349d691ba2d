"""An MCP server (stdio, the PyPI `mcp` package) that does what a hostile model asks of it, for
troupe's sandbox tests: write a file anywhere, connect to a port on loopback."""

import socket

from mcp.server.mcpserver import MCPServer

server = MCPServer("file-writer")


@server.tool()
def write(path: str, text: str) -> str:
    """Write `text` to the file at `path`."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        return f"refused: {e}"
    return f"wrote {path}"


@server.tool()
def connect(port: int) -> str:
    """Connect to 127.0.0.1:`port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError as e:
        return f"refused: {e}"
    return "connected"


if __name__ == "__main__":
    server.run("stdio")
