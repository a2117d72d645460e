"""tether._hugebytes.join builds the same bytes as b''.join, whatever the sizes."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tether import _hugebytes
from tether.serialize import deserialize, serialize


@pytest.mark.parametrize(
    'sizes',
    [[], [0], [10], [5 << 20], [3, (4 << 20) + 1, 7], [1 << 20] * 6],
)
def test_join_matches_bytes_join(sizes: list[int]) -> None:
    parts = [bytes([(i * 7 + n) % 256]) * n for i, n in enumerate(sizes)]
    out = _hugebytes.join([memoryview(p) for p in parts])
    assert type(out) is bytes
    assert out == b''.join(parts)
    assert hash(out) == hash(b''.join(parts))


def test_large_bytes_round_trip_through_the_serializer() -> None:
    data = bytes(range(256)) * (40_000)  # ~10 MB
    blob = serialize(data)
    assert type(blob) is bytes
    back = deserialize(blob)
    assert type(back) is bytes
    assert back == data


@pytest.mark.parametrize('size', [0, 10, (256 << 10) - 1, 256 << 10, (3 << 20) + 5])
def test_copy_to_bytes_and_empty_bytearray(size: int) -> None:
    source = bytearray(bytes(range(256)) * (size // 256 + 1))[:size]
    out = _hugebytes.copy_to_bytes(memoryview(source))
    assert type(out) is bytes
    assert out == bytes(source)
    assert hash(out) == hash(bytes(source))
    # Read-only and sliced views work too.
    assert _hugebytes.copy_to_bytes(memoryview(bytes(source))) == out
    assert _hugebytes.copy_to_bytes(memoryview(source)[1:]) == out[1:]
    buf = _hugebytes.empty_bytearray(size)
    assert type(buf) is bytearray
    assert len(buf) == size


def test_large_bytes_deserialize_from_a_writable_buffer() -> None:
    data = bytes(range(256)) * 40_000
    back = deserialize(bytearray(serialize(data)))
    assert type(back) is bytes
    assert back == data


def test_copy_to_bytes_copies_read_only_memory_without_the_gil(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read-only mapping, as a connector lends: copied by memmove (the GIL released),
    # the mapping kept exported (it cannot be closed) until the copy is done.
    import ctypes
    import mmap

    data = os.urandom(1 << 20)
    path = tmp_path / 'segment'
    path.write_bytes(data)
    with open(path, 'rb') as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    calls: list[bool] = []
    real = ctypes.memmove

    def spy(dst: Any, src: Any, n: int) -> Any:
        with pytest.raises(BufferError):
            mapping.close()
        calls.append(True)
        return real(dst, src, n)

    monkeypatch.setattr(_hugebytes.ctypes, 'memmove', spy)
    with memoryview(mapping) as whole, whole[7:].toreadonly() as view:
        out = _hugebytes.copy_to_bytes(view)
    assert calls == [True]
    assert type(out) is bytes
    assert out == data[7:]
    mapping.close()
