"""A real MCP server written with the SDK, for the tests: over stdio (no argument) or streamable
HTTP (`--http PORT`). Its tools show what the assistant must pass on: arguments, the environment
of a stdio server, the headers of an HTTP one, and a server that dies."""
from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sample")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def setting(name: str) -> str:
    """The value of one environment variable of this server."""
    return os.environ.get(name, "")


@server.tool()
def header(name: str, context: Context) -> str:
    """The value of one header of the HTTP request that called this tool."""
    request = context.request_context.request
    return request.headers.get(name, "") if request is not None else ""


@server.tool()
def secret() -> str:
    """A tool the administrator does not allow."""
    return "should not be called"


@server.tool()
def stop() -> str:
    """End this server's process at once (a crash, as far as the client can tell)."""
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
