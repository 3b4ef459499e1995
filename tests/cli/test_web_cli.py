"""``ra --web``: the web tools end to end, against pages served on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, run_ra, tool_messages
from tests.support.replay import ReplayServer

PAGE = "<html><head><title>Release notes</title></head><body><h1>ra 0.1</h1><p>First release.</p></body></html>"


def test_web_open_and_a_search_without_a_key(replay_server: ReplayServer, tmp_path: Path) -> None:
    page_url = f"{replay_server.base_url}/notes.html"
    enqueue_tools(replay_server, ("w1", "web_open", {"url": page_url}))
    replay_server.enqueue(200, PAGE, {"content-type": "text/html; charset=utf-8"})
    enqueue_tools(replay_server, ("w2", "web_search", {"query": "ra release"}))
    enqueue_text(replay_server, "ra 0.1 is the first release.")
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "--web", "what is new?"]
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ra 0.1 is the first release.\n"
    assert "web_search needs BRAVE_SEARCH_API_KEY" in result.stderr  # said once, at the start
    page_request = replay_server.requests[1]
    assert (page_request.method, page_request.path) == ("GET", "/notes.html")
    bodies = chat_requests(replay_server)
    (opened,) = tool_messages(bodies[1])
    assert opened["content"].splitlines()[:3] == [f"URL: {page_url}", "Title: Release notes", "Lines 1-3 of 3"]
    assert "1 | # ra 0.1" in opened["content"] and "3 | First release." in opened["content"]
    searched = tool_messages(bodies[2])[-1]
    assert searched["tool_call_id"] == "w2"
    assert "BRAVE_SEARCH_API_KEY" in searched["content"]
