"""Values in agent messages: a JSON tree plus raw buffers, never pickle unless allowed.

Native values (``None``, bools, ints, floats, complex, str, bytes, bytearray, lists,
tuples, dicts, sets, frozensets, NumPy arrays of plain dtypes, and agent handles) are
encoded as a JSON
tree whose byte-like leaves point at raw payload buffers. Anything else is pickled and
marked as such; a receiver refuses pickled values unless it allows them. Values larger
than a threshold go through a tether :class:`~tether.store.Store` and travel as a
reference; the receiver gets a lazy proxy of them, built over its *own* store of that
name (never a store or connector that the message describes).
"""

from __future__ import annotations

import dataclasses
import math
import pickle
from collections.abc import Callable
from typing import Any

from tether.exceptions import MessageRejectedError, SerializationError, UntrustedTypeError
from tether.proxy import Proxy, extract, get_factory, is_resolved

__all__ = ['Codec', 'deserialize_no_pickle']

_INT_MAX = 1 << 63
# Plain NumPy dtype kinds: bool, ints, floats, complex, datetimes, bytes and unicode strings.
_NUMPY_KINDS = frozenset('biufcmMSU')
_MAX_DEPTH = 64


def deserialize_no_pickle(data: Any) -> Any:
    """Deserialize store data made by :func:`tether.serialize.serialize`, refusing pickles.

    Used for the proxies an agent receives when it does not accept pickled values: an
    attacker who can write the store cannot make it unpickle anything.
    """
    from tether import serialize

    if serialize.is_pickled(data):
        raise SerializationError(
            'refusing to unpickle a value from the store: this agent does not accept '
            'pickled values (pass allow_pickle=True to its exchange to accept them)',
        )
    return serialize.deserialize(data)


def deserialize_pickle_ok(data: Any) -> Any:
    """Deserialize store data, pickles included (the receiver allows pickled values)."""
    from tether import serialize

    return serialize.deserialize(data)


