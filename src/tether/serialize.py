"""Object serialization for stores and connectors.

:func:`serialize` turns any picklable object into bytes and :func:`deserialize` turns them
back. Large payloads are not copied more than the transport forces:

* ``bytes``/``bytearray``/``memoryview`` and ``str`` are framed as they are;
* NumPy arrays of plain dtypes are framed as a small header plus the raw array memory;
* pandas objects, and anything else pickle protocol 5 understands, travel as a pickle
  stream plus *out-of-band* buffers (the array memory is never copied into the pickle);
* polars frames travel as Arrow IPC;
* what plain pickle cannot handle (lambdas, local classes) falls back to cloudpickle.

:func:`serialize_parts` returns the same data as a list of buffers that a connector can
write with vectored I/O, without joining them first. :func:`deserialize` maps arrays onto
the buffer it is given, without a copy, when that buffer is writable; given read-only
memory (``bytes``) it copies once so that the arrays it returns are always writable.

Format (version 1)::

    magic b'TZ' | version u8 | kind u8 | header length u32 | header | padding | payload

The header describes the payload (lengths, dtype, shape); its size and every length are
checked, so truncated or corrupt input raises :class:`~tether.exceptions.SerializationError`
rather than returning garbage. The payload bytes themselves are not checksummed: the
transports tether uses (TCP, Redis, files, shared memory) deliver them intact.
"""

from __future__ import annotations

import pickle
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from tether import _hugebytes
from tether.exceptions import SerializationError

