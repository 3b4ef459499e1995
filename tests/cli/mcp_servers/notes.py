"""A small MCP server for the ``ra`` command's tests, written with the ``mcp`` package (stdio).

``python notes.py [--name NAME] [--pidfile FILE]`` (``--pidfile``: its process id is written
there, so a test can check that no server outlives ``ra``). Tools: ``echo`` (the text back, with the server's name),
``touch`` (creates a file: the tests see from the file system whether a call ran), ``getenv``
(reads an environment variable the server was given) and ``peek`` (annotated read-only).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations


def build(name: str) -> MCPServer:
    server = MCPServer(name, version="0.1")

    @server.tool(description="Say the text back.")
    def echo(text: str) -> str:
        return f"{name} says: {text}"

    @server.tool(description="Create an empty file at path.")
    def touch(path: str) -> str:
        Path(path).touch()
        return f"created {path}"

    @server.tool(description="An environment variable of the server, or <unset>.")
    def getenv(variable: str) -> str:
        return os.environ.get(variable, "<unset>")

    @server.tool(description="Look without changing anything.", annotations=ToolAnnotations(read_only_hint=True))
    def peek() -> str:
        return "nothing to see"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="notes")
    parser.add_argument("--pidfile")
    args = parser.parse_args()
    if args.pidfile:
        Path(args.pidfile).write_text(str(os.getpid()))
    build(args.name).run("stdio")


if __name__ == "__main__":
    main()
