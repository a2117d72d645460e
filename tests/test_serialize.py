"""Serializer round trips, fast paths, zero-copy rules and corrupt input."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

from tether.exceptions import SerializationError
from tether.serialize import copies_out, deserialize, serialize, serialize_parts


class Local:
    def __init__(self, v: int) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Local) and other.v == self.v

    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    'obj',
    [
        b'',
        b'bytes \x00\xff',
        bytearray(b'mutable'),
        '',
        'text with unicode \u00e9\u4e2d \ud800',
        0,
        -(2**100),
        3.5,
        None,
        True,
        [1, 'a', None],
        (1, 2),
        {'a': {'b': [1.5]}},
        {1, 2, 3},
        Local(3),
    ],
    ids=repr,
)
def test_roundtrip(obj: Any) -> None:
    out = deserialize(serialize(obj))
    assert out == obj
    assert type(out) is type(obj)


def test_memoryview_roundtrips_as_bytes() -> None:
    assert deserialize(serialize(memoryview(b'abc'))) == b'abc'


def test_lambda_and_local_class_fall_back_to_cloudpickle() -> None:
    offset = 10

    class Inner:
        def __init__(self) -> None:
            self.x = 1

    f = deserialize(serialize(lambda x: x + offset))
    assert f(1) == 11
    assert deserialize(serialize(Inner())).x == 1


def test_unpicklable_raises_serialization_error() -> None:
    import threading

    with pytest.raises(SerializationError, match='lock'):
        serialize(threading.Lock())


@pytest.mark.parametrize(
    'array',
    [
        np.arange(12, dtype=np.float64).reshape(3, 4),
        np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
        np.arange(20)[::3],  # not contiguous
        np.array(5.0),  # zero-dimensional
        np.zeros((0, 3)),  # empty
        np.array([1 + 2j, 3 - 4j]),
        np.array(['a', 'bc'], dtype='U2'),
        np.array([True, False]),
        np.arange(6, dtype='>i4'),  # big-endian
        np.array(['2024-01-01'], dtype='datetime64[D]'),
        np.array([1, 'x', None], dtype=object),  # pickled path
        np.zeros(3, dtype=[('a', 'i4'), ('b', 'f8')]),  # structured: pickled path
    ],
    ids=lambda a: f'{a.dtype}-{a.shape}',
)
def test_numpy_roundtrip(array: np.ndarray[Any, Any]) -> None:
    out = deserialize(serialize(array))
    assert out.dtype == array.dtype
    assert out.shape == array.shape
    if array.dtype.hasobject:
        assert list(out) == list(array)
    else:
        assert np.array_equal(out, array)


def test_numpy_parts_do_not_copy_the_array() -> None:
    a = np.arange(1_000_000, dtype=np.float64)
    parts = serialize_parts(a)
    assert len(parts) == 2
    assert np.shares_memory(np.frombuffer(parts[1], dtype=np.float64), a)


def test_deserialized_arrays_are_writable_and_zero_copy_from_writable_buffer() -> None:
    a = np.arange(1000, dtype=np.float64)
    data = bytearray(serialize(a))
    out = deserialize(data)
    assert out.flags.writeable
    out[0] = 42.0
    # Zero copy: the array lives in the caller's writable buffer.
    assert deserialize(data)[0] == 42.0


def test_deserialized_arrays_from_bytes_are_writable_copies() -> None:
    data = serialize(np.arange(10.0))
    out = deserialize(data)
    assert out.flags.writeable
    out[0] = 1.0
    assert deserialize(data)[0] == 0.0


def test_pandas_roundtrip_uses_out_of_band_buffers() -> None:
    df = pd.DataFrame(np.random.default_rng(0).random((1000, 4)), columns=list('abcd'))
    df['s'] = 'x'
    parts = serialize_parts(df)
    assert len(parts) > 2  # pickle stream plus out-of-band buffers
    pd.testing.assert_frame_equal(deserialize(b''.join(parts)), df)


def test_polars_roundtrip() -> None:
    df = pl.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})
    out = deserialize(serialize(df))
    assert isinstance(out, pl.DataFrame)
    assert out.equals(df)


def test_large_dict() -> None:
    d = {f'k{i}': i for i in range(100_000)}
    assert deserialize(serialize(d)) == d


@pytest.mark.parametrize(
    'obj',
    [
        b'x' * 1000,
        bytearray(b'y' * 1000),
        'y' * 1000,
        np.arange(1000.0),
        {'a': np.arange(100.0)},
        pl.DataFrame({'a': list(range(100))}),
    ],
    ids=['bytes', 'bytearray', 'str', 'numpy', 'pickle', 'polars'],
)
def test_every_truncation_raises(obj: Any) -> None:
    data = serialize(obj)
    for cut in sorted({0, 1, 5, 8, 64, len(data) // 2, len(data) - 1}):
        with pytest.raises(SerializationError):
            deserialize(data[:cut])


def test_trailing_garbage_raises() -> None:
    with pytest.raises(SerializationError):
        deserialize(serialize(b'abc') + b'extra')


def test_garbage_raises() -> None:
    for garbage in [b'', b'\x00' * 100, b'not a tether serialization', pickle.dumps([1])]:
        with pytest.raises(SerializationError):
            deserialize(garbage)


def test_bad_version_and_kind_raise() -> None:
    data = bytearray(serialize(b'abc'))
    data[2] = 99
    with pytest.raises(SerializationError, match='version'):
        deserialize(data)
    data = bytearray(serialize(b'abc'))
    data[3] = 200
    with pytest.raises(SerializationError, match='kind'):
        deserialize(data)


def test_corrupt_numpy_header_raises() -> None:
    data = bytearray(serialize(np.arange(10.0)))
    data[9] = ord('?')  # dtype string
    with pytest.raises(SerializationError):
        deserialize(data)


def test_corrupt_pickle_stream_raises() -> None:
    data = bytearray(serialize({'a': 1}))
    start = len(data) - 20
    data[start:] = b'\xff' * 20
    with pytest.raises(SerializationError):
        deserialize(data)


def test_non_bytes_input_raises() -> None:
    with pytest.raises(SerializationError):
        deserialize(123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ('obj', 'copied'),
    [
        (b'x' * 1000, True),
        (bytearray(b'abc'), True),
        ('text', True),
        ({'a': [1, 2.5, 'x']}, True),  # a pickle without out-of-band buffers
        (lambda: 1, True),  # cloudpickle, no buffers either
        (np.arange(10), False),  # built on the memory it is given, if writable
        (pd.DataFrame({'a': range(5)}), False),  # a pickle with out-of-band buffers
        (pl.DataFrame({'a': [1, 2]}), False),
    ],
)
def test_copies_out_tells_which_objects_never_refer_to_their_input(obj: Any, copied: bool) -> None:
    data = bytearray(serialize(obj))
    assert copies_out(data) is copied
    if copied:  # what deserialize returns survives its input being overwritten
        before = serialize(deserialize(memoryview(data).toreadonly()))
        got = deserialize(memoryview(data).toreadonly())
        data[:] = bytes(len(data))
        assert serialize(got) == before


@pytest.mark.parametrize('data', [b'', b'TZ', b'garbage!' * 4, memoryview(b'ab' * 8).cast('H')])
def test_copies_out_is_false_for_anything_else(data: Any) -> None:
    assert copies_out(data) is False
    assert copies_out(object()) is False  # type: ignore[arg-type]
