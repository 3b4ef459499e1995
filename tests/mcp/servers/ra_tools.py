"""A script that serves a few ra tools with ``ra.mcp.serve``: the server tests/mcp/test_serve.py
starts (``python ra_tools.py stdio`` or ``python ra_tools.py http PORT``) and talks to with real
MCP clients. ``RA_TEST_MARKS`` names a directory where the slow tools leave marks (their start,
the pid of the command they run) so a test can tell what ran and whether it was stopped."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import ra.mcp
from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolError, ToolOutput

MARKS = Path(os.environ.get("RA_TEST_MARKS", "."))

# The smallest valid PNG (1x1, transparent).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def _object(**properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def add(args: dict, ctx) -> str:
    return str(args["a"] + args["b"])


async def wait(args: dict, ctx) -> str:
    (MARKS / f"wait-{args['tag']}.started").write_text(str(time.monotonic()))
    await asyncio.sleep(args["seconds"])
    return f"waited {args['tag']}"


def nap(args: dict, ctx) -> str:
    time.sleep(args["seconds"])  # blocking=True: runs in a worker thread
    return "rested"


def explode(args: dict, ctx) -> str:
    raise RuntimeError(f"the disk is on fire (key {os.environ.get('RA_TEST_API_KEY', '')})")


def refuse(args: dict, ctx) -> ToolOutput:
    return ToolOutput("no such ticket: 42", is_error=True, metadata={"internal": "do-not-send"})


def picture(args: dict, ctx) -> ToolOutput:
    return ToolOutput("a red dot", image_data=PNG, image_media_type="image/png", metadata={"secret": "host-only"})


async def environment(args: dict, ctx) -> str:
    result = await ctx.env.exec_command(
        'printf "%s|%s|%s" "$PWD" "${RA_TEST_API_KEY:-unset}" "${RA_TEST_PLAIN:-unset}"'
    )
    return result.stdout


async def long_command(args: dict, ctx) -> str:
    result = await ctx.env.exec_command(f"echo $$ > {MARKS / 'command.pid'}; exec sleep 60", timeout_ms=120_000)
    return result.output


def chatty(args: dict, ctx) -> str:
    print("a stray print() from a tool")  # must not reach the protocol stream
    sys.stdout.flush()
    return "said it"


def error_tool(args: dict, ctx) -> str:
    raise ToolError(args["message"])


TOOLS = [
    RegisteredTool(
        ToolDefinition("add", "Add two integers.", _object(a={"type": "integer"}, b={"type": "integer"})),
        add,
        effect="none",
    ),
    RegisteredTool(
        ToolDefinition("wait", "Sleep asynchronously.", _object(seconds={"type": "number"}, tag={"type": "string"})),
        wait,
        effect="read",
    ),
    RegisteredTool(
        ToolDefinition("nap", "Sleep in a thread.", _object(seconds={"type": "number"})), nap, blocking=True
    ),
    RegisteredTool(ToolDefinition("explode", "Always raises."), explode),
    RegisteredTool(ToolDefinition("refuse", "Returns an error result."), refuse, effect="network"),
    RegisteredTool(ToolDefinition("picture", "Returns an image."), picture, effect="read"),
    RegisteredTool(ToolDefinition("environment", "Runs a command."), environment, effect="execute"),
    RegisteredTool(ToolDefinition("long_command", "Runs a command for a minute."), long_command, effect="execute"),
    RegisteredTool(ToolDefinition("chatty", "Prints to stdout."), chatty, effect="none"),
    RegisteredTool(
        ToolDefinition("fail", "Raises ToolError.", _object(message={"type": "string"})), error_tool, effect="edit"
    ),
]


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    cwd = os.environ.get("RA_TEST_CWD")
    if transport == "http":
        ra.mcp.serve(*TOOLS, name="ra-test", version="9.9", transport="http", port=int(sys.argv[2]), cwd=cwd)
    else:
        ra.mcp.serve(*TOOLS, name="ra-test", version="9.9", cwd=cwd)
