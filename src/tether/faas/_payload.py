"""Serializer ids and the payloads the SDK and the endpoints exchange.

Every payload travels with the id of the serializer that made it, so the receiving side
knows how to read it without guessing:

* data (arguments and results): ``'tether'`` (:func:`tether.serialize.serialize`, pickle
  protocol 5 with out-of-band buffers, cloudpickle fallback) or ``'json'`` (plain JSON:
  works between different Python versions and languages);
* functions: ``'pickle'`` (cloudpickle, by value for functions of ``__main__``) or
  ``'source'`` (the function's source text, run on the endpoint; works across Python
  versions).

The service never calls these: it stores and forwards payloads as opaque bytes. Only an
endpoint reads functions and arguments, and only for tasks the service authenticated as
coming from the endpoint's owner (and, if set, that the endpoint's allowlist lists).
"""

from __future__ import annotations

import inspect
import json
import textwrap
from collections.abc import Callable
from typing import Any

from tether.exceptions import SerializationError

__all__ = [
    'DATA_SERIALIZERS',
    'FUNCTION_SERIALIZERS',
    'load_function',
    'pack_args',
    'pack_function',
    'pack_result',
    'unpack_args',
    'unpack_result',
]

DATA_SERIALIZERS = ('tether', 'json')
FUNCTION_SERIALIZERS = ('pickle', 'source')


def _check(kind: str, method: str, allowed: tuple[str, ...]) -> None:
    if method not in allowed:
        raise SerializationError(f'unknown {kind} serializer {method!r}: use one of {allowed}')


def pack_function(fn: Callable[..., Any], method: str = 'pickle') -> bytes:
    """Serialize a function with ``method`` (``'pickle'`` or ``'source'``)."""
    _check('function', method, FUNCTION_SERIALIZERS)
    if not callable(fn):
        raise SerializationError(f'{fn!r} is not callable: register a function')
    if method == 'source':
        name = getattr(fn, '__name__', '')
        if not name.isidentifier() or name == '<lambda>':
            raise SerializationError(
                f"{fn!r} has no usable name: 'source' serializes named def functions only",
            )
        try:
            source = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError) as e:
            raise SerializationError(f'cannot read the source of {name}: {e}') from e
        return json.dumps({'name': name, 'source': source}).encode()
    import cloudpickle

    try:
        return bytes(cloudpickle.dumps(fn))
    except Exception as e:
        raise SerializationError(f'cannot pickle function {fn!r}: {e}') from e


def load_function(method: str, data: bytes | memoryview) -> Callable[..., Any]:
    """Rebuild a function (endpoint side only; see the module docstring for the trust)."""
    _check('function', method, FUNCTION_SERIALIZERS)
    if method == 'source':
        try:
            spec = json.loads(bytes(data))
            namespace: dict[str, Any] = {'__name__': '__tether_faas__'}
            exec(compile(spec['source'], f'<function {spec["name"]}>', 'exec'), namespace)
            fn = namespace[spec['name']]
        except Exception as e:
            raise SerializationError(f'cannot load function from source: {e}') from e
    else:
        import pickle

        try:
            fn = pickle.loads(data)
        except Exception as e:
            raise SerializationError(f'cannot unpickle function: {e}') from e
    if not callable(fn):
        raise SerializationError(f'payload holds a {type(fn).__name__}, not a function')
    return fn  # type: ignore[no-any-return]


def pack_args(args: tuple[Any, ...], kwargs: dict[str, Any], method: str = 'tether') -> bytes:
    """Serialize a call's arguments with ``method`` (``'tether'`` or ``'json'``)."""
    _check('data', method, DATA_SERIALIZERS)
    if method == 'json':
        try:
            return json.dumps({'args': list(args), 'kwargs': kwargs}).encode()
        except (TypeError, ValueError) as e:
            raise SerializationError(f'arguments are not JSON data: {e}') from e
    from tether.serialize import serialize

    return bytes(serialize((args, kwargs)))


def unpack_args(method: str, data: bytes | memoryview) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Read a call's arguments (endpoint side)."""
    _check('data', method, DATA_SERIALIZERS)
    if method == 'json':
        try:
            spec = json.loads(bytes(data))
            return tuple(spec['args']), dict(spec['kwargs'])
        except Exception as e:
            raise SerializationError(f'arguments are not valid JSON data: {e}') from e
    from tether.serialize import deserialize

    args, kwargs = deserialize(data)
    return tuple(args), dict(kwargs)


def pack_result(value: Any, method: str = 'tether') -> bytes:
    """Serialize a result with ``method``."""
    _check('data', method, DATA_SERIALIZERS)
    if method == 'json':
        try:
            return json.dumps(value).encode()
        except (TypeError, ValueError) as e:
            raise SerializationError(f'result is not JSON data: {e}') from e
    from tether.serialize import serialize

    return bytes(serialize(value))


def unpack_result(method: str, data: bytes | memoryview) -> Any:
    """Read a result (SDK side: results come from the user's own endpoints)."""
    _check('data', method, DATA_SERIALIZERS)
    if method == 'json':
        try:
            return json.loads(bytes(data))
        except Exception as e:
            raise SerializationError(f'result is not valid JSON data: {e}') from e
    from tether.serialize import deserialize

    return deserialize(data)
