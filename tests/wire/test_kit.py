"""The server kit's shared pieces: one event-loop helper, one TLS builder, one budget design."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

from tether._serve.loop import LoopThread, new_event_loop
from tether._serve.tls import client_context, make_self_signed, server_context, write_private
from tether._wire import MemoryBudget
from tether.exceptions import FrameTooLargeError, StreamTimeoutError


def test_loop_thread_runs_coroutines_and_raises_its_callers_timeout_error() -> None:
    loop = LoopThread('test-kit-loop', timeout_error=StreamTimeoutError)
    try:

        async def add(a: int, b: int) -> int:
            await asyncio.sleep(0)
            return a + b

        assert loop.run(add(2, 3), 10) == 5
        never = asyncio.Event()
        with pytest.raises(StreamTimeoutError, match='did not finish'):
            loop.run(never.wait(), 0.01)  # never set: times out whatever the machine's speed
        assert loop.thread.is_alive()
    finally:
        loop.stop()
    assert not loop.thread.is_alive()
    assert loop.loop.is_closed()


def test_new_event_loop_is_asyncios_when_uvloop_is_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv('TETHER_UVLOOP', '0')
    loop = new_event_loop()
    try:
        assert type(loop).__module__.startswith('asyncio')
    finally:
        loop.close()


def test_one_tls_builder_for_servers_and_clients(tmp_path: Path) -> None:
    cert, key = make_self_signed('kit-test', ['127.0.0.1'])
    write_private(tmp_path / 'c.pem', cert)
    write_private(tmp_path / 'c.key', key)
    server = server_context(tmp_path / 'c.pem', tmp_path / 'c.key')
    assert server.minimum_version == ssl.TLSVersion.TLSv1_2
    pinned = client_context(tmp_path / 'c.pem')
    assert pinned.verify_mode == ssl.CERT_REQUIRED
    assert pinned.check_hostname
    assert pinned.minimum_version == ssl.TLSVersion.TLSv1_2
    blind = client_context(verify=False)
    assert blind.verify_mode == ssl.CERT_NONE
    assert not blind.check_hostname
    with pytest.raises(FileNotFoundError):
        client_context(tmp_path / 'missing.pem')


class _Store(MemoryBudget):
    """A budget whose limit is shared with what a store holds, and that spills."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit, name='store')
        self.kept = 0
        self.spilled: list[int] = []

    def held(self) -> int:
        return self.kept

    def make_room(self, size: int) -> None:
        if self.kept + size > self.limit:
            self.kept = 0  # everything kept goes to disk

    def overflow(self, size: int) -> Any:
        self.spilled.append(size)
        return memoryview(b'')  # not counted: it is not in memory


def test_one_budget_design_counts_what_is_held_and_overflows() -> None:
    plain = MemoryBudget(100, name='relay')
    frame = plain.allocate([60, 40])
    assert plain.reserved == 100
    assert plain.peak == 100
    with pytest.raises(FrameTooLargeError, match='relay'):
        plain.allocate([1])
    assert plain.refused == 1
    assert plain.reserved == 100
    plain.release(frame)
    assert plain.reserved == 0

    store = _Store(100)
    store.kept = 70
    first = store.allocate([20])  # fits beside what is kept
    assert store.kept == 70
    assert store.reserved == 20
    second = store.allocate([30])  # makes room: what was kept is spilled
    assert store.kept == 0
    assert store.reserved == 50
    third = store.allocate([80])  # cannot fit even then: received elsewhere, not refused
    assert store.spilled == [80]
    assert store.reserved == 50
    assert store.refused == 0
    for payloads in (first, second, third):
        store.release(payloads)
    assert store.reserved == 0
