"""Background writes of the SharedMemoryConnector: the key exists before the copy is done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from tests.connectors.conftest import copy_lent
from tests.shm._child import child_exit_code
from tether._shm import named
from tether.connectors import _shm_pool
from tether.connectors.protocols import BackgroundWriteConnector, Capabilities
from tether.connectors.shared_memory import SHM_DIR, SharedMemoryConnector, SharedMemoryKey
from tether.exceptions import ConnectorError
from tether.store import Store

LARGE = 1 << 20
HEAD = b'head' * 2


def _data(tag: int, size: int = LARGE) -> bytes:
    return bytes(range(256)) * (size // 256) + bytes([tag % 251])


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Hold every background copy of this process until the event is set."""
    opened = threading.Event()
    real = _shm_pool.begin_write

    def begin_write(*args: Any) -> Callable[[], None]:
        finish = real(*args)

        def held() -> None:
            opened.wait()
            finish()

        return held

    monkeypatch.setattr(_shm_pool, 'begin_write', begin_write)
    yield opened
    opened.set()


class _Reader(threading.Thread):
    def __init__(self, read: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.read = read
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.read()
        except BaseException as e:
            self.error = e


def test_it_is_a_background_write_connector(shm: SharedMemoryConnector) -> None:
    assert isinstance(shm, BackgroundWriteConnector)
    assert Capabilities.of(shm).background is shm


def test_a_background_put_reads_back(shm: SharedMemoryConnector) -> None:
    data = _data(1)
    for _ in range(3):  # a new segment, then one reused from the pool
        key, done = shm.put_parts_background([HEAD, data])
        assert bytes(shm.get(key) or b'') == HEAD + data
        assert shm.get_lent(key, copy_lent, None) == HEAD + data
        assert done.result() is None
        shm.evict(key)
        assert shm.get(key) is None


def test_an_early_reader_waits_for_the_copy(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    data = _data(2)
    key, done = shm.put_parts_background([HEAD, data])
    assert shm.exists(key)
    readers = [_Reader(lambda: shm.get_lent(key, copy_lent, None)), _Reader(lambda: shm.get(key))]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(0.2)
        assert reader.is_alive()  # waiting on the segment's lock
    assert not done.done()
    gate.set()
    for reader in readers:
        reader.join(30)
        assert reader.error is None
    assert readers[0].result == HEAD + data
    assert bytes(readers[1].result) == HEAD + data
    assert done.result() is None


def test_an_early_reader_of_another_process_waits(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    data = _data(3)
    key, _ = shm.put_parts_background([data])
    script = textwrap.dedent(f"""
        import hashlib, sys
        from tether.connectors.shared_memory import SharedMemoryConnector, SharedMemoryKey
        c = SharedMemoryConnector({shm.namespace!r})
        got = c.get_lent(SharedMemoryKey({key.name!r}), lambda v, k: bytes(v), None)
        print(hashlib.sha256(got).hexdigest())
    """)
    child = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.5)  # its reader waits for the copy
        gate.set()
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    import hashlib

    assert out.strip() == hashlib.sha256(data).hexdigest()


def test_a_reader_waits_for_a_writer_that_completed_but_has_not_unlocked(
    shm: SharedMemoryConnector,
) -> None:
    import fcntl

    data = _data(14)
    key = shm.put_parts([data])  # complete; its header says so
    fd = os.open(os.path.join(SHM_DIR, key.name), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as the background writer between the two
        reader = _Reader(lambda: shm.get_lent(key, copy_lent, None))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive()  # never "evicted" while its key still names it
    finally:
        os.close(fd)
    reader.join(30)
    assert reader.error is None
    assert reader.result == data


def test_a_reader_gives_up_after_the_wait_timeout(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    key, _ = shm.put_parts_background([_data(4)])
    impatient = SharedMemoryConnector(shm.namespace, wait_timeout=0.05)
    with pytest.raises(ConnectorError, match='still being written'):
        impatient.get(key)
    with pytest.raises(ConnectorError, match='still being written'):
        impatient.get_lent(key, copy_lent, None)


def _killed_writer(namespace: str, reuse: bool) -> str:
    """Start a process that puts an object in the background, SIGKILL it mid-copy and
    return the object's key."""
    script = textwrap.dedent(f"""
        import sys, threading
        from tether._shm import maps as _shm_maps, named
        from tether.connectors.shared_memory import SharedMemoryConnector

        c = SharedMemoryConnector({namespace!r})
        data = bytes(range(256)) * {LARGE // 256}
        if {reuse}:  # then the copy goes into a segment of the pool, through a mapping
            c.evict(c.put_parts([data]))

        def halves(buffers):
            views = [memoryview(b).cast('B') for b in buffers]
            views[-1] = views[-1][: views[-1].nbytes // 2]
            return views

        copying = threading.Event()

        def hang():
            copying.set()
            threading.Event().wait()  # until the test kills this process

        real_write_all, real_write = named._write_all, _shm_maps.write

        def write_all(fd, buffers, offset=0):
            real_write_all(fd, halves(buffers), offset)
            hang()

        def write(path, fd, buffers):
            real_write(path, fd, halves(buffers))
            hang()

        named._write_all = write_all
        _shm_maps.write = write
        key, _ = c.put_parts_background([data])
        copying.wait()  # half of the object copied
        print(key.name, flush=True)
        threading.Event().wait()
    """)
    child = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        name = child.stdout.readline().strip()
        assert name.startswith(f'tether-{namespace}-')
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(60)
        if child.stdout is not None:
            child.stdout.close()
    return name


@pytest.mark.parametrize('reuse', [False, True], ids=['new-segment', 'pooled-segment'])
def test_a_writer_killed_mid_copy_never_lets_a_reader_see_part_of_it(
    shm: SharedMemoryConnector, reuse: bool
) -> None:
    key = SharedMemoryKey(_killed_writer(shm.namespace, reuse))
    assert os.path.exists(os.path.join(SHM_DIR, key.name))
    with pytest.raises(ConnectorError, match='incomplete object'):
        shm.get(key)
    with pytest.raises(ConnectorError, match='incomplete object'):
        shm.get_lent(key, copy_lent, None)
    store = Store('shm-killed-writer', shm, cache_size=0, register=False)
    with pytest.raises(ConnectorError, match='incomplete object'):
        store.get(key)
    shm.evict(key)  # and its segment can be reused
    data = _data(5)
    again, _ = shm.put_parts_background([data])
    assert shm.get_lent(again, copy_lent, None) == data


@pytest.mark.parametrize(
    'make',
    [
        lambda d: [bytearray(d)],
        lambda d: [HEAD, memoryview(bytearray(d))],
        lambda d: [np.frombuffer(d, dtype=np.uint8).copy()],
        lambda d: [HEAD, memoryview(np.frombuffer(d, dtype=np.uint8).copy())],
    ],
    ids=['bytearray', 'view-of-bytearray', 'numpy', 'view-of-numpy'],
)
def test_memory_the_caller_may_change_is_copied_before_the_put_returns(
    shm: SharedMemoryConnector, gate: threading.Event, make: Callable[[bytes], list[Any]]
) -> None:
    data = _data(6)
    parts = make(data)
    expected = b''.join(memoryview(p).cast('B') for p in parts)
    key, done = shm.put_parts_background(parts)
    assert done.done()  # the gate holds background copies: there was none
    memoryview(parts[-1]).cast('B')[:4] = b'XXXX'  # the caller's later change
    assert shm.get_lent(key, copy_lent, None) == expected


def test_small_objects_and_disabled_background_writes_are_synchronous(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    key, done = shm.put_parts_background([b'small'])
    assert done.done()
    assert bytes(shm.get(key) or b'') == b'small'
    off = SharedMemoryConnector(shm.namespace, background_writes=False)
    key, done = off.put_parts_background([_data(7)])
    assert done.done()
    assert shm.get_lent(key, copy_lent, None) == _data(7)
    assert off.config()['background_writes'] is False


def test_close_waits_for_pending_copies(shm_namespace: str, gate: threading.Event) -> None:
    c = SharedMemoryConnector(shm_namespace)
    key, done = c.put_parts_background([_data(8)])
    closer = _Reader(lambda: c.close())
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()
    gate.set()
    closer.join(30)
    assert closer.error is None
    assert done.done()
    reader = SharedMemoryConnector(shm_namespace)
    assert reader.get_lent(key, copy_lent, None) == _data(8)
    reader.close(clear=True)


def test_evict_waits_for_the_copy_of_its_object(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    key, done = shm.put_parts_background([_data(9)])
    evictor = _Reader(lambda: shm.evict(key))
    evictor.start()
    evictor.join(0.2)
    assert evictor.is_alive()
    gate.set()
    evictor.join(30)
    assert done.done()
    assert shm.get(key) is None


@pytest.fixture
def failing_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    real = _shm_pool.begin_write

    def begin_write(*args: Any) -> Callable[[], None]:
        finish = real(*args)

        def broken() -> None:
            real_write_all, real_write = named._write_all, named._shm_maps.write

            def fail(*a: Any, **k: Any) -> None:
                raise OSError(28, 'No space left on device')

            monkeypatch.setattr(named, '_write_all', fail)
            monkeypatch.setattr(named._shm_maps, 'write', fail)
            try:
                finish()
            finally:
                monkeypatch.setattr(named, '_write_all', real_write_all)
                monkeypatch.setattr(named._shm_maps, 'write', real_write)

        return broken

    monkeypatch.setattr(_shm_pool, 'begin_write', begin_write)


@pytest.mark.usefixtures('failing_copy')
def test_a_failed_copy_surfaces_on_the_next_put(shm: SharedMemoryConnector) -> None:
    key, done = shm.put_parts_background([_data(10)])
    assert isinstance(done.exception(30), OSError)
    assert shm.get(key) is None  # its key was removed: readers find nothing
    with pytest.raises(ConnectorError, match=r'background write .* failed'):
        shm.put_parts([b'next'])
    shm.put_parts([b'next'])  # reported once


@pytest.mark.usefixtures('failing_copy')
def test_a_failed_copy_surfaces_on_flush_and_close(shm_namespace: str) -> None:
    c = SharedMemoryConnector(shm_namespace)
    _, done = c.put_parts_background([_data(11)])
    done.exception(30)
    with pytest.raises(ConnectorError, match=r'background write .* failed'):
        c.flush()
    assert c.flush()
    c.put_parts_background([_data(12)])
    with pytest.raises(ConnectorError, match=r'background write .* failed'):
        c.close(clear=True)
    assert not [n for n in os.listdir(SHM_DIR) if n.startswith(f'tether-{shm_namespace}-')]


def test_store_put_writes_bytes_in_the_background(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    with Store('shm-background', shm, cache_size=0, register=False) as store:
        data = _data(13)
        key = store.put(data)
        reader = _Reader(lambda: store.get(key))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive()
        gate.set()
        reader.join(30)
        assert reader.result == data
        proxy = store.proxy(data, populate_target=False)
        assert proxy == data


def test_store_put_of_an_array_is_copied_before_it_returns(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    with Store('shm-background-array', shm, cache_size=0, register=False) as store:
        array = np.arange(LARGE // 8)
        key = store.put(array)
        array[:] = -1  # the caller's change after the put
        assert int(store.get(key)[5]) == 5


def test_a_forked_child_does_not_wait_for_its_parents_copies(
    shm: SharedMemoryConnector, gate: threading.Event
) -> None:
    key, done = shm.put_parts_background([_data(15)])
    pid = os.fork()
    if pid == 0:  # the child: nothing of its own pending, closes at once
        ok = shm.flush(0) and not shm._pending_writes()
        shm.close()
        os._exit(0 if ok else 1)
    assert child_exit_code(pid, "the forked child waited for its parent's copy") == 0
    assert not done.done()
    gate.set()
    assert shm.get_lent(key, copy_lent, None) == _data(15)


def test_the_connector_pickles_with_its_settings(shm: SharedMemoryConnector) -> None:
    import copy
    import pickle

    slow = SharedMemoryConnector(shm.namespace, background_writes=False, wait_timeout=5)
    for again in (pickle.loads(pickle.dumps(slow)), copy.deepcopy(slow)):
        assert again.config() == slow.config()
        assert again.flush()


def test_a_process_that_exits_without_closing_completes_its_copies(
    shm: SharedMemoryConnector,
) -> None:
    script = textwrap.dedent(f"""
        from tether.connectors import _shm_pool
        from tether.connectors.shared_memory import SharedMemoryConnector

        real = _shm_pool.begin_write

        def slow(*args):
            finish = real(*args)

            def later():
                import sys, threading, time
                # Still copying when the main thread ends: finish once it is shutting
                # the interpreter down (in threading._shutdown, which waits for us).
                main = threading.main_thread().ident
                while not any(
                    frame.f_code.co_name == '_shutdown'
                    and frame.f_code.co_filename == threading.__file__
                    for frame in _stack(sys._current_frames().get(main))
                ):
                    time.sleep(0.01)
                finish()

            return later

        def _stack(frame):
            while frame is not None:
                yield frame
                frame = frame.f_back

        _shm_pool.begin_write = slow
        c = SharedMemoryConnector({shm.namespace!r})
        key, _ = c.put_parts_background([bytes(range(256)) * {LARGE // 256}])
        print(key.name, flush=True)
    """)
    out = subprocess.run(
        [sys.executable, '-c', script], capture_output=True, text=True, timeout=60, check=True
    )
    key = SharedMemoryKey(out.stdout.strip())
    assert shm.get_lent(key, copy_lent, None) == bytes(range(256)) * (LARGE // 256)