@dataclasses.dataclass
class Codec:
    """How one process encodes and decodes message values.

    Attributes:
        allow_pickle: Accept pickled values from the other side.
        store_getter: Returns the store that values larger than ``threshold`` go through
            (called when first needed, so processes that never see a large value never
            import the store; ``None``: values go inline).
        threshold: Size in bytes above which a value goes through ``store``.
    """

    allow_pickle: bool = False
    store_getter: Callable[[], Any] | None = None
    threshold: int | None = None
    exchange: Any = None
    _store: Any = dataclasses.field(default=None, repr=False)

    @property
    def store(self) -> Any:
        """The store for large values, built on first use (``None``: values go inline)."""
        if self._store is None and self.store_getter is not None:
            self._store = self.store_getter()
        return self._store

    # Encoding ---------------------------------------------------------------------------

    def encode(self, obj: Any, buffers: list[Any]) -> Any:
        """Return the JSON node of ``obj``; byte payloads are appended to ``buffers``."""
        return self._enc(obj, buffers, 0)

    def _big(self, nbytes: int) -> bool:
        return (
            self.threshold is not None
            and nbytes > self.threshold
            and (self._store is not None or self.store_getter is not None)
        )

    def _enc(self, obj: Any, buffers: list[Any], depth: int) -> Any:
        t = type(obj)
        if obj is None or t is str or t is bool:
            return obj
        if t is int:
            return obj if -_INT_MAX <= obj < _INT_MAX else {'I': str(obj)}
        if t is float:
            return obj if math.isfinite(obj) else {'f': repr(obj)}
        if depth > _MAX_DEPTH:
            return self._pickle(obj, buffers)
        if t is list:
            return [self._enc(x, buffers, depth + 1) for x in obj]
        if t is tuple:
            return {'T': [self._enc(x, buffers, depth + 1) for x in obj]}
        if t is dict:
            return {
                'D': [
                    [self._enc(k, buffers, depth + 1), self._enc(v, buffers, depth + 1)]
                    for k, v in obj.items()
                ],
            }
        if t is bytes or t is bytearray or t is memoryview:
            view = memoryview(obj)
            if self._big(view.nbytes):
                return self._by_store(obj if t is not memoryview else bytes(view))
            buffers.append(view)
            return {'A' if t is bytearray else 'B': len(buffers) - 1}
        if t is set or t is frozenset:
            tag = 'S' if t is set else 'Z'
            return {tag: [self._enc(x, buffers, depth + 1) for x in obj]}
        if t is complex:
            return {'C': [self._enc(obj.real, buffers, 0), self._enc(obj.imag, buffers, 0)]}
        if t is Proxy:
            return self._proxy(obj, buffers, depth)
        if t.__module__ == 'numpy' and t.__name__ == 'ndarray':
            return self._numpy(obj, buffers)
        if t.__name__ == 'Handle' and t.__module__ == 'tether.agents.handle':
            # A handle travels as its agent id: the receiver binds it to its exchange.
            return {'H': obj.agent_id}
        return self._pickle(obj, buffers)

    def _numpy(self, arr: Any, buffers: list[Any]) -> Any:
        if arr.dtype.hasobject or arr.dtype.kind not in _NUMPY_KINDS or arr.dtype.fields:
            return self._pickle(arr, buffers)
        if self._big(arr.nbytes):
            return self._by_store(arr)
        import numpy as np

        data = np.ascontiguousarray(arr)
        buffers.append(memoryview(data).cast('B') if data.nbytes else b'')  # type: ignore[arg-type]
        return {'N': [len(buffers) - 1, data.dtype.str, list(data.shape)]}

    def _pickle(self, obj: Any, buffers: list[Any]) -> Any:
        try:
            data = pickle.dumps(obj, protocol=5)
        except Exception as e:
            raise SerializationError(
                f'cannot send a value of type {type(obj).__qualname__}: it is not a native '
                f'value and cannot be pickled ({e})',
            ) from e
        name = f'{type(obj).__module__}.{type(obj).__qualname__}'
        if self._big(len(data)):
            return self._by_store(obj)
        buffers.append(data)
        return {'P': [len(buffers) - 1, name]}

    def _by_store(self, obj: Any) -> Any:
        key = self.store.put(obj)
        return _ref_node(self.store.name, key, evict=True)

    def _proxy(self, proxy: Proxy[Any], buffers: list[Any], depth: int) -> Any:
        from tether.store import get_store
        from tether.store.factory import StoreFactory

        factory = get_factory(proxy)
        if isinstance(factory, StoreFactory):
            name = factory.store_config.name
            known = (self.store is not None and self.store.name == name) or get_store(name)
            usable = not (factory.evict and is_resolved(proxy))
            node = _ref_node(name, factory.key, evict=factory.evict) if known else None
            if node is not None and usable:
                return node
        if is_resolved(proxy):
            return self._enc(extract(proxy), buffers, depth + 1)
        # A proxy of another kind travels as its (small) pickle: its factory.
        return self._pickle(proxy, buffers)

    # Decoding ---------------------------------------------------------------------------

    def decode(self, node: Any, payloads: list[Any]) -> Any:
        """Rebuild a value from its JSON node and the message's payloads.

        Raises:
            MessageRejectedError: if the node is not valid, or is a pickle this side
                refuses.
        """
        try:
            return self._dec(node, payloads, 0)
        except MessageRejectedError:
            raise
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise MessageRejectedError(f'message carries an invalid value: {e!r}') from e

    def _dec(self, node: Any, payloads: list[Any], depth: int) -> Any:
        if depth > _MAX_DEPTH + 2:
            raise MessageRejectedError('message value is nested too deeply')
        if node is None or isinstance(node, str | bool | int | float):
            return node
        if isinstance(node, list):
            return [self._dec(x, payloads, depth + 1) for x in node]
        if not isinstance(node, dict) or (len(node) != 1 and 'R' not in node):
            raise MessageRejectedError(f'message carries an invalid value node {node!r:.80}')
        tag, body = next(iter(node.items()))
        if tag == 'B':
            return bytes(payloads[body])
        if tag == 'T':
            return tuple(self._dec(x, payloads, depth + 1) for x in body)
        if tag == 'D':
            return {
                _hashable(self._dec(k, payloads, depth + 1)): self._dec(v, payloads, depth + 1)
                for k, v in body
            }
        return self._dec_tagged(tag, body, node, payloads, depth)

    def _dec_tagged(
        self, tag: str, body: Any, node: dict[str, Any], payloads: list[Any], depth: int
    ) -> Any:
        """The value tags after the common three (bytes, tuples, dicts)."""
        if tag == 'A':
            return bytearray(payloads[body])
        if tag == 'S':
            return {_hashable(self._dec(x, payloads, depth + 1)) for x in body}
        if tag == 'Z':
            return frozenset(_hashable(self._dec(x, payloads, depth + 1)) for x in body)
        if tag == 'I':
            return int(body)
        if tag == 'f':
            if body not in ('nan', 'inf', '-inf'):
                raise MessageRejectedError(f'invalid float {body!r:.40}')
            return float(body)
        if tag == 'C':
            return complex(float(body[0]), float(body[1]))
        if tag == 'N':
            return _decode_numpy(body, payloads)
        if tag == 'P':
            return self._unpickle(body, payloads)
        if tag == 'R':
            return self._ref(node)
        if tag == 'H':
            if not isinstance(body, str) or self.exchange is None:
                raise MessageRejectedError('message carries an invalid handle')
            return self.exchange.get_handle(body)
        raise MessageRejectedError(f'message carries an unknown value tag {tag!r:.20}')

    def _unpickle(self, body: Any, payloads: list[Any]) -> Any:
        index, name = body
        if not self.allow_pickle:
            raise MessageRejectedError(
                f'message carries a pickled value of type {str(name)!r:.120}; this side '
                'does not accept pickled values (send native values: None, bool, int, '
                'float, str, bytes, list, tuple, dict, set, NumPy arrays; or pass '
                'allow_pickle=True to the receiving exchange)',
            )
        return pickle.loads(payloads[index])

    def _ref(self, node: dict[str, Any]) -> Any:
        from tether.store import allowlist, get_store
        from tether.store.factory import StoreFactory

        name, key_type, fields = node['R']
        store = self.store if self.store is not None and self.store.name == name else None
        store = store or get_store(str(name))
        if store is None:
            raise MessageRejectedError(
                f'message refers to store {name!r:.80}, which this process does not have: '
                'configure the same store on both sides',
            )
        # The key type is named by the message: only an allowlisted key type is imported.
        try:
            cls = allowlist.resolve('key', key_type)
        except UntrustedTypeError as e:
            raise MessageRejectedError(f'message refers to an unknown key type: {e}') from e
        if not all(isinstance(f, str | int) for f in fields):
            raise MessageRejectedError('message carries an invalid store key')
        deserializer: Callable[[Any], Any] = (
            deserialize_pickle_ok if self.allow_pickle else deserialize_no_pickle
        )
        factory: StoreFactory[Any] = StoreFactory(
            cls(*fields),
            store.config(),
            evict=bool(node.get('e', False)),
            deserializer=deserializer,
            store=store,
        )
        return Proxy(factory)


def _ref_node(store_name: str, key: Any, *, evict: bool) -> dict[str, Any] | None:
    cls = type(key)
    fields = list(key) if isinstance(key, tuple) else None
    if fields is None or not all(isinstance(f, str | int) for f in fields):
        return None
    return {'R': [store_name, f'{cls.__module__}.{cls.__qualname__}', fields], 'e': evict}


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        raise MessageRejectedError('message carries a list where a hashable value is needed')
    return value


def _decode_numpy(body: Any, payloads: list[Any]) -> Any:
    import numpy as np

    index, dtype_str, shape = body
    dtype = np.dtype(str(dtype_str))
    if dtype.hasobject or dtype.kind not in _NUMPY_KINDS or dtype.fields:
        raise MessageRejectedError(f'message carries an array of refused dtype {dtype_str!r:.40}')
    shape = tuple(int(n) for n in shape)
    buf = payloads[index]
    count = math.prod(shape)
    if count * dtype.itemsize != memoryview(buf).nbytes:
        raise MessageRejectedError('message carries an array whose size does not match')
    if not isinstance(buf, bytearray):
        buf = bytearray(buf)
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(shape)
