"""Web tools: ``web_search``, ``web_open``, ``web_find`` (ra-spec) and ``web_fetch`` (gemini profile).

None of these is offered unless a host enables it (``ra --web``; a profile option), because each
one makes outbound HTTP requests from the host process.

* ``web_search(query, max_results?)`` asks the Brave Search API
  (``https://api.search.brave.com/res/v1/web/search``). Its key comes from the
  ``BRAVE_SEARCH_API_KEY`` environment variable (or the ``api_key`` argument of the factory);
  without one the tool answers with an error that says so. ``BRAVE_SEARCH_ENDPOINT`` points it at
  another server speaking the same API (a proxy, a test server).
* ``web_open(url, offset?, limit?)`` fetches a page and returns its text, extracted from HTML with
  the standard library's ``html.parser`` and numbered by line, one window at a time (``offset`` is
  1-indexed; ``limit`` >= 1), so a long page never floods the context.
* ``web_find(url, pattern, max_results?, context_lines?)`` fetches a page and returns only the
  line ranges around matches of ``pattern`` (a case-insensitive regular expression; a pattern that
  is not a valid expression is searched as plain text), with the same line numbers as
  ``web_open``, so the model can open the page right at a match.
* ``web_fetch(prompt)`` (gemini-cli's shape): fetches up to 20 http(s) URLs named in ``prompt`` and
  returns their text; the model then applies the instructions in the prompt itself.

Bounds: at most :data:`MAX_DOWNLOAD_BYTES` are read from a response, lines are cut at
:data:`MAX_LINE_CHARS`, pages and matches are windowed, and every tool declares an output limit.
Only ``http`` and ``https`` URLs are fetched. Pages are cached for a few minutes per
:class:`WebFetcher`, so paging through a document or searching it after opening it costs one
download. ``httpx`` is imported when a tool first runs.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

from ra.llm.types import ToolDefinition
from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolError

__all__ = [
    "BRAVE_SEARCH_ENDPOINT",
    "DEFAULT_OPEN_LIMIT",
    "MAX_DOWNLOAD_BYTES",
    "MAX_LINE_CHARS",
    "SEARCH_KEY_ENV",
    "PageText",
    "WebFetcher",
    "extract_text",
    "host_key",
    "prompt_urls",
    "same_host",
    "url_host",
    "web_fetch_tool",
    "web_find_tool",
    "web_open_tool",
    "web_search_tool",
    "web_tools",
]

BRAVE_SEARCH_ENDPOINT = "https://api.search.brave.com/res/v1/web/search"
#: Environment variable holding the Brave Search API key.
SEARCH_KEY_ENV = "BRAVE_SEARCH_API_KEY"
#: Environment variable that replaces the search endpoint (same API, another server).
SEARCH_ENDPOINT_ENV = "BRAVE_SEARCH_ENDPOINT"

MAX_DOWNLOAD_BYTES = 5 * 1024 * 1024
MAX_LINE_CHARS = 500
DEFAULT_OPEN_LIMIT = 200
MAX_OPEN_LIMIT = 2_000
DEFAULT_SEARCH_RESULTS = 5
MAX_SEARCH_RESULTS = 20
DEFAULT_FIND_RESULTS = 10
MAX_FIND_RESULTS = 50
DEFAULT_CONTEXT_LINES = 2
MAX_CONTEXT_LINES = 20
MAX_FETCH_URLS = 20
#: Characters of each page that ``web_fetch`` returns (the tool's total is bounded too).
FETCH_PAGE_CHARS = 20_000
_TIMEOUT_S = 20.0
_CACHE_TTL_S = 300.0
#: Redirects followed on one host before a fetch gives up.
_MAX_REDIRECTS = 5
_CACHE_SIZE = 16
_USER_AGENT = "ra-agent web tools (+https://example.invalid/ra)"

# -- HTML to text ------------------------------------------------------------------------------

#: Elements whose content is never text for a reader.
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "math", "head", "iframe", "object", "canvas"})
#: Elements that start and end a block of text (a line break before and after).
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog", "div",
        "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
        "h6", "header", "hr", "html", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
        "table", "tbody", "tfoot", "thead", "tr", "ul",
    }
)  # fmt: skip
#: Blocks set off from their neighbours by a blank line (other blocks just start a new line).
_PARAGRAPH = frozenset(
    {
        "article", "aside", "blockquote", "details", "dl", "figure", "footer", "form", "h1", "h2", "h3",
        "h4", "h5", "h6", "header", "hr", "main", "nav", "ol", "p", "pre", "section", "table", "ul",
    }
)  # fmt: skip
#: Void elements: no end tag follows, so they must not open a skip region.
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})
_SPACES = re.compile(r"[ \t\r\f\v\n]+")


class _Extractor(HTMLParser):
    """Collects readable text: blocks on their own lines, headings marked with ``#``, list items
    with ``-``, links as ``[text](url)``, ``<pre>`` kept verbatim; scripts, styles and the head
    left out (except the title)."""

    def __init__(self, base_url: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.title = ""
        self.lines: list[str] = []
        self._line: list[str] = []
        self._skip = 0
        self._pre = 0
        self._in_title = False
        self._links: list[tuple[str | None, int]] = []  # (href, position in _line) of open <a>s

    # The parser calls these -------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
            return
        if tag in _SKIP:
            if tag not in _VOID:
                self._skip += 1
            return
        if self._skip:
            return
        if tag == "br":
            self._break()
        elif tag in _BLOCK:
            self._break(blank=tag in _PARAGRAPH)
            if tag == "pre":
                self._pre += 1
            elif tag == "li":
                self._line.append("- ")
            elif tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
                self._line.append("#" * int(tag[1]) + " ")
            elif tag == "hr":
                self.lines.append("---")
        elif tag == "a":
            href = dict(attrs).get("href")
            self._links.append((href, len(self._line)))
        elif tag in ("td", "th") and "".join(self._line).strip():
            self._line.append(" | ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br" and not self._skip:
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if tag in _SKIP:
            if tag not in _VOID and self._skip:
                self._skip -= 1
            return
        if self._skip:
            return
        if tag == "a" and self._links:
            href, start = self._links.pop()
            self._close_link(href, start)
        elif tag in _BLOCK:
            self._break(blank=tag in _PARAGRAPH)
            if tag == "pre" and self._pre:
                self._pre -= 1

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._skip or not data:
            return
        if self._pre:
            pieces = data.split("\n")
            for index, piece in enumerate(pieces):
                if index:
                    self._break(keep_blank=True)
                self._line.append(piece)
            return
        self._line.append(_SPACES.sub(" ", data))

    # Helpers ------------------------------------------------------------------------------------
    def _close_link(self, href: str | None, start: int) -> None:
        text = "".join(self._line[start:]).strip()
        if not href or not text or href.startswith(("#", "javascript:", "mailto:")):
            return
        url = urljoin(self.base_url, href) if self.base_url else href
        if urlsplit(url).scheme not in ("http", "https") or url == text:
            return
        del self._line[start:]
        self._line.append(f"[{text}]({url})")

    def _break(self, *, blank: bool = False, keep_blank: bool = False) -> None:
        """End the current line. ``blank``: also leave one blank line (between paragraphs, never
        several in a row); ``keep_blank``: an empty line is content (inside ``<pre>``)."""
        if self._links:  # a block inside a link: keep the link text, drop the target
            self._links = [(None, 0)] * len(self._links)
        raw = "".join(self._line)
        self._line = []
        line = raw.rstrip() if self._pre else raw.strip()
        if line or (keep_blank and self._pre):
            self.lines.append(line)
        if blank and self.lines and self.lines[-1] != "":
            self.lines.append("")

    def finish(self) -> tuple[str, list[str]]:
        self._break()
        lines = self.lines
        while lines and not lines[-1]:
            lines.pop()
        while lines and not lines[0]:
            lines.pop(0)
        return _SPACES.sub(" ", self.title).strip(), lines


def extract_text(html: str, base_url: str | None = None) -> tuple[str, list[str]]:
    """``(title, lines)`` of the readable text of an HTML document."""
    parser = _Extractor(base_url)
    try:
        parser.feed(html)
        parser.close()
    except AssertionError:  # html.parser gives up on some broken markup; keep what it read
        pass
    return parser.finish()


# -- fetching ----------------------------------------------------------------------------------


@dataclass(slots=True)
class PageText:
    """A fetched page as lines of text (1-indexed by the tools)."""

    url: str
    title: str
    lines: list[str]
    content_type: str


_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "+xml", "+json")


class WebFetcher:
    """Downloads pages (bounded, http/https only) and keeps the last few as text.

    One fetcher is shared by the web tools of a session, so ``web_open`` pages and ``web_find``
    searches of the same URL reuse one download for :data:`_CACHE_TTL_S` seconds.
    """

    def __init__(
        self,
        *,
        timeout: float = _TIMEOUT_S,
        max_bytes: int = MAX_DOWNLOAD_BYTES,
        headers: Mapping[str, str] | None = None,
        cache_ttl: float = _CACHE_TTL_S,
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.headers = {"user-agent": _USER_AGENT, "accept": "text/html,text/plain;q=0.9,*/*;q=0.5"}
        self.headers.update(headers or {})
        self.cache_ttl = cache_ttl
        self._cache: OrderedDict[str, tuple[float, PageText]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    async def page(self, url: str) -> PageText:
        url = check_url(url)
        cached = self._cache.get(url)
        if cached is not None and time.monotonic() - cached[0] < self.cache_ttl:
            self._cache.move_to_end(url)
            return cached[1]
        lock = self._locks.setdefault(url, asyncio.Lock())
        async with lock:
            cached = self._cache.get(url)
            if cached is not None and time.monotonic() - cached[0] < self.cache_ttl:
                return cached[1]
            page = await self._download(url)
        self._locks.pop(url, None)
        self._cache[url] = (time.monotonic(), page)
        while len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return page

    async def _download(self, url: str) -> PageText:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
                return await self._get(client, url)
        except httpx.TimeoutException:
            raise ToolError(f"GET {url} timed out after {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"GET {url} failed: {exc.__class__.__name__}: {exc}") from None

    async def _get(self, client: Any, url: str) -> PageText:
        """GET ``url``, following redirects on its own host only: a redirect elsewhere is reported
        to the model, which may fetch the new URL as a call of its own - one the permission rules
        see (``domain:`` rules name hosts; a redirect must not carry a call past them)."""
        current = url
        for _ in range(_MAX_REDIRECTS + 1):
            async with client.stream("GET", current, headers=self.headers) as response:
                if response.is_redirect:
                    # Where httpx itself would go: the URL that would be requested, not a re-reading.
                    following = response.next_request
                    if following is None:
                        raise ToolError(f"GET {current} answered {response.status_code} with nowhere to go")
                    target = str(following.url)
                    if following.url.scheme not in ("http", "https"):
                        raise ToolError(f"GET {current} redirects to {target}, which is not an http(s) URL")
                    if not same_host(current, target):
                        raise ToolError(
                            f"GET {current} redirects to another host: {target} - to follow it, fetch "
                            "that URL (a request of its own, under the same permission rules)"
                        )
                    current = target
                    continue
                return await self._read(response, url)
        raise ToolError(f"GET {url}: too many redirects (more than {_MAX_REDIRECTS})")

    async def _read(self, response: Any, url: str) -> PageText:
        """The page of a response that is not a redirect (httpx's errors reach :meth:`_download`)."""
        if response.status_code >= 400:
            raise ToolError(f"GET {url} answered HTTP {response.status_code} {response.reason_phrase}".rstrip())
        content_type = response.headers.get("content-type", "").lower()
        kind = content_type.split(";", 1)[0].strip()
        if kind and not (kind.startswith(_TEXT_TYPES[0]) or any(t in kind for t in _TEXT_TYPES[1:])):
            raise ToolError(f"{url} is {kind}, not a text or HTML page; it cannot be shown as text")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= self.max_bytes:
                del body[self.max_bytes :]
                break
        encoding = response.charset_encoding or "utf-8"
        final_url = str(response.url)
        try:
            text = bytes(body).decode(encoding, errors="replace")
        except LookupError:
            text = bytes(body).decode("utf-8", errors="replace")
        if "html" in kind or (not kind and text.lstrip()[:1] == "<"):
            title, lines = extract_text(text, final_url)
        else:
            title, lines = "", text.splitlines()
        return PageText(final_url, title, [_clip(line) for line in lines], kind or "unknown")


def same_host(url: str, other: str) -> bool:
    """Whether two URLs reach one host (:func:`url_host`); the port and scheme may differ."""
    host = url_host(url)
    return host is not None and host == url_host(other)


def url_host(url: str) -> str | None:
    """The host a request to ``url`` goes to, as :func:`host_key` spells it, read by httpx - the
    web tools' own client - so that no URL names one host to a check and another to the request;
    None where httpx reads none."""
    import httpx

    try:
        raw = httpx.URL(url.strip()).raw_host.decode("ascii")
    except (httpx.InvalidURL, ValueError, TypeError, UnicodeError):
        return None
    return host_key(raw) or None


def host_key(name: str) -> str:
    """A host name or address in the one spelling a request reaches it by: lower case, without the
    root's trailing dot; an international name as httpx sends it (IDNA 2008: ``straße.de`` is
    ``xn--strae-oqa.de``, not ``strasse.de``); an IPv4 address in dotted quads whatever its
    spelling (``127.1``, ``0x7f.0.0.1``, ``2130706433`` are ``127.0.0.1`` to the resolver), an IPv6
    one compressed, and one that maps an IPv4 address as that address."""
    import ipaddress
    import socket

    host = name.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    if address is not None:
        return str(address)
    if host and _NUMERIC_HOST.fullmatch(host):
        try:
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            pass
    if host.isascii():
        return host
    import httpx

    try:
        return httpx.URL(f"http://{host}/").raw_host.decode("ascii").lower()
    except (httpx.InvalidURL, ValueError, UnicodeError):
        return host


#: What the resolver may read as an IPv4 address in another spelling (``inet_aton``'s forms).
_NUMERIC_HOST = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)(?:\.(?:0[xX][0-9a-fA-F]*|[0-9]+)){0,3}")


