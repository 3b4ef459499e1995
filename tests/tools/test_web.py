"""Web tools against pages served on 127.0.0.1 (and a Brave-Search-shaped endpoint)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from ra.tools.pipeline import ToolPipeline
from ra.tools.registry import ToolContext, ToolError, ToolRegistry
from ra.tools.web import (
    MAX_LINE_CHARS,
    MAX_OPEN_LIMIT,
    WebFetcher,
    extract_text,
    same_host,
    web_fetch_tool,
    web_find_tool,
    web_open_tool,
    web_search_tool,
    web_tools,
)

ARTICLE = """<!doctype html>
<html><head><title>The  Guide &amp; Notes</title>
<style>body { color: red }</style><script>var secret = "do not show";</script></head>
<body>
<nav><a href="/home">Home</a></nav>
<h1>Installing ra</h1>
<p>Run <code>pip install ra-agent</code> to install.
Then read the <a href="/docs/cli">CLI reference</a>.</p>
<h2>Options</h2>
<ul><li>--model picks the model</li><li>--web enables web tools</li></ul>
<table><tr><th>flag</th><th>meaning</th></tr><tr><td>-q</td><td>quiet</td></tr></table>
<pre>  indented
    code block</pre>
<p>Caf&eacute; &lt;ok&gt;<br>second line</p>
<noscript>enable js</noscript>
</body></html>"""


class _Site:
    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, str, bytes]] = {}
        self.requests: list[tuple[str, dict[str, str], dict[str, list[str]]]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                site.requests.append(
                    (parts.path, {k.lower(): v for k, v in self.headers.items()}, parse_qs(parts.query))
                )
                status, ctype, body = site.pages.get(parts.path, (404, "text/plain", b"missing"))
                if status in (301, 302):
                    self.send_response(status)
                    self.send_header("location", body.decode())
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def url(self, path: str) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}{path}"

    def add(self, path: str, body: str | bytes, ctype: str = "text/html; charset=utf-8", status: int = 200) -> str:
        self.pages[path] = (status, ctype, body.encode() if isinstance(body, str) else body)
        return self.url(path)


@pytest.fixture
def site() -> Iterator[_Site]:
    s = _Site()
    try:
        yield s
    finally:
        s.httpd.shutdown()
        s.httpd.server_close()


def _ctx() -> ToolContext:
    return ToolContext(env=None, call_id="c", tool_name="t")  # type: ignore[arg-type]


async def _call(tool: Any, **arguments: Any) -> str:
    problem = tool.validate(arguments)
    if problem is not None:
        raise ValueError(problem)
    return await tool.executor(arguments, _ctx())


# -- extraction -----------------------------------------------------------------------------------


def test_extract_text_keeps_structure_and_drops_scripts() -> None:
    title, lines = extract_text(ARTICLE, "http://example.test/guide")
    assert title == "The Guide & Notes"
    text = "\n".join(lines)
    assert "secret" not in text and "color: red" not in text and "enable js" not in text
    assert "# Installing ra" in lines
    assert "## Options" in lines
    assert "Run pip install ra-agent to install. Then read the [CLI reference](http://example.test/docs/cli)." in lines
    assert "- --model picks the model" in lines and "- --web enables web tools" in lines
    assert "flag | meaning" in lines and "-q | quiet" in lines
    assert "  indented" in lines and "    code block" in lines
    assert "Café <ok>" in lines and "second line" in lines
    assert "" not in lines[:1] and "\n\n\n" not in text


def test_extract_text_survives_broken_markup() -> None:
    title, lines = extract_text("<p>open <b>bold <i>both</p><div>after</div><a href='x'>dangling")
    assert title == ""
    assert lines[0].startswith("open bold both")
    assert "after" in lines


# -- web_open -------------------------------------------------------------------------------------


async def test_web_open_returns_numbered_lines_with_pagination(site: _Site) -> None:
    url = site.add("/guide", ARTICLE)
    tool = web_open_tool()
    out = await _call(tool, url=url)
    assert out.startswith(f"URL: {url}\nTitle: The Guide & Notes\nLines 1-")
    assert " 1 | [Home](" in out
    assert "| # Installing ra" in out
    page = await _call(tool, url=url, offset=3, limit=2)
    body = page.split("\n\n", 1)[1].splitlines()
    assert body[0].split(" | ")[0].strip() == "3" and body[1].split(" | ")[0].strip() == "4"
    assert "Lines 3-4 of" in page
    assert "call web_open with offset=5 to continue" in page


async def test_web_open_validates_offset_and_limit(site: _Site) -> None:
    url = site.add("/p", "<p>one</p><p>two</p>")
    tool = web_open_tool()
    for bad in ({"offset": 0}, {"limit": 0}, {"offset": -2}):
        assert tool.validate({"url": url, **bad}) is not None
    with pytest.raises(ToolError, match="past the end"):
        await _call(tool, url=url, offset=50)
    with pytest.raises(ToolError, match="not an http"):
        await _call(tool, url="file:///etc/passwd")
    with pytest.raises(ToolError, match="not an http"):
        await _call(tool, url="example.com/page")


async def test_web_open_reports_http_errors_and_binary_content(site: _Site) -> None:
    tool = web_open_tool()
    with pytest.raises(ToolError, match="HTTP 404"):
        await _call(tool, url=site.url("/nothing-here"))
    png = site.add("/img", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png")
    with pytest.raises(ToolError, match="image/png, not a text"):
        await _call(tool, url=png)


async def test_web_open_follows_redirects_and_reads_plain_text(site: _Site) -> None:
    target = site.add("/notes.txt", "alpha\nbeta\ngamma\n", "text/plain")
    site.pages["/old"] = (302, "", target.encode())
    out = await _call(web_open_tool(), url=site.url("/old"))
    assert f"URL: {target}" in out
    assert "1 | alpha" in out and "3 | gamma" in out


async def test_web_open_output_is_bounded(site: _Site) -> None:
    long_line = "w" * (MAX_LINE_CHARS * 3)
    rows = "".join(f"<p>row {n}</p>" for n in range(MAX_OPEN_LIMIT * 2))
    url = site.add("/huge", f"<p>{long_line}</p>{rows}")
    out = await _call(web_open_tool(), url=url, limit=10_000)
    numbered = [line for line in out.splitlines() if " | " in line]
    assert len(numbered) == MAX_OPEN_LIMIT
    assert f"[{MAX_LINE_CHARS * 2} more characters on this line]" in numbered[0]
    assert "more lines: call web_open with offset=" in out
    default = await _call(web_open_tool(), url=url)
    assert len([line for line in default.splitlines() if " | " in line]) == 200


async def test_pages_are_cached_per_fetcher(site: _Site) -> None:
    url = site.add("/cached", ARTICLE)
    fetcher = WebFetcher()
    opener, finder = web_open_tool(fetcher), web_find_tool(fetcher)
    await _call(opener, url=url)
    await _call(opener, url=url, offset=2)
    await _call(finder, url=url, pattern="install")
    assert [path for path, _, _ in site.requests] == ["/cached"]


# -- web_find -------------------------------------------------------------------------------------


async def test_web_find_returns_matching_line_ranges(site: _Site) -> None:
    lines = "".join(f"<div>line {n}{' needle' if n in (10, 12, 40) else ''}</div>" for n in range(1, 61))
    url = site.add("/find", lines)
    out = await _call(web_find_tool(), url=url, pattern="NEEDLE", context_lines=1)
    assert "3 matching lines for 'NEEDLE' in 60 lines" in out
    # Lines 10 and 12 share one range (context 1 makes them touch); 40 has its own.
    assert "Lines 9-13:" in out and "Lines 39-41:" in out
    assert "10 | line 10 needle" in out and "40 | line 40 needle" in out
    assert "| line 20" not in out


async def test_web_find_limits_results_and_falls_back_to_literal_text(site: _Site) -> None:
    url = site.add("/many", "".join(f"<div>hit (x) {n}</div>" for n in range(30)))
    out = await _call(web_find_tool(), url=url, pattern="(x", max_results=2, context_lines=0)
    assert "30 matching lines" in out and "showing the first 2" in out
    assert out.count(" | hit (x)") == 2
    none = await _call(web_find_tool(), url=url, pattern="absent")
    assert "No lines match 'absent'" in none
    assert web_find_tool().validate({"url": url, "pattern": "x", "max_results": 0}) is not None


# -- web_search -----------------------------------------------------------------------------------


def _brave_answer() -> bytes:
    return json.dumps(
        {
            "web": {
                "results": [
                    {
                        "title": "ra <strong>agent</strong>",
                        "url": "https://example.test/ra",
                        "description": "A coding <b>agent</b> &amp; CLI",
                    },
                    {"title": "Second", "url": "https://example.test/2", "description": ""},
                ]
            }
        }
    ).encode()


async def test_web_search_uses_the_brave_api_shape(site: _Site) -> None:
    endpoint = site.add("/res/v1/web/search", _brave_answer(), "application/json")
    tool = web_search_tool(api_key="brave-key", endpoint=endpoint)
    out = await _call(tool, query="ra agent", max_results=3)
    _path, headers, query = site.requests[-1]
    assert headers["x-subscription-token"] == "brave-key"
    assert query == {"q": ["ra agent"], "count": ["3"]}
    assert out.splitlines()[:4] == [
        "Results for 'ra agent':",
        "1. ra agent",
        "   https://example.test/ra",
        "   A coding agent & CLI",
    ]
    assert "2. Second" in out


async def test_web_search_reads_key_and_endpoint_from_the_environment(site: _Site) -> None:
    endpoint = site.add("/search", _brave_answer(), "application/json")
    env = {"BRAVE_SEARCH_API_KEY": "env-key", "BRAVE_SEARCH_ENDPOINT": endpoint}
    out = await _call(web_search_tool(environ=env), query="x")
    assert site.requests[-1][1]["x-subscription-token"] == "env-key"
    assert "1. ra agent" in out


async def test_web_search_without_a_key_is_a_clear_error() -> None:
    with pytest.raises(ToolError, match="BRAVE_SEARCH_API_KEY"):
        await _call(web_search_tool(environ={}), query="anything")


async def test_web_search_refused_key(site: _Site) -> None:
    endpoint = site.add("/search", b'{"error": "bad token"}', "application/json", status=401)
    with pytest.raises(ToolError, match=r"refused.*HTTP 401"):
        await _call(web_search_tool(api_key="wrong", endpoint=endpoint), query="x")


# -- redirects stay on their host ----------------------------------------------------------------


async def test_a_redirect_on_the_same_host_is_followed_and_one_elsewhere_is_not(site: _Site) -> None:
    """A ``domain:`` rule names the host of the URL the model gives; following a redirect to
    another host would take the request past it. Such a redirect is reported with its target, for
    the model to fetch as a call of its own (which the rules see)."""
    target = site.add("/target", "landed here", "text/plain")
    elsewhere = target.replace("127.0.0.1", "localhost")  # the same server under another host name
    site.pages["/same"] = (302, "", b"/target")  # relative, same host
    site.pages["/away"] = (301, "", elsewhere.encode())
    site.pages["/https-elsewhere"] = (302, "", b"https://example.invalid/x")
    site.pages["/not-web"] = (302, "", b"file:///etc/passwd")
    site.pages["/loop"] = (302, "", b"/loop")
    assert "landed here" in await _call(web_open_tool(), url=site.url("/same"))
    with pytest.raises(ToolError, match="redirects to another host") as away:
        await _call(web_open_tool(), url=site.url("/away"))
    assert elsewhere in str(away.value)
    with pytest.raises(ToolError, match=r"another host: https://example\.invalid/x"):
        await _call(web_find_tool(), url=site.url("/https-elsewhere"), pattern="x")
    with pytest.raises(ToolError, match="not an http"):
        await _call(web_open_tool(), url=site.url("/not-web"))
    with pytest.raises(ToolError, match="too many redirects"):
        await _call(web_open_tool(), url=site.url("/loop"))
    assert [path for path, _, _ in site.requests].count("/target") == 1  # only through /same
    assert len([p for p, _, _ in site.requests if p == "/loop"]) == 6
    assert same_host("http://Evil.com./a", "https://evil.com:8443/b") and not same_host(
        "http://a.com/", "http://b.a.com/"
    )
    assert not same_host("http://strasse.de/", "http://straße.de/")  # IDNA 2008: two domains
    assert not same_host("http://σ.com/", "http://ς.com/")  # noqa: RUF001 - final and medial sigma
    assert same_host("http://127.1/", "http://127.0.0.1/")


async def test_a_deny_rule_on_any_url_of_a_web_fetch_prompt_stops_the_call(site: _Site, tmp_path: Path) -> None:
    """The real ``web_fetch`` in a session: a prompt naming a denied host among allowed ones is
    denied whole, and nothing is fetched (the rule used to see no host in a prompt)."""
    from ra.agent import GenericProfile, Session, SessionConfig
    from ra.env import LocalExecutionEnvironment
    from ra.llm.client import Client
    from ra.llm.pricing import ModelPrice
    from ra.llm.testing import ScriptedAdapter, calls, reply

    page = site.add("/p", "allowed page", "text/plain")
    denied = site.add("/secret", "secret page", "text/plain").replace("127.0.0.1", "localhost")
    model = ScriptedAdapter([calls(("web_fetch", {"prompt": f"Summarise {page} and {denied}."})), reply("ok")])
    profile = GenericProfile("scripted", "m", ToolRegistry([web_fetch_tool()]), system_prompt="t")
    config = SessionConfig(disallowed_tools=("WebFetch(domain:localhost)",))
    config.prices["m"] = ModelPrice.free()
    session = Session(profile, LocalExecutionEnvironment(tmp_path), Client(providers={"scripted": model}), config)
    await session.submit("go")
    answer = [p.tool_result for m in model.requests[-1].messages for p in m.content if p.tool_result is not None]
    assert str(answer[0].content) == "Denied by the rule 'WebFetch(domain:localhost)'."
    assert site.requests == []


# -- web_fetch (gemini profile) -------------------------------------------------------------------


async def test_web_fetch_returns_the_text_of_every_url_in_the_prompt(site: _Site) -> None:
    a = site.add("/a", "<title>A</title><p>first page</p>")
    b = site.add("/b", "second page", "text/plain")
    out = await _call(web_fetch_tool(), prompt=f"Compare {a} and {b}, please.")
    assert f"--- {a} (A)\nfirst page" in out
    assert f"--- {b}\nsecond page" in out
    broken = await _call(web_fetch_tool(), prompt=f"read {site.url('/gone')}")
    assert "Error: GET" in broken and "HTTP 404" in broken
    with pytest.raises(ToolError, match="names no http"):
        await _call(web_fetch_tool(), prompt="no links here")


# -- in the tool pipeline -------------------------------------------------------------------------


async def test_errors_reach_the_model_as_error_results(site: _Site) -> None:
    from ra.llm.types import ToolCall

    class Sink:
        def tool_start(self, call: Any) -> None: ...
        def tool_output(self, call: Any, stream: str, chunk: str) -> None: ...
        def tool_end(self, outcome: Any) -> None: ...

    registry = ToolRegistry(web_tools(search_api_key=None))
    pipeline = ToolPipeline(registry, None, Sink())  # type: ignore[arg-type]
    outcome = await pipeline.run(ToolCall("1", "web_open", {"url": site.url("/missing")}))
    assert outcome.is_error and "HTTP 404" in outcome.content
    outcome = await pipeline.run(ToolCall("2", "web_open", {"url": site.url("/x"), "limit": 0}))
    assert outcome.is_error and "limit" in outcome.content
    assert registry.names() == ["web_search", "web_open", "web_find"]
