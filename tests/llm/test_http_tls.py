"""The adapter's TLS context: CA certificates loaded only where TLS can happen (issue 19).

Loading the system's CA store took 20-25 ms of a session's first step. An adapter whose base URL
is plain ``http://`` and that no proxy from the environment stands in front of gets a context that
trusts nothing; these tests hold that it still serves plain HTTP (a real server on 127.0.0.1),
that TLS through it fails closed (a real TLS server with a self-signed certificate refuses the
handshake: never an unverified connection), and that ``https://`` URLs and proxies from the
environment still get the verifying context.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest

from ra.llm import http as ra_http
from ra.llm.errors import NetworkError
from ra.llm.http import AdapterTimeout
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.types import Message, Request
from tests.support.chat_server import FINAL, ChatServer

TIMEOUT = AdapterTimeout(connect=5.0, request=20.0, stream_read=10.0)


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


@pytest.fixture
def counted_ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    loads: list[int] = []
    real = httpx.create_ssl_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        loads.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ra_http.httpx, "create_ssl_context", counting)
    return loads


@pytest.mark.usefixtures("no_proxies")
async def test_plain_http_loads_no_ca_certificates_and_works(counted_ca_loads: list[int]) -> None:
    async with ChatServer() as server:
        adapter = OpenAICompatibleAdapter(base_url=server.base_url, timeout=TIMEOUT)
        async with asyncio.timeout(20):
            reply = await adapter.complete(Request("steps-1", [Message.user("hi")]))
            await adapter.close()
    assert reply.text == FINAL
    assert counted_ca_loads == []
    context = adapter._tls_context()
    assert context.get_ca_certs() == []
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


@pytest.fixture
def server_context(tmp_path: Path) -> ssl.SSLContext:
    """A TLS server context with a fresh self-signed certificate for 127.0.0.1 (the ``openssl``
    program: CI installs it and sets ``RA_TEST_REQUIRE_PROGRAMS``, where its absence fails)."""
    if shutil.which("openssl") is None:
        if os.environ.get("RA_TEST_REQUIRE_PROGRAMS"):
            pytest.fail("RA_TEST_REQUIRE_PROGRAMS is set but openssl is missing")
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
    command += ["-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


@pytest.mark.usefixtures("no_proxies")
async def test_tls_through_the_plain_http_context_fails_closed(server_context: ssl.SSLContext) -> None:
    """The context an ``http://`` adapter holds refuses a TLS server it cannot verify, so a
    request that somehow reaches one through it is an error, never an unverified connection."""
    async with ChatServer() as plain:
        tls_server = await asyncio.start_server(plain._handle, "127.0.0.1", 0, ssl=server_context)
        port = tls_server.sockets[0].getsockname()[1]
        adapter = OpenAICompatibleAdapter(base_url=plain.base_url, timeout=TIMEOUT)
        try:
            async with asyncio.timeout(20):
                with pytest.raises(NetworkError) as caught:
                    await adapter.post_json(f"https://127.0.0.1:{port}/v1/chat/completions", {}, adapter.headers())
                await adapter.close()
        finally:
            tls_server.close()
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
    assert plain.requests == 0


@pytest.mark.usefixtures("no_proxies")
def test_https_base_url_gets_the_verifying_context(counted_ca_loads: list[int]) -> None:
    adapter = OpenAICompatibleAdapter(api_key="k", base_url="https://api.example.invalid/v1")
    context = adapter._tls_context()
    assert counted_ca_loads == [1]
    assert context.get_ca_certs() or context.cert_store_stats()["x509_ca"] > 0
    assert adapter._tls_context() is context  # once per adapter


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "https_proxy"])
def test_a_proxy_in_the_environment_keeps_the_verifying_context(
    monkeypatch: pytest.MonkeyPatch, counted_ca_loads: list[int], no_proxies: None, variable: str
) -> None:
    """The proxy itself may speak TLS (``https://proxy:443``): with one configured, an ``http://``
    adapter loads the CA store as before."""
    monkeypatch.setenv(variable, "https://proxy.example.invalid:443")
    adapter = OpenAICompatibleAdapter(base_url="http://127.0.0.1:9/v1")
    adapter._tls_context()
    assert counted_ca_loads == [1]
