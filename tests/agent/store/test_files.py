"""The file store with real files: layout, torn and corrupt lines, concurrent writers in separate
processes, read-only and full disks; the conformance kit against both built-in stores."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ra.agent.store import FileSessionStore, MemorySessionStore, StoreError, check_store, default_store
from ra.agent.store.encoding import encode_entry, lines_bytes
from ra.agent.store.files import cwd_slug
from ra.agent.store.format import header, iso_time

ROOT = Path(__file__).resolve().parents[3]


def head(sid: str, cwd: str = "/work/project") -> dict:
    return header(sid, cwd=cwd, model="m", provider="p", profile="generic", ra_version="t", timestamp=time.time())


def user(eid: str, parent: str | None, text: str) -> dict:
    return {"type": "user", "id": eid, "parent_id": parent, "timestamp": iso_time(time.time()), "content": text}


# -- the conformance kit ---------------------------------------------------------------------------------


async def test_the_file_store_passes_the_conformance_kit(tmp_path: Path) -> None:
    count = iter(range(100))
    await check_store(lambda: FileSessionStore(tmp_path / f"s{next(count)}"))


async def test_the_memory_store_passes_the_conformance_kit() -> None:
    await check_store(MemorySessionStore)


async def test_the_kit_fails_a_store_that_loses_appends() -> None:
    class Forgetful(MemorySessionStore):
        async def append(self, session_id, entries):  # type: ignore[no-untyped-def]
            header_first = entries and entries[0].get("type") == "session"
            await super().append(session_id, entries[:1] if header_first else entries)

    with pytest.raises(AssertionError, match="load\\(\\) after three appends"):
        await check_store(Forgetful)


async def test_the_kit_fails_a_store_that_lists_oldest_first() -> None:
    class Backwards(MemorySessionStore):
        async def list(self, cwd=None):  # type: ignore[no-untyped-def]
            return list(reversed(await super().list(cwd)))

    with pytest.raises(AssertionError, match="newest"):
        await check_store(Backwards)


# -- layout ------------------------------------------------------------------------------------------------


async def test_records_live_under_the_cwd_slug_with_private_permissions(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("abc-1", [head("abc-1", "/home/me/my project"), user("00000001", None, "hi")])
    path = store.path_of("abc-1")
    assert path is not None and path.parent == tmp_path / "home-me-my-project"
    assert path.name.endswith("_abc-1.jsonl") and path.name[:8].isdigit()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    lines = path.read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["session", "user"]
    # A fresh store object (another process) finds the record by id.
    assert (await FileSessionStore(tmp_path).load("abc-1")) == [json.loads(line) for line in lines]


async def test_an_id_that_ends_another_id_finds_only_its_own_record(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("x_y", [head("x_y")])
    assert await FileSessionStore(tmp_path).load("y") is None
    assert await FileSessionStore(tmp_path).delete("y") is False
    await store.append("y", [head("y")])
    loaded = await FileSessionStore(tmp_path).load("y")
    assert loaded is not None and loaded[0]["id"] == "y"


async def test_a_record_deleted_while_open_is_not_written_to(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1"), user("00000001", None, "one")])
    path = store.path_of("s1")
    assert path is not None
    path.unlink()  # another process: ra sessions delete
    with pytest.raises(StoreError, match="was deleted"):
        await store.append("s1", [user("00000002", "00000001", "two")])
    with pytest.raises(StoreError, match="must start with the session header"):
        await store.append("s1", [user("00000002", "00000001", "two")])
    assert await store.load("s1") is None
    await store.append("s1", [head("s1")])  # a new record may start under the same id
    assert len(await store.load("s1") or []) == 1


async def test_a_store_keeps_a_bounded_number_of_files_open(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    for n in range(40):
        await store.append(f"s{n}", [head(f"s{n}")])
    assert len(os.listdir("/proc/self/fd")) - before <= 16
    for n in range(40):  # evicted ones open again
        await store.append(f"s{n}", [user("00000001", None, "x")])
    for n in range(40):
        assert len(await store.load(f"s{n}") or []) == 2
    store.close()
    assert len(os.listdir("/proc/self/fd")) == before


async def test_list_reads_title_model_and_count_from_the_file(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    config = {"type": "config", "id": "00000003", "parent_id": "00000002", "timestamp": iso_time(0), "model": "m2"}
    answer = {"type": "assistant", "id": "00000004", "parent_id": "00000003", "timestamp": iso_time(0), "model": "m3"}
    body = [user("00000001", None, "  first\n  task  "), user("00000002", "00000001", "second"), config]
    await store.append("s1", [head("s1"), *body, answer, {**config, "id": "00000005", "model": "m4"}])
    path = store.path_of("s1")
    assert path is not None
    with path.open("a") as f:
        f.write('{"type": "assistant", "id": "torn", "mod')  # a torn tail: not counted, not read
    (info,) = await store.list("/work/project")
    assert (info.title, info.model, info.entries) == ("first task", "m4", 5)
    assert info.created <= info.updated and info.parent_id is None and info.agent_id is None


def test_long_and_odd_working_directories_get_bounded_distinct_slugs() -> None:
    long_a, long_b = "/x/" + "a" * 300, "/x/" + "a" * 299 + "b"
    assert len(cwd_slug(long_a)) <= 80 and cwd_slug(long_a) != cwd_slug(long_b)
    assert cwd_slug("/") == "root" and "/" not in cwd_slug("/../../etc") and not cwd_slug("/../x").startswith(".")


def test_ra_sessions_dir_overrides_the_state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RA_SESSIONS_DIR", str(tmp_path / "here"))
    assert default_store().root == tmp_path / "here"
    monkeypatch.delenv("RA_SESSIONS_DIR")
    assert default_store().root.name == "sessions" and "ra" in str(default_store().root)


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "a*", "x" * 200, None])
async def test_ids_that_cannot_be_file_names_are_refused(tmp_path: Path, bad: object) -> None:
    store = FileSessionStore(tmp_path)
    with pytest.raises(ValueError, match="invalid session id"):
        await store.append(bad, [head("x")])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid session id"):
        await store.load(bad)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


async def test_a_first_append_without_a_header_is_refused(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    with pytest.raises(StoreError, match="must start with the session header"):
        await store.append("s1", [user("00000001", None, "hi")])
    with pytest.raises(StoreError, match="must start with the session header"):
        await MemorySessionStore().append("s1", [user("00000001", None, "hi")])


async def test_an_entry_json_cannot_hold_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1")])
    with pytest.raises(StoreError, match="cannot be written as JSON"):
        await store.append("s1", [user("00000001", None, "ok"), {"type": "custom", "data": float("nan")}])
    assert len(await store.load("s1") or []) == 1


async def test_append_lines_writes_what_append_writes_and_refuses_what_is_not_whole_lines(tmp_path: Path) -> None:
    entries = [head("a"), user("00000001", None, "é \n \u2028 \U0001f600")]
    await FileSessionStore(tmp_path / "one").append("a", entries)
    lines = FileSessionStore(tmp_path / "two")
    with pytest.raises(StoreError, match="must start with the session header"):
        await lines.append_lines("a", lines_bytes([encode_entry(entries[1])]))
    with pytest.raises(ValueError, match="whole lines"):
        await lines.append_lines("a", encode_entry(entries[0]).encode(), entries[0])
    for bad in ("../a", ["a"], None):  # ids become file names
        with pytest.raises(ValueError, match="invalid session id"):
            await lines.append_lines(bad, lines_bytes([encode_entry(entries[0])]), entries[0])  # type: ignore[arg-type]
    await lines.append_lines("a", lines_bytes([encode_entry(e) for e in entries]), entries[0])
    with pytest.raises(StoreError, match="already has a record"):  # a header only starts an empty record
        await lines.append_lines("a", lines_bytes([encode_entry(entries[0])]), entries[0])
    one, two = FileSessionStore(tmp_path / "one").path_of("a"), lines.path_of("a")
    assert one is not None and two is not None and one.read_bytes() == two.read_bytes()


async def test_append_lines_now_writes_only_to_an_open_record_whose_lock_is_free(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    line = (json.dumps(user("00000002", "00000001", "two"), separators=(",", ":")) + "\n").encode()
    assert store.append_lines_now("a", line) is False  # not open here: nothing to write to
    await store.append("a", [head("a"), user("00000001", None, "one")])
    path = store.path_of("a")
    assert path is not None
    with open(path, "ab") as other:  # another open file of the record: its lock is another writer's
        fcntl.flock(other, fcntl.LOCK_EX)
        before = path.read_bytes()
        assert store.append_lines_now("a", line) is False
        assert path.read_bytes() == before
    assert store.append_lines_now("a", line) is True
    assert [e["id"] for e in await store.load("a") or []] == ["a", "00000001", "00000002"]
    with pytest.raises(ValueError, match="whole lines"):
        store.append_lines_now("a", line.rstrip())
    path.unlink()
    with pytest.raises(StoreError, match="was deleted"):
        store.append_lines_now("a", line)


# -- torn and corrupt lines -----------------------------------------------------------------------------------


async def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1"), user("00000001", None, "kept")])
    path = store.path_of("s1")
    assert path is not None
    whole = json.dumps(user("00000002", "00000001", "torn"))
    with path.open("a") as f:
        f.write(whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING, logger="ra.agent.store"):
        loaded = await store.load("s1")
    assert loaded is not None and [e.get("content") for e in loaded[1:]] == ["kept"]
    assert any("torn last line" in r.getMessage() and str(path) in r.getMessage() for r in caplog.records)


async def test_the_next_append_cuts_a_torn_line_so_it_never_ends_up_in_the_middle(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1"), user("00000001", None, "one")])
    path = store.path_of("s1")
    assert path is not None
    with path.open("a") as f:
        f.write('{"type": "user", "id": "000000')
    await store.append("s1", [user("00000002", "00000001", "two")])
    assert [e.get("content") for e in (await store.load("s1") or [])[1:]] == ["one", "two"]
    assert path.read_text().count("\n") == 3


async def test_a_last_line_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1")])
    path = store.path_of("s1")
    assert path is not None
    with path.open("a") as f:
        f.write(json.dumps(user("00000001", None, "whole")))
    assert [e.get("content") for e in (await store.load("s1") or [])[1:]] == ["whole"]
    await store.append("s1", [user("00000002", "00000001", "next")])
    assert [e.get("content") for e in (await store.load("s1") or [])[1:]] == ["whole", "next"]


@pytest.mark.parametrize("garbage", ["not json at all", "[1, 2]", '{"type": "user", "id": '])
async def test_garbage_in_the_middle_is_an_error_naming_file_and_line(tmp_path: Path, garbage: str) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1"), user("00000001", None, "one")])
    path = store.path_of("s1")
    assert path is not None
    with path.open("a") as f:
        f.write(garbage + "\n")
    await store.append("s1", [user("00000002", "00000001", "two")])
    before = path.read_bytes()
    with pytest.raises(StoreError) as caught:
        await store.load("s1")
    assert f"{path}:3" in str(caught.value)
    assert path.read_bytes() == before  # nothing lost, nothing rewritten


# -- two processes -----------------------------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import asyncio, sys, time
    from ra.agent.store import FileSessionStore
    from ra.agent.store.format import iso_time

    async def main(root, sid, name, count, start_at):
        store = FileSessionStore(root)
        while time.time() < start_at:
            await asyncio.sleep(0.001)
        for i in range(count):
            # Large entries, so a write that was not atomic under the lock would interleave.
            entry = {"type": "custom", "id": f"{name}{i:07d}", "parent_id": None,
                     "timestamp": iso_time(time.time()), "data": name * 20000, "n": i}
            await store.append(sid, [entry])

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
    """
)


