"""MCP tool results as ra tool results (ra.mcp.results), and an MCP image on the wire."""

from __future__ import annotations

import base64

import mcp_types as types

from ra.agent import GenericProfile, Session, SessionConfig
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.mcp import McpServers
from ra.mcp.results import IMAGE_MAX_BYTES, to_tool_output
from ra.tools.registry import ToolRegistry
from tests.agent.support import FakeEnv
from tests.cli.support import chat_requests, enqueue_text, enqueue_tools
from tests.mcp.servers.kit import PNG, PNG_B64
from tests.mcp.support import kit
from tests.support.replay import ReplayServer


def out(*content: object, **fields: object) -> object:
    return to_tool_output(types.CallToolResult(content=list(content), **fields), server="s", tool="t")


def test_text_blocks_are_joined() -> None:
    result = out(types.TextContent(text="one"), types.TextContent(text="two"))
    assert result.content == "one\n\ntwo" and not result.is_error
    assert result.metadata == {"mcp_server": "s", "mcp_tool": "t"}


def test_is_error_makes_an_error_result() -> None:
    result = out(types.TextContent(text="no such repo"), is_error=True)
    assert result.is_error and result.content == "no such repo"


def test_an_image_becomes_the_result_image() -> None:
    result = out(types.ImageContent(data=PNG_B64, mime_type="image/png"))
    assert result.image_data == PNG and result.image_media_type == "image/png"
    assert "image/png" in result.content  # the model reads a line that says an image follows


def test_further_images_are_named_not_dropped_silently() -> None:
    gif = base64.b64encode(b"GIF89a...").decode()
    result = out(
        types.TextContent(text="two"),
        types.ImageContent(data=PNG_B64, mime_type="image/png"),
        types.ImageContent(data=gif, mime_type="image/gif"),
    )
    assert result.image_data == PNG
    assert result.content.startswith("two\n\n")
    assert "[image: image/gif, 9 bytes, not shown: a tool result carries one image]" in result.content


def test_an_oversized_or_broken_image_is_described_instead() -> None:
    big = base64.b64encode(b"\0" * (IMAGE_MAX_BYTES + 3)).decode()
    result = out(types.ImageContent(data=big, mime_type="image/png"))
    assert result.image_data is None and "larger than" in result.content
    broken = out(types.ImageContent(data="%%%not base64", mime_type="image/png"))
    assert broken.image_data is None and "not valid base64" in broken.content


def test_resources_and_links_are_rendered() -> None:
    result = out(
        types.EmbeddedResource(
            resource=types.TextResourceContents(uri="file:///a.txt", mime_type="text/plain", text="hi")
        ),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(uri="file:///b.bin", mime_type="application/zip", blob="AAAA")
        ),
        types.EmbeddedResource(
            resource=types.BlobResourceContents(uri="file:///c.png", mime_type="image/png", blob=PNG_B64)
        ),
        types.ResourceLink(name="doc", uri="https://x/doc", mime_type="text/html", description="the doc"),
        types.AudioContent(data="AAAA", mime_type="audio/wav"),
    )
    assert result.content.startswith("[resource <file:///a.txt> (text/plain)]\nhi")
    assert "[resource <file:///b.bin>: application/zip, 3 bytes, not shown]" in result.content
    assert "[resource link: doc <https://x/doc> (text/html): the doc]" in result.content
    assert "[audio: audio/wav, 3 bytes, not shown]" in result.content
    assert result.image_data == PNG  # an image resource is an image
    assert "AAAA" not in result.content  # no base64 pasted into the text


def test_structured_content_is_shown_when_there_is_no_text() -> None:
    result = out(structured_content={"temp": 21.5})
    assert '"temp": 21.5' in result.content
    assert result.metadata["structured_content"] == {"temp": 21.5}
    both = out(types.TextContent(text="21.5 degrees"), structured_content={"temp": 21.5})
    assert both.content == "21.5 degrees"  # the text already says it
    assert both.metadata["structured_content"] == {"temp": 21.5}


def test_an_empty_result_says_so() -> None:
    assert out().content == "(the tool returned no content)"


async def test_an_mcp_image_reaches_a_chat_completions_model(replay_server: ReplayServer) -> None:
    """Chat Completions has no image in a tool message: the image follows as a user image part."""
    async with McpServers({"kit": kit()}) as servers:
        registry = ToolRegistry(servers.tools())
        adapter = OpenAICompatibleAdapter(api_key="test-key", base_url=f"{replay_server.base_url}/v1")
        profile = GenericProfile("openai-compatible", "m", registry, system_prompt="t", supports_streaming=True)
        session = Session(
            profile,
            FakeEnv(),
            Client(providers={"openai-compatible": adapter}),
            SessionConfig(prices={"m": ModelPrice.free()}),
        )
        enqueue_tools(replay_server, ("call_1", "mcp__kit__image", {}))
        enqueue_text(replay_server, "a pixel")
        try:
            result = await session.submit("what does the tool show?")
        finally:
            await session.close()
    assert result.text == "a pixel"
    second = chat_requests(replay_server)[1]
    messages = second["messages"]
    tool_index = next(i for i, m in enumerate(messages) if m.get("role") == "tool")
    assert messages[tool_index]["tool_call_id"] == "call_1"
    follow = messages[tool_index + 1]
    assert follow["role"] == "user"
    assert follow["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + PNG_B64},
    }
