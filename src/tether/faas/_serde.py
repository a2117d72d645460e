"""``ComputeSerializer``: a code strategy, a data strategy and an allowlist of readers.

The strategies live in :mod:`tether.faas._strategies`, the allowlist rules in
:mod:`tether.faas._allow`. An Executor or a Client sends tasks with the tether serializer
ids of its ``ComputeSerializer``'s strategies (:attr:`ComputeSerializer.function_serializer_id`
and :attr:`ComputeSerializer.data_serializer_id`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tether.exceptions import SerializationError, SerializerNotAllowedError
from tether.faas._allow import (
    AllowlistWildcard,
    ValidatedStrategylike,
    parse_allowlist,
    validate_strategylike,
)
from tether.faas._payload import DATA_SERIALIZERS, FUNCTION_SERIALIZERS
from tether.faas._strategies import (
    DEFAULT_STRATEGY_CODE,
    DEFAULT_STRATEGY_DATA,
    DillCodeSource,
    SerializationStrategy,
    split_payload,
)

__all__ = [
    'AllowlistWildcard',
    'ComputeSerializer',
    'ValidatedStrategylike',
    'code_serializer_of',
    'data_serializer_of',
    'validate_strategylike',
]


def code_serializer_of(value: Any) -> str | None:
    """tether's function serializer id for a strategy-like or an id (``None`` stays)."""
    if value is None or value in FUNCTION_SERIALIZERS:
        return value  # type: ignore[no-any-return]
    return validate_strategylike(value, for_code=True).type_.tether_id


def data_serializer_of(value: Any) -> str | None:
    """tether's data serializer id for a strategy-like or an id (``None`` stays)."""
    if value is None or value in DATA_SERIALIZERS:
        return value  # type: ignore[no-any-return]
    return validate_strategylike(value, for_code=False).type_.tether_id


class ComputeSerializer:
    """A pair of strategies (functions, data) and the strategies it agrees to read.

    Args:
        strategy_code: How functions travel (a strategy-like; default ``DillCode``, or
            ``DillCodeSource`` when the data strategy is ``JSONData``).
        strategy_data: How arguments and results travel (default ``DillDataBase64``).
        allowed_deserializer_types: The strategies :meth:`deserialize` reads (strategy-likes
            or :class:`AllowlistWildcard`; at least one of each kind). ``None`` reads every
            strategy of tether's.

    Raises:
        UnknownStrategyError: a strategy or allowlist entry is no strategy tether knows,
            or of the wrong kind.
    """

    def __init__(
        self,
        strategy_code: Any = None,
        strategy_data: Any = None,
        *,
        allowed_deserializer_types: Iterable[Any] | None = None,
    ) -> None:
        data = DEFAULT_STRATEGY_DATA if strategy_data is None else strategy_data
        self.data_serializer: SerializationStrategy = validate_strategylike(
            data, for_code=False
        ).instance
        if strategy_code is None:
            json_data = self.data_serializer.tether_id == 'json'
            strategy_code = DillCodeSource() if json_data else DEFAULT_STRATEGY_CODE
        self.code_serializer: SerializationStrategy = validate_strategylike(
            strategy_code, for_code=True
        ).instance
        self.allowed_deserializer_types = parse_allowlist(allowed_deserializer_types)

    def __repr__(self) -> str:
        return f'ComputeSerializer({self.code_serializer!r}, {self.data_serializer!r})'

    @property
    def strategy_code(self) -> SerializationStrategy:
        """The code strategy (also :attr:`code_serializer`)."""
        return self.code_serializer

    @property
    def strategy_data(self) -> SerializationStrategy:
        """The data strategy (also :attr:`data_serializer`)."""
        return self.data_serializer

    @property
    def function_serializer_id(self) -> str:
        """tether's id of the code strategy (what tasks travel with)."""
        return self.code_serializer.tether_id

    @property
    def data_serializer_id(self) -> str:
        """tether's id of the data strategy (what tasks travel with)."""
        return self.data_serializer.tether_id

    def serialize(self, data: Any) -> bytes:
        """Functions with the code strategy, anything else with the data strategy."""
        code = callable(data)
        strategy = self.code_serializer if code else self.data_serializer
        try:
            return strategy.serialize(data)
        except Exception as e:
            kind = 'code' if code else 'data'
            raise SerializationError(
                f'{kind} serialization strategy {type(strategy).__name__} failed: {e}'
            ) from e

    def deserialize(self, payload: bytes | str) -> Any:
        """The object of a payload any :class:`ComputeSerializer` made.

        Raises:
            SerializerNotAllowedError: the payload's strategy is not allowed here (checked
                before the payload is read).
            SerializationError: the payload names no strategy tether knows, or is damaged.
        """
        strategy, raw = split_payload(payload)
        self.assert_deserializer_allowed(strategy)
        return strategy.load(raw)

    def assert_deserializer_allowed(self, strategy: SerializationStrategy) -> None:
        """Raise :class:`~tether.exceptions.SerializerNotAllowedError` unless allowed."""
        allowed = self.allowed_deserializer_types
        if not allowed or type(strategy) in allowed:
            return
        kind = 'Code' if strategy.for_code else 'Data'
        names = ', '.join(sorted(c.__name__ for c in allowed if c.for_code == strategy.for_code))
        raise SerializerNotAllowedError(
            f"{kind} serializer {type(strategy).__name__} disabled by this serializer's "
            f'allowed_deserializer_types: send the payload with one of {names}'
        )

    @staticmethod
    def serialize_from_list(data: Any, strategies: Iterable[Any]) -> bytes:
        """``data`` with the first strategy-like of ``strategies`` that serializes it
        (the defaults for an empty list).

        Raises:
            SerializationError: every strategy failed; its ``__cause__`` is an
                :class:`ExceptionGroup` of each one's error, in order.
        """
        chosen = list(strategies) or [DEFAULT_STRATEGY_DATA, DEFAULT_STRATEGY_CODE]
        errors: list[Exception] = []
        for strategy in chosen:
            try:
                validated = validate_strategylike(strategy, for_code=callable(data))
                return validated.instance.serialize(data)
            except Exception as e:
                errors.append(e)
        group = ExceptionGroup('each strategy failed', errors)
        raise SerializationError(
            f'no strategy of {len(chosen)} serialized {type(data).__name__} data '
            "(their errors are this error's __cause__)"
        ) from group

    def check_strategies(
        self, function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
        """Round-trip a call through this serializer's strategies, as a task would travel;
        call the results to check the function still does its job."""
        packed = [self.serialize(function), self.serialize(args), self.serialize(kwargs)]
        fn, new_args, new_kwargs = (self.deserialize(p) for p in packed)
        return fn, tuple(new_args), dict(new_kwargs)
