"""Serialization strategies by the Globus Compute SDK's names, mapped to tether's serializers.

tether names its serializers by id (functions: ``'pickle'``, ``'source'``; data:
``'tether'``, ``'json'``; see ``docs/faas.md``). The strategy classes here stand for the
one of them that does the same job, so that ``Client(code_serialization_strategy=...)``,
``Executor(serializer=ComputeSerializer(...))`` and ``Batch``/``Client`` keep working:

=========================================================  =============
strategy                                                   tether id
=========================================================  =============
``DillCode``, ``CombinedCode``                             ``'pickle'``
``DillCodeSource``, ``DillCodeTextInspect``,               ``'source'``
``PureSourceDill``, ``PureSourceTextInspect``
``DillDataBase64``                                         ``'tether'``
``JSONData``                                               ``'json'``
=========================================================  =============
"""

from __future__ import annotations

from typing import Any, ClassVar

from tether.exceptions import SerializationError
from tether.faas._payload import (
    DATA_SERIALIZERS,
    FUNCTION_SERIALIZERS,
    pack_function,
    pack_result,
    unpack_result,
)

__all__ = [
    'CombinedCode',
    'ComputeSerializer',
    'DillCode',
    'DillCodeSource',
    'DillCodeTextInspect',
    'DillDataBase64',
    'JSONData',
    'PureSourceDill',
    'PureSourceTextInspect',
    'SerializationStrategy',
    'code_serializer_of',
    'data_serializer_of',
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

    def serialize(self, obj: Any) -> bytes:
        if self.for_code:
            return pack_function(obj, self.tether_id)
        return pack_result(obj, self.tether_id)

    def deserialize(self, data: bytes) -> Any:
        if self.for_code:
            raise SerializationError(
                'functions are rebuilt on the endpoint only (tether.faas does not load '
                'function payloads in the client)'
            )
        return unpack_result(self.tether_id, data)


class DillCode(SerializationStrategy):
    """Functions by value (tether's ``'pickle'``: cloudpickle)."""

    for_code = True
    tether_id = 'pickle'


class CombinedCode(DillCode):
    """Functions by value (tether's ``'pickle'``)."""


class DillCodeSource(SerializationStrategy):
    """Functions as their source text (tether's ``'source'``)."""

    for_code = True
    tether_id = 'source'


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


def _strategy(value: Any) -> SerializationStrategy:
    if isinstance(value, type) and issubclass(value, SerializationStrategy):
        return value()
    if isinstance(value, SerializationStrategy):
        return value
    raise TypeError(
        f'expected a serialization strategy (tether.faas.DillCode, JSONData ...), not {value!r}'
    )


def code_serializer_of(value: Any) -> str | None:
    """tether's function serializer id for a strategy, a strategy class or an id."""
    if value is None or value in FUNCTION_SERIALIZERS:
        return value  # type: ignore[no-any-return]
    strategy = _strategy(value)
    if not strategy.for_code:
        raise TypeError(f'{strategy!r} serializes data, not functions')
    return strategy.tether_id


def data_serializer_of(value: Any) -> str | None:
    """tether's data serializer id for a strategy, a strategy class or an id."""
    if value is None or value in DATA_SERIALIZERS:
        return value  # type: ignore[no-any-return]
    strategy = _strategy(value)
    if strategy.for_code:
        raise TypeError(f'{strategy!r} serializes functions, not data')
    return strategy.tether_id


class ComputeSerializer:
    """A pair of strategies: one for functions, one for arguments and results.

    Args:
        strategy_code: How functions travel (default :class:`DillCode`; with
            ``JSONData`` data, :class:`DillCodeSource`).
        strategy_data: How arguments and results travel (default
            :class:`DillDataBase64`).
    """

    def __init__(
        self,
        strategy_code: SerializationStrategy | None = None,
        strategy_data: SerializationStrategy | None = None,
    ) -> None:
        self.strategy_data = _strategy(strategy_data or DillDataBase64())
        if self.strategy_data.for_code:
            raise TypeError(f'strategy_data: {self.strategy_data!r} serializes functions')
        default_code = DillCodeSource() if self.strategy_data.tether_id == 'json' else DillCode()
        self.strategy_code = _strategy(strategy_code or default_code)
        if not self.strategy_code.for_code:
            raise TypeError(f'strategy_code: {self.strategy_code!r} serializes data')

    def __repr__(self) -> str:
        return f'ComputeSerializer({self.strategy_code!r}, {self.strategy_data!r})'

    @property
    def function_serializer(self) -> str:
        """tether's id of the function strategy."""
        return self.strategy_code.tether_id

    @property
    def data_serializer(self) -> str:
        """tether's id of the data strategy."""
        return self.strategy_data.tether_id

    def serialize(self, obj: Any) -> bytes:
        """Functions with the code strategy, anything else with the data strategy."""
        if callable(obj) and not isinstance(obj, type):
            return self.strategy_code.serialize(obj)
        return self.strategy_data.serialize(obj)

    def deserialize(self, data: bytes) -> Any:
        """Data serialized with the data strategy."""
        return self.strategy_data.deserialize(data)