def run_writers(root: Path, names: tuple[str, ...], count: int) -> list[int]:
    """Start one process per name at the same moment, each appending ``count`` entries; exit codes."""
    start_at = time.time() + 1.0
    # The PYTHONPATH the tests run with wins (it may point at another tree).
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src"), **os.environ}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(root), "shared", name, str(count), str(start_at)], env=env)
        for name in names
    ]
    return [proc.wait(timeout=60) for proc in procs]


def make_immutable(path: Path, on: bool) -> bool:
    """``chattr +i`` (or ``-i``): a file not even root can write. False when it is not available."""
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=False, capture_output=True)
    return done.returncode == 0


async def test_two_processes_appending_to_one_record_never_corrupt_it(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("shared", [head("shared")])
    assert run_writers(tmp_path, ("a", "b"), 150) == [0, 0]
    loaded = await store.load("shared")
    assert loaded is not None and len(loaded) == 301
    for name in ("a", "b"):
        mine = [e["n"] for e in loaded if e.get("id", "").startswith(name)]
        assert mine == list(range(150))
        assert all(e["data"] == name * 20000 for e in loaded if e.get("id", "").startswith(name))


# -- disks that refuse ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
async def test_a_read_only_directory_raises_a_store_error(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o500)
    try:
        with pytest.raises(StoreError, match="cannot create"):
            await FileSessionStore(tmp_path / "sessions").append("s1", [head("s1")])
    finally:
        os.chmod(tmp_path, 0o700)


async def test_a_record_that_became_read_only_raises_a_store_error(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1")])
    path = store.path_of("s1")
    assert path is not None
    if not make_immutable(path, True):
        pytest.skip("chattr is not available")
    try:
        with pytest.raises(StoreError, match="cannot write"):
            await store.append("s1", [user("00000001", None, "x")])
        with pytest.raises(StoreError, match="cannot open"):
            await FileSessionStore(tmp_path).append("s1", [user("00000001", None, "x")])
    finally:
        make_immutable(path, False)
    assert len(await store.load("s1") or []) == 1
