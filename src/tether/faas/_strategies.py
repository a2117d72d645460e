"""Serialization strategies by the Globus Compute SDK's names, each standing for a tether
serializer (``docs/faas.md``, "Serialization strategies").

A strategy turns a function (``for_code``) or data into bytes that say which strategy
made them: ``b'<strategy name>\\n'`` then the tether serializer's bytes. A reader looks
the name up among the strategies below (never importing anything a payload names) and
can refuse it before reading a byte more (:class:`~tether.faas.ComputeSerializer`'s
``allowed_deserializer_types``; an endpoint's ``allowed_serializers``).

=========================================================  =============
strategy                                                   tether id
=========================================================  =============
``DillCode``                                               ``'pickle'``
``DillCodeSource``, ``DillCodeTextInspect``,               ``'source'``
``PureSourceDill``, ``PureSourceTextInspect``
``CombinedCode``, ``AllCodeStrategies`` (several above)    ``'pickle'``
``DillDataBase64``                                         ``'tether'``
``JSONData``                                               ``'json'``
``AllDataStrategies`` (both above)                         ``'tether'``
=========================================================  =============
"""

from __future__ import annotations

import base64
import inspect
import json
from typing import Any, ClassVar

from tether.exceptions import SerializationError, SourceNotFoundError, UnknownStrategyError
from tether.faas._payload import load_function, pack_function, pack_result, unpack_result

__all__ = [
    'DEFAULT_STRATEGY_CODE',
    'DEFAULT_STRATEGY_DATA',
    'KNOWN_STRATEGIES',
    'SELECTABLE_STRATEGIES',
    'AllCodeStrategies',
    'AllDataStrategies',
    'ComboSerializationStrategy',
    'CombinedCode',
    'DillCode',
    'DillCodeSource',
    'DillCodeTextInspect',
    'DillDataBase64',
    'JSONData',
    'PureSourceDill',
    'PureSourceTextInspect',
    'SerializationStrategy',
    'split_payload',
]


class SerializationStrategy:
    """A named way to serialize functions (``for_code``) or data, standing for a tether
    serializer id (``tether_id``)."""

    for_code: ClassVar[bool] = False
    tether_id: ClassVar[str] = 'tether'

    def __repr__(self) -> str:
        return f'{type(self).__name__}()'

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    @staticmethod
    def get_cached_by_class(strategy: type[SerializationStrategy]) -> SerializationStrategy:
        """The shared instance of one of tether's strategies (strategies hold no state)."""
        instance = _INSTANCES.get(strategy)
        if instance is None:
            if KNOWN_STRATEGIES.get(getattr(strategy, '__name__', '')) is not strategy:
                raise UnknownStrategyError(f'{strategy!r} is not a known serialization strategy')
            instance = _INSTANCES[strategy] = strategy()
        return instance

    def dump(self, obj: Any) -> bytes:
        """The tether serializer's bytes of ``obj`` (no strategy name)."""
        if self.for_code:
            if not callable(obj):
                raise SerializationError(
                    f'{type(self).__name__} serializes functions, not {obj!r}'
                )
            return pack_function(obj, self.tether_id)
        return pack_result(obj, self.tether_id)

    def load(self, raw: bytes) -> Any:
        """The object of :meth:`dump`'s bytes."""
        if self.for_code:
            return load_function(self.tether_id, raw)
        return unpack_result(self.tether_id, raw)

    def serialize(self, obj: Any) -> bytes:
        """``obj`` as bytes that name this strategy."""
        return type(self).__name__.encode() + b'\n' + self.dump(obj)

    def deserialize(self, data: bytes | str) -> Any:
        """The object of bytes this strategy made (:meth:`serialize`).

        Loading a function runs its code: do it only with bytes you trust (an endpoint
        does it for tasks its owner sent; ``allowed_serializers`` narrows what it loads).
        """
        strategy, raw = split_payload(data)
        if type(strategy) is not type(self):
            raise SerializationError(
                f'payload was made by {type(strategy).__name__}, not {type(self).__name__}'
            )
        return self.load(raw)


class DillCode(SerializationStrategy):
    """Functions by value (tether's ``'pickle'``: cloudpickle)."""

    for_code = True
    tether_id = 'pickle'


class DillCodeSource(SerializationStrategy):
    """Functions as their source text (tether's ``'source'``)."""

    for_code = True
    tether_id = 'source'

    def dump(self, obj: Any) -> bytes:
        """``obj``'s source; a routine without Python source (a builtin) is refused."""
        if inspect.isroutine(obj) and not hasattr(obj, '__code__'):
            raise SourceNotFoundError(
                f'{obj!r} has no Python source (a builtin): send it by value '
                '(DillCode, or CombinedCode, which falls back to it)'
            )
        return super().dump(obj)