def check_url(url: str) -> str:
    """The URL, stripped, when it is an absolute http(s) URL; else a ToolError that says why."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ToolError(f"not an http(s) URL: {url!r} (give an absolute URL such as https://example.com/page)")
    return url


def _clip(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return line[:MAX_LINE_CHARS] + f" … [{len(line) - MAX_LINE_CHARS} more characters on this line]"


def _numbered(lines: list[str], first: int, width: int) -> list[str]:
    return [f"{n:>{width}} | {text}" for n, text in enumerate(lines, start=first)]


def _header(page: PageText) -> list[str]:
    head = [f"URL: {page.url}"]
    if page.title:
        head.append(f"Title: {page.title}")
    return head


# -- web_open ------------------------------------------------------------------------------------


async def _open(fetcher: WebFetcher, arguments: dict[str, Any]) -> str:
    offset = arguments.get("offset", 1)
    limit = arguments.get("limit", DEFAULT_OPEN_LIMIT)
    if offset < 1:
        raise ToolError(f"offset is a 1-indexed line number and must be >= 1, got {offset}")
    if limit < 1:
        raise ToolError(f"limit must be >= 1, got {limit}")
    limit = min(limit, MAX_OPEN_LIMIT)
    page = await fetcher.page(arguments["url"])
    total = len(page.lines)
    head = _header(page)
    if total == 0:
        return "\n".join([*head, "(the page has no readable text)"])
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of the page ({total} lines)")
    last = min(total, offset + limit - 1)
    head.append(f"Lines {offset}-{last} of {total}")
    body = _numbered(page.lines[offset - 1 : last], offset, len(str(last)))
    tail = []
    if last < total:
        tail.append(f"[{total - last} more lines: call web_open with offset={last + 1} to continue]")
    return "\n".join([*head, "", *body, *tail])


def web_open_tool(fetcher: WebFetcher | None = None, *, name: str = "web_open") -> RegisteredTool:
    fetcher = fetcher or WebFetcher()
    parameters = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "Absolute http(s) URL of the page."},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to return, 1-indexed (default 1).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"Number of lines to return (default {DEFAULT_OPEN_LIMIT}, at most {MAX_OPEN_LIMIT}).",
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    description = (
        "Fetch a web page and return its readable text (HTML converted to plain text, links as "
        "[text](url)) with line numbers, one window of lines at a time. Use offset to page through "
        "long documents and web_find to jump to the lines that mention something."
    )

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> str:
        return await _open(fetcher, arguments)

    return RegisteredTool(
        ToolDefinition(name, description, parameters), run, output_limit=60_000, effect=ToolEffect.NETWORK
    )


# -- web_find ------------------------------------------------------------------------------------


def _matcher(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error:
        return re.compile(re.escape(pattern), re.IGNORECASE)


async def _find(fetcher: WebFetcher, arguments: dict[str, Any]) -> str:
    pattern = arguments["pattern"]
    if not pattern:
        raise ToolError("pattern must not be empty")
    max_results = arguments.get("max_results", DEFAULT_FIND_RESULTS)
    context = arguments.get("context_lines", DEFAULT_CONTEXT_LINES)
    if max_results < 1:
        raise ToolError(f"max_results must be >= 1, got {max_results}")
    if context < 0:
        raise ToolError(f"context_lines must be >= 0, got {context}")
    max_results = min(max_results, MAX_FIND_RESULTS)
    context = min(context, MAX_CONTEXT_LINES)
    page = await fetcher.page(arguments["url"])
    regex = _matcher(pattern)
    hits = [i for i, line in enumerate(page.lines) if regex.search(line)]
    head = _header(page)
    if not hits:
        return "\n".join([*head, f"No lines match {pattern!r} ({len(page.lines)} lines searched)."])
    shown = hits[:max_results]
    # Merge the context windows of nearby matches into one range each.
    ranges: list[list[int]] = []
    for index in shown:
        start, end = max(0, index - context), min(len(page.lines) - 1, index + context)
        if ranges and start <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], end)
        else:
            ranges.append([start, end])
    width = len(str(ranges[-1][1] + 1))
    count = f"{len(hits)} matching line{'s' if len(hits) != 1 else ''}"
    if len(hits) > len(shown):
        count += f"; showing the first {len(shown)} (raise max_results for more)"
    out = [*head, f"{count} for {pattern!r} in {len(page.lines)} lines", ""]
    for start, end in ranges:
        out.append(f"Lines {start + 1}-{end + 1}:")
        out.extend(_numbered(page.lines[start : end + 1], start + 1, width))
        out.append("")
    return "\n".join(out).rstrip()


def web_find_tool(fetcher: WebFetcher | None = None, *, name: str = "web_find") -> RegisteredTool:
    fetcher = fetcher or WebFetcher()
    parameters = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "Absolute http(s) URL of the page."},
            "pattern": {
                "type": "string",
                "description": "Case-insensitive regular expression (or plain text) to look for.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "description": f"Matching lines to show (default {DEFAULT_FIND_RESULTS}, at most {MAX_FIND_RESULTS}).",
            },
            "context_lines": {
                "type": "integer",
                "minimum": 0,
                "description": f"Lines shown before and after each match (default {DEFAULT_CONTEXT_LINES}).",
            },
        },
        "required": ["url", "pattern"],
        "additionalProperties": False,
    }
    description = (
        "Search the text of a web page and return the numbered line ranges around each match. The "
        "line numbers are those of web_open, so you can open the page at a match with offset."
    )

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> str:
        return await _find(fetcher, arguments)

    return RegisteredTool(
        ToolDefinition(name, description, parameters), run, output_limit=30_000, effect=ToolEffect.NETWORK
    )


# -- web_search ------------------------------------------------------------------------------------

_TAGS = re.compile(r"<[^>]+>")


def _plain(text: Any) -> str:
    from html import unescape

    return _SPACES.sub(" ", unescape(_TAGS.sub("", str(text or "")))).strip()


async def _search(arguments: dict[str, Any], api_key: str | None, endpoint: str) -> str:
    import httpx

    query = arguments["query"].strip()
    if not query:
        raise ToolError("query must not be empty")
    count = arguments.get("max_results", DEFAULT_SEARCH_RESULTS)
    if count < 1:
        raise ToolError(f"max_results must be >= 1, got {count}")
    count = min(count, MAX_SEARCH_RESULTS)
    if not api_key:
        raise ToolError(
            f"web_search is not configured: set the {SEARCH_KEY_ENV} environment variable to a Brave "
            "Search API key (https://brave.com/search/api/). web_open and web_find work without it."
        )
    headers = {"accept": "application/json", "x-subscription-token": api_key, "user-agent": _USER_AGENT}
    try:
        async with httpx.AsyncClient(timeout=_TIMEOUT_S) as client:
            response = await client.get(endpoint, params={"q": query, "count": count}, headers=headers)
    except httpx.HTTPError as exc:
        raise ToolError(f"web search failed: {exc.__class__.__name__}: {exc}") from None
    if response.status_code in (401, 403):
        raise ToolError(f"web search was refused (HTTP {response.status_code}): check {SEARCH_KEY_ENV}")
    if response.status_code == 429:
        raise ToolError("web search rate limit reached (HTTP 429); wait a little before searching again")
    if response.status_code >= 400:
        raise ToolError(f"web search failed: HTTP {response.status_code} {response.text[:200]}".rstrip())
    try:
        data = response.json()
    except ValueError:
        raise ToolError("web search answered with something that is not JSON") from None
    results = ((data.get("web") or {}).get("results") or []) if isinstance(data, dict) else []
    if not results:
        return f"No results for {query!r}."
    out = [f"Results for {query!r}:"]
    for n, item in enumerate(results[:count], start=1):
        title = _plain(item.get("title")) or "(untitled)"
        out.append(f"{n}. {title}")
        out.append(f"   {item.get('url', '')}")
        snippet = _plain(item.get("description"))
        if snippet:
            out.append(f"   {snippet[:400]}")
    return "\n".join(out)


def web_search_tool(
    api_key: str | None = None,
    *,
    endpoint: str | None = None,
    environ: Mapping[str, str] | None = None,
    name: str = "web_search",
) -> RegisteredTool:
    """``web_search(query, max_results?)`` over the Brave Search API.

    The key and endpoint are read when the tool runs (``api_key`` / ``endpoint`` arguments win over
    ``BRAVE_SEARCH_API_KEY`` / ``BRAVE_SEARCH_ENDPOINT``), so setting the variable mid-session works.
    """
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search the web for."},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "description": f"Results to return (default {DEFAULT_SEARCH_RESULTS}, at most {MAX_SEARCH_RESULTS}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    description = (
        "Search the web. Returns numbered results with title, URL and a short snippet; fetch a "
        "result's URL with the web page tool to read more than the snippet."
    )

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> str:
        env = os.environ if environ is None else environ
        key = api_key or env.get(SEARCH_KEY_ENV) or None
        url = endpoint or env.get(SEARCH_ENDPOINT_ENV) or BRAVE_SEARCH_ENDPOINT
        return await _search(arguments, key, url)

    return RegisteredTool(
        ToolDefinition(name, description, parameters), run, output_limit=20_000, effect=ToolEffect.NETWORK
    )


# -- web_fetch (gemini-cli shape) -----------------------------------------------------------------

_URL = re.compile(r"https?://[^\s<>\"'`)\]]+")


def prompt_urls(prompt: str) -> list[str]:
    """The http(s) URLs ``web_fetch`` fetches for ``prompt``, in order, each once (permission
    rules read the same list)."""
    return list(dict.fromkeys(u.rstrip(".,;:!?") for u in _URL.findall(prompt)))


async def _fetch(fetcher: WebFetcher, arguments: dict[str, Any]) -> str:
    prompt = arguments["prompt"]
    urls = prompt_urls(prompt)
    if not urls:
        raise ToolError("the prompt names no http(s) URL to fetch; include the full URL(s) in it")
    if len(urls) > MAX_FETCH_URLS:
        raise ToolError(f"the prompt names {len(urls)} URLs; fetch at most {MAX_FETCH_URLS} at a time")
    pages = await asyncio.gather(*(fetcher.page(u) for u in urls), return_exceptions=True)
    out: list[str] = []
    for url, page in zip(urls, pages, strict=True):
        if isinstance(page, BaseException):
            if not isinstance(page, Exception):
                raise page
            out.append(f"--- {url}\nError: {page}")
            continue
        text = "\n".join(page.lines)
        if len(text) > FETCH_PAGE_CHARS:
            text = text[:FETCH_PAGE_CHARS] + f"\n[page cut at {FETCH_PAGE_CHARS} characters]"
        title = f" ({page.title})" if page.title else ""
        out.append(f"--- {page.url}{title}\n{text}")
    return "\n\n".join(out)


def web_fetch_tool(fetcher: WebFetcher | None = None, *, name: str = "web_fetch") -> RegisteredTool:
    """``web_fetch(prompt)``: the text of the URLs named in the prompt (gemini-cli's parameters)."""
    fetcher = fetcher or WebFetcher()
    parameters = {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "description": "Your request, including the full http(s) URL(s) to fetch (at most 20).",
            }
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    description = (
        "Fetch the web pages whose URLs appear in the prompt and return their readable text, so you "
        "can answer the request in the prompt from them."
    )

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> str:
        return await _fetch(fetcher, arguments)

    return RegisteredTool(
        ToolDefinition(name, description, parameters), run, output_limit=60_000, effect=ToolEffect.NETWORK
    )


def web_tools(*, search_api_key: str | None = None, fetcher: WebFetcher | None = None) -> list[RegisteredTool]:
    """ra's three web tools, sharing one page cache."""
    fetcher = fetcher or WebFetcher()
    return [web_search_tool(search_api_key), web_open_tool(fetcher), web_find_tool(fetcher)]