__all__ = [
    'BytesLike',
    'Deserializer',
    'Serializer',
    'copies_out',
    'deserialize',
    'direct_target',
    'framed_bytes_size',
    'is_bytes_like',
    'is_pickled',
    'new_buffer',
    'serialize',
    'serialize_parts',
]

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""Anything that exposes a contiguous byte buffer."""

Serializer: TypeAlias = Callable[[Any], BytesLike]
"""A function from an object to bytes."""

Deserializer: TypeAlias = Callable[[BytesLike], Any]
"""A function from bytes to an object."""

_MAGIC = b'TZ'
_VERSION = 1
_PREFIX = struct.Struct('<2sBBI')  # magic, version, kind, header length
_ALIGN = 64
_MAX_HEADER = 1 << 20

_KIND_BYTES = 1
_KIND_STR = 2
_KIND_NUMPY = 3
_KIND_PICKLE = 4
_KIND_CLOUDPICKLE = 5
_KIND_POLARS = 6
_KIND_BYTEARRAY = 7

_U64 = struct.Struct('<Q')


def _frame(kind: int, header: bytes, payload: Sequence[BytesLike]) -> list[BytesLike]:
    base = _PREFIX.size + len(header)
    pad = (-base) % _ALIGN
    head = _PREFIX.pack(_MAGIC, _VERSION, kind, len(header) + pad) + header + b'\0' * pad
    return [head, *payload]


def _numpy_parts(obj: Any) -> list[BytesLike] | None:
    import numpy as np

    if obj.dtype.hasobject or obj.dtype.fields is not None or obj.dtype.subdtype is not None:
        return None
    if obj.flags.c_contiguous:
        order = b'C'
    elif obj.flags.f_contiguous:
        order = b'F'
    else:
        obj = np.ascontiguousarray(obj)
        order = b'C'
    dtype = obj.dtype.str.encode()
    header = struct.pack(
        f'<B{len(dtype)}scB{obj.ndim}q',
        len(dtype),
        dtype,
        order,
        obj.ndim,
        *obj.shape,
    )
    data = obj.reshape(-1, order=order.decode()).view(np.uint8).data if obj.size else b''
    return _frame(_KIND_NUMPY, header, [data])


def _pickle_parts(obj: Any) -> list[BytesLike]:
    buffers: list[pickle.PickleBuffer] = []
    kind = _KIND_PICKLE
    try:
        stream = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    except Exception:
        import cloudpickle

        buffers = []
        kind = _KIND_CLOUDPICKLE
        try:
            stream = cloudpickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        except Exception as e:
            raise SerializationError(
                f'cannot serialize object of type {type(obj).__qualname__}: {e}',
            ) from e
    raws = [b.raw() for b in buffers]
    header = struct.pack(f'<QI{len(raws)}Q', len(stream), len(raws), *(r.nbytes for r in raws))
    return _frame(kind, header, [stream, *raws])


def serialize_parts(obj: Any) -> list[BytesLike]:
    """Serialize ``obj`` to a list of buffers whose concatenation is ``serialize(obj)``.

    The buffers may share memory with ``obj`` (no copy is made of large arrays): write
    them out before mutating ``obj``.
    """
    t = type(obj)
    if t is bytes or t is bytearray or t is memoryview:
        view = memoryview(obj).cast('B') if t is memoryview else obj
        kind = _KIND_BYTEARRAY if t is bytearray else _KIND_BYTES
        return _frame(kind, _U64.pack(len(view)), [view])
    if t is str:
        data = obj.encode('utf-8', 'surrogatepass')
        return _frame(_KIND_STR, _U64.pack(len(data)), [data])
    module = t.__module__
    if module == 'numpy' and t.__name__ == 'ndarray':
        parts = _numpy_parts(obj)
        if parts is not None:
            return parts
    elif module.startswith('polars') and t.__name__ == 'DataFrame':
        import io

        buf = io.BytesIO()
        obj.write_ipc(buf, compression='uncompressed')
        view = buf.getbuffer()
        return _frame(_KIND_POLARS, _U64.pack(view.nbytes), [view])
    return _pickle_parts(obj)


def serialize(obj: Any) -> bytes:
    """Serialize any picklable object to bytes (see the module docstring for the format).

    Raises:
        SerializationError: if neither pickle nor cloudpickle can serialize ``obj``.
    """
    return _hugebytes.join(serialize_parts(obj))


def _corrupt(msg: str) -> SerializationError:
    return SerializationError(f'cannot deserialize: {msg}')


def is_pickled(data: BytesLike) -> bool:
    """Return whether ``data``, made by :func:`serialize`, holds a pickle.

    Deserializing such data unpickles it; code that must not unpickle untrusted bytes
    checks this first (it reads the header only, never raises).
    """
    view = memoryview(data)
    kind = view[3] if view.nbytes > 3 else -1
    return kind in (_KIND_PICKLE, _KIND_CLOUDPICKLE)


_COPIED_KINDS = (_KIND_BYTES, _KIND_BYTEARRAY, _KIND_STR)
_NO_BUFFERS = struct.Struct('<8xQI')  # prefix, then a pickle header's stream length and count


def copies_out(data: BytesLike) -> bool:
    """Return whether :func:`deserialize` builds its object from a copy of all of ``data``.

    True for ``bytes``, ``bytearray`` and ``str`` payloads and for pickles without
    out-of-band buffers (given read-only memory, arrays are copied too, but on writable
    memory they are built on it without a copy): what deserializing such data returns
    never refers to ``data``, which may then be memory that is reused right after. Reads
    the header only; never raises (false for anything else, corrupt input included).
    """
    try:
        view = memoryview(data)
    except TypeError:
        return False
    if view.nbytes < _PREFIX.size or view.ndim != 1 or view.itemsize != 1:
        return False
    kind = view[3]
    if kind in _COPIED_KINDS:
        return True
    if kind in (_KIND_PICKLE, _KIND_CLOUDPICKLE) and view.nbytes >= _NO_BUFFERS.size:
        return bool(_NO_BUFFERS.unpack_from(view, 0)[1] == 0)
    return False


def deserialize(data: BytesLike) -> Any:
    """Deserialize bytes made by :func:`serialize` (or the concatenated parts).

    Raises:
        SerializationError: if ``data`` is not a tether serialization, is truncated, or
            is corrupt.
    """
    try:
        view = memoryview(data)
    except TypeError as e:
        raise _corrupt(f'expected a bytes-like object, got {type(data).__name__}') from e
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast('B')
    total = view.nbytes
    if total < _PREFIX.size:
        raise _corrupt(f'input is {total} bytes, shorter than the format prefix')
    magic, version, kind, hlen = _PREFIX.unpack_from(view, 0)
    if magic != _MAGIC:
        raise _corrupt(
            'input does not start with the tether serialization magic (was it written '
            'by another serializer, or is it corrupt?)',
        )
    if version != _VERSION:
        raise _corrupt(f'unsupported serialization version {version} (this is {_VERSION})')
    start = _PREFIX.size + hlen
    if hlen > _MAX_HEADER or start > total:
        raise _corrupt(f'header length {hlen} exceeds the input ({total} bytes)')
    header = view[_PREFIX.size : start]
    payload = view[start:]
    try:
        return _DECODERS[kind](header, payload)
    except KeyError:
        raise _corrupt(f'unknown payload kind {kind}') from None
    except SerializationError:
        raise
    except Exception as e:
        raise _corrupt(f'{type(e).__name__}: {e}') from e


BYTES_HEAD = _PREFIX.size + _U64.size + (-(_PREFIX.size + _U64.size)) % _ALIGN
"""Length of the framing in front of a serialized ``bytes`` (see :func:`framed_bytes_size`)."""


def framed_bytes_size(head: BytesLike) -> int | None:
    """The size of the ``bytes`` object whose serialization starts with ``head``.

    ``head`` is the first ``BYTES_HEAD`` bytes of a serialization; ``None`` if it is
    not that of a ``bytes`` object (or is not a tether serialization at all). A
    connector that knows the size can read the rest of the value straight into the
    object that :func:`deserialize` would have returned, instead of copying it there.
    """
    view = memoryview(head).cast('B')
    if view.nbytes < BYTES_HEAD:
        return None
    magic, version, kind, hlen = _PREFIX.unpack_from(view, 0)
    if magic != _MAGIC or version != _VERSION or kind != _KIND_BYTES:
        return None
    if _PREFIX.size + hlen != BYTES_HEAD:
        return None
    (size,) = _U64.unpack_from(view, _PREFIX.size)
    return int(size)


def direct_target(head: BytesLike, limit: int) -> tuple[Any, memoryview] | None:
    """Where a reader may put the rest of a serialization so that it needs no decoding.

    ``head`` is the serialization's first ``BYTES_HEAD`` bytes and ``limit`` the most
    bytes the whole serialization can have (what the transport announced). Returns
    ``(obj, view)``: the object :func:`deserialize` would return, and a writable view of
    its memory that the remaining bytes must fill completely before ``obj`` is used; or
    ``None`` when the value must be read into a buffer and deserialized as usual. The
    framing stays the serializer's business: a connector only asks this question.
    """
    size = framed_bytes_size(head)
    if size is None or size + BYTES_HEAD > limit:
        return None
    return _hugebytes.empty_bytes(size)


def new_buffer(nbytes: int) -> memoryview:
    """Return a new writable byte buffer of ``nbytes`` (connectors read into it).

    Plain 4 KB pages, on purpose. NumPy's huge-page allocations made a single fill of
    100 MB faster (~95 ms against ~160 ms for a resolve through Redis), but resolved
    objects usually stay alive (in the store's cache, or in the caller's hands), and then
    every new huge-page buffer stalled on the kernel finding free huge pages: a resolve
    loop with the default cache took ~360 ms per 100 MB against ~150 ms with 4 KB pages.
    Steady beats occasionally fast.

    Not zeroed (the caller fills all of it): its pages fault in during the ``recv_into``
    that fills it, with the GIL released, instead of in a GIL-holding memset.
    """
    return memoryview(_hugebytes.empty_bytearray(nbytes))


def _copy_buffer(nbytes: int) -> memoryview:
    # The copy deserialize() makes of read-only input: from NumPy (huge pages) when NumPy
    # is loaded, which fills 100 MB in ~15 ms instead of ~55 ms. Connectors' receive
    # buffers use new_buffer (4 KB pages) instead; see its docstring.
    np = sys.modules.get('numpy')
    if nbytes >= 1 << 20 and np is not None:
        return memoryview(np.empty(nbytes, dtype=np.uint8)).cast('B')
    return memoryview(bytearray(nbytes))


def _writable(payload: memoryview) -> memoryview:
    if not payload.readonly:
        return payload
    buf = _copy_buffer(payload.nbytes)
    buf[:] = payload
    return buf


def _sized(header: memoryview, payload: memoryview) -> memoryview:
    (size,) = _U64.unpack_from(header, 0)
    if payload.nbytes != size:
        raise _corrupt(f'payload is {payload.nbytes} bytes, expected {size} (truncated input?)')
    return payload


def _decode_bytes(header: memoryview, payload: memoryview) -> bytes:
    # Not _hugebytes here: a consumer allocating a fresh 100 MB per resolve (while the
    # previous object is still alive) made the kernel supply new huge pages each time,
    # which on this VM stalled for 0.3-0.9 s now and then; 4 KB pages are steadier.
    # The copy of a large payload runs with the GIL released (see _hugebytes).
    return _hugebytes.copy_to_bytes(_sized(header, payload))


def _decode_bytearray(header: memoryview, payload: memoryview) -> bytearray:
    return bytearray(_sized(header, payload))


def _decode_str(header: memoryview, payload: memoryview) -> str:
    return str(_sized(header, payload), 'utf-8', 'surrogatepass')


def _decode_numpy(header: memoryview, payload: memoryview) -> Any:
    import numpy as np

    (dlen,) = struct.unpack_from('<B', header, 0)
    dtype = np.dtype(bytes(header[1 : 1 + dlen]).decode())
    order, ndim = struct.unpack_from('<cB', header, 1 + dlen)
    shape = struct.unpack_from(f'<{ndim}q', header, 3 + dlen)
    expected = dtype.itemsize
    for s in shape:
        if s < 0:
            raise _corrupt(f'negative dimension in array shape {shape}')
        expected *= s
    if payload.nbytes != expected:
        raise _corrupt(
            f'array payload is {payload.nbytes} bytes, expected {expected} for '
            f'{dtype} {shape} (truncated input?)',
        )
    buf = _writable(payload)
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order.decode())


def _decode_pickle(header: memoryview, payload: memoryview, cloud: bool = False) -> Any:
    slen, nbuf = struct.unpack_from('<QI', header, 0)
    sizes = struct.unpack_from(f'<{nbuf}Q', header, 12)
    if slen + sum(sizes) != payload.nbytes:
        raise _corrupt(
            f'pickle payload is {payload.nbytes} bytes, expected {slen + sum(sizes)} '
            '(truncated input?)',
        )
    stream = payload[:slen]
    offset = slen
    buffers: list[memoryview] = []
    if nbuf:
        raw = _writable(payload[slen:])
        offset = 0
        for size in sizes:
            buffers.append(raw[offset : offset + size])
            offset += size
    if cloud:
        import cloudpickle  # noqa: F401  (registers what cloudpickle streams need)
    return pickle.loads(stream, buffers=buffers)


def _decode_cloudpickle(header: memoryview, payload: memoryview) -> Any:
    return _decode_pickle(header, payload, cloud=True)


def _decode_polars(header: memoryview, payload: memoryview) -> Any:
    import io

    import polars as pl

    return pl.read_ipc(io.BytesIO(_sized(header, payload)))


_DECODERS: dict[int, Callable[[memoryview, memoryview], Any]] = {
    _KIND_BYTES: _decode_bytes,
    _KIND_BYTEARRAY: _decode_bytearray,
    _KIND_STR: _decode_str,
    _KIND_NUMPY: _decode_numpy,
    _KIND_PICKLE: _decode_pickle,
    _KIND_CLOUDPICKLE: _decode_cloudpickle,
    _KIND_POLARS: _decode_polars,
}

if sys.byteorder != 'little':  # pragma: no cover - every platform we support is little
    raise ImportError('tether.serialize supports little-endian platforms only')


def is_bytes_like(obj: Any) -> bool:
    """Return whether ``obj`` is :data:`BytesLike` (``bytes``, ``bytearray``, ``memoryview``)."""
    return isinstance(obj, bytes | bytearray | memoryview)
