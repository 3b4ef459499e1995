"""The replay harness itself: cassettes decode, and streams survive every chunking."""

from __future__ import annotations

import httpx

from tests.support.replay import CASSETTES, chunked, load_cassette


def test_every_cassette_loads() -> None:
    files = sorted(CASSETTES.glob("*/*.yaml"))
    assert len(files) == 67
    total = 0
    for path in files:
        interactions = load_cassette(path)
        assert interactions, path
        total += len(interactions)
        for inter in interactions:
            assert inter.response.status >= 200
            if inter.response.status == 200 and not inter.response.is_sse:
                inter.response.json()  # gzip and parsed_body both decode to JSON
    assert total == 118


def test_rechunking_preserves_bytes() -> None:
    body = 'data: {"t": "héllo ✓"}\n\n'.encode() * 5
    for mode in ("whole", "events", "random:1", "random:2", 3):
        assert b"".join(chunked(body, mode)) == body


async def test_server_replays_stream_in_pieces(replay_server) -> None:
    body = b"data: one\n\ndata: two\n\n"
    replay_server.enqueue(200, body, {"content-type": "text/event-stream"}, chunking="random:7")
    async with httpx.AsyncClient() as client:
        response = await client.post(replay_server.base_url + "/v1/x?alt=sse", json={"a": 1})
    assert response.content == body
    assert replay_server.requests[0].json() == {"a": 1}
    assert replay_server.requests[0].query == {"alt": ["sse"]}
