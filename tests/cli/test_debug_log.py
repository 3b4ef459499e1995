"""``--debug`` shows ra's and httpx's log lines, never a secret in them."""

from __future__ import annotations

from pathlib import Path

from ra.cli.debuglog import redact_log_text
from tests.cli.support import clean_env, run_ra
from tests.support.replay import ReplayServer

KEY = "sk-test-secret-4c1d7e9a"


def test_debug_output_masks_headers_that_carry_the_key(replay_server: ReplayServer, tmp_path: Path) -> None:
    """A server that quotes the key in its challenge, a cookie and an echo header: the real
    command's --debug stderr shows that the headers came, never what they held."""
    replay_server.enqueue(
        401,
        {"error": {"message": "bad key"}},
        {
            "www-authenticate": f'Bearer realm="api", error="invalid_token", key="{KEY}"',
            "set-cookie": "session=0123456789abcdef; HttpOnly",
            "x-echo": f"you sent {KEY}",
        },
    )
    home = tmp_path / "home"
    args = ["--debug", "--provider", "openai-compatible", "--base-url", f"{replay_server.base_url}/v1"]
    done = run_ra(
        [*args, "--model", "m", "hi"], clean_env(home, OPENAI_COMPATIBLE_API_KEY=KEY), cwd=tmp_path, timeout=30
    )

    assert done.returncode == 3, done.stderr
    assert "receive_response_headers" in done.stderr  # the debug lines are there
    assert "www-authenticate" in done.stderr.lower()
    assert KEY not in done.stderr + done.stdout
    assert "0123456789abcdef" not in done.stderr
    assert "realm" not in done.stderr  # the whole challenge is masked, not only the key in it


def test_header_lines_and_tuples_are_masked_whatever_they_hold() -> None:
    raw = (
        "[(b'Authorization', b'Bearer abc'), (b\"x-goog-api-key\", b\"AIza-short\"), (b'content-type', b'json')]\n"
        "Proxy-Authorization: Basic dXNlcjpwYXNz\nCookie: a=b\nx-api-key=k1"
    )
    text = redact_log_text(raw)
    for secret in ("Bearer abc", "AIza-short", "dXNlcjpwYXNz", "a=b", "k1"):
        assert secret not in text
    assert "(b'content-type', b'json')" in text