class DillCodeTextInspect(DillCodeSource):
    """Functions as their source text (tether's ``'source'``)."""


class PureSourceDill(DillCodeSource):
    """Functions as their source text (tether's ``'source'``)."""


class PureSourceTextInspect(DillCodeSource):
    """Functions as their source text (tether's ``'source'``)."""


class DillDataBase64(SerializationStrategy):
    """Arguments and results with tether's serializer (``'tether'``)."""

    tether_id = 'tether'


class JSONData(SerializationStrategy):
    """Arguments and results as plain JSON (tether's ``'json'``)."""

    tether_id = 'json'


class ComboSerializationStrategy(SerializationStrategy):
    """Serializes with every strategy of ``strategies`` that can; reads with the first
    whose bytes load. A task sent with one travels with its ``tether_id``."""

    strategies: ClassVar[tuple[type[SerializationStrategy], ...]] = ()

    def dump(self, obj: Any) -> bytes:
        parts, failures = [], []
        for cls in self.strategies:
            try:
                parts.append([cls.__name__, base64.b64encode(cls().dump(obj)).decode()])
            except Exception as e:
                failures.append(f'{cls.__name__}: {e}')
        if not parts:
            raise SerializationError(
                f'every strategy of {type(self).__name__} failed: ' + '; '.join(failures)
            )
        return json.dumps(parts).encode()

    def load(self, raw: bytes) -> Any:
        try:
            parts = [(str(n), base64.b64decode(p)) for n, p in json.loads(raw)]
        except Exception as e:
            raise SerializationError(f'not a {type(self).__name__} payload: {e}') from e
        by_name = {cls.__name__: cls for cls in self.strategies}
        failures = []
        for name, data in parts:
            cls = by_name.get(name)
            if cls is None:
                failures.append(f'{name}: not a strategy of {type(self).__name__}')
                continue
            try:
                return cls().load(data)
            except Exception as e:
                failures.append(f'{name}: {e}')
        raise SerializationError(
            f'no strategy of {type(self).__name__} could read the payload: ' + '; '.join(failures)
        )


class CombinedCode(ComboSerializationStrategy):
    """Functions as source text and by value; read as source first."""

    for_code = True
    tether_id = 'pickle'
    strategies = (DillCodeSource, DillCode)


class AllCodeStrategies(ComboSerializationStrategy):
    """Functions with every code strategy (source text first, then by value)."""

    for_code = True
    tether_id = 'pickle'
    strategies = (PureSourceTextInspect, PureSourceDill, DillCode)


class AllDataStrategies(ComboSerializationStrategy):
    """Data as JSON where it can be, and with tether's serializer."""

    tether_id = 'tether'
    strategies = (JSONData, DillDataBase64)


#: Every strategy a program can choose (the Globus Compute SDK's list).
SELECTABLE_STRATEGIES: list[type[SerializationStrategy]] = [
    DillDataBase64,
    JSONData,
    DillCodeSource,
    DillCodeTextInspect,
    DillCode,
    PureSourceTextInspect,
    PureSourceDill,
    CombinedCode,
    AllCodeStrategies,
    AllDataStrategies,
]
#: The strategies tether knows, by name: the only ones a payload may name.
KNOWN_STRATEGIES: dict[str, type[SerializationStrategy]] = {
    cls.__name__: cls for cls in SELECTABLE_STRATEGIES
}
_INSTANCES: dict[type[SerializationStrategy], SerializationStrategy] = {}
#: The code strategy when none is chosen.
DEFAULT_STRATEGY_CODE = DillCode()
#: The data strategy when none is chosen.
DEFAULT_STRATEGY_DATA = DillDataBase64()


def split_payload(data: bytes | str) -> tuple[SerializationStrategy, bytes]:
    """The strategy a payload names and its serializer's bytes (nothing is loaded)."""
    if isinstance(data, str):
        data = data.encode()
    name, sep, raw = bytes(data).partition(b'\n')
    if not sep:
        raise SerializationError(
            f'not a strategy payload (no strategy name line): {bytes(data)[:40]!r}'
        )
    cls = KNOWN_STRATEGIES.get(name.decode(errors='replace'))
    if cls is None:
        raise SerializationError(
            f'payload names an unknown strategy {name[:40]!r}: known are '
            + ', '.join(sorted(KNOWN_STRATEGIES))
        )
    return cls(), raw
