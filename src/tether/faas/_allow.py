"""Which serializers a reader accepts: strategy-likes, allowlists and the endpoint check.

A payload names the serializer that made it; a reader with an allowlist refuses every
other one before reading a byte of the payload (:class:`~tether.exceptions.
SerializerNotAllowedError`). Names are looked up among tether's own strategies
(:mod:`tether.faas._strategies`): nothing a payload or a configuration names is imported.

A strategy-like is a strategy instance, its class, its name (``'DillCode'``) or an import
path to it under ``tether.faas`` (``'tether.faas.DillCode'``) or, so that Globus Compute
configurations keep working, under ``globus_compute_sdk.serialize``. Allowlists also take
the wildcards of :class:`AllowlistWildcard`, and an endpoint's ``allowed_serializers``
takes tether's serializer ids too (``'pickle'``, ``'source'``, ``'tether'``, ``'json'``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tether.exceptions import SerializerNotAllowedError, UnknownStrategyError
from tether.faas._payload import DATA_SERIALIZERS, FUNCTION_SERIALIZERS
from tether.faas._strategies import (
    KNOWN_STRATEGIES,
    SELECTABLE_STRATEGIES,
    ComboSerializationStrategy,
    SerializationStrategy,
)

__all__ = [
    'AllowlistWildcard',
    'ValidatedStrategylike',
    'allowed_ids',
    'check_serializers',
    'check_task',
    'parse_allowlist',
    'validate_strategylike',
]

_PATH_ROOTS = ('tether.faas', 'globus_compute_sdk.serialize')


class AllowlistWildcard(enum.StrEnum):
    """Every code strategy (``CODE``) or every data strategy (``DATA``)."""

    CODE = 'tether.faas.*Code'
    DATA = 'tether.faas.*Data'


_WILDCARDS = {
    'tether.faas.*Code': AllowlistWildcard.CODE,
    'tether.faas.*Data': AllowlistWildcard.DATA,
    'globus_compute_sdk.*Code': AllowlistWildcard.CODE,
    'globus_compute_sdk.*Data': AllowlistWildcard.DATA,
}


@dataclass(frozen=True)
class ValidatedStrategylike:
    """A strategy-like checked: its class, an instance and tether's import path to it."""

    type_: type[SerializationStrategy]
    instance: SerializationStrategy
    import_path: str


def _invalid(value: Any) -> UnknownStrategyError:
    return UnknownStrategyError(
        'Invalid strategy-like: expected an import path to, a subclass of, or an instance '
        f'of a tether.faas SerializationStrategy, got {value!r} '
        f'(known: {", ".join(sorted(KNOWN_STRATEGIES))})'
    )


def _class_of_path(value: str) -> type[SerializationStrategy]:
    root, _, name = value.rpartition('.')
    if root and not any(root == r or root.startswith(r + '.') for r in _PATH_ROOTS):
        raise _invalid(value)
    cls = KNOWN_STRATEGIES.get(name)
    if cls is None:
        raise _invalid(value)
    return cls


def validate_strategylike(value: Any, *, for_code: bool | None = None) -> ValidatedStrategylike:
    """Check a strategy-like (see the module docstring); ``for_code`` asks for its kind.

    Raises:
        UnknownStrategyError: ``value`` is no strategy tether knows, or of the wrong kind.
    """
    if isinstance(value, str):
        cls = _class_of_path(value)
    elif isinstance(value, type) and issubclass(value, SerializationStrategy):
        cls = value
    elif isinstance(value, SerializationStrategy):
        cls = type(value)
    else:
        raise _invalid(value)
    if KNOWN_STRATEGIES.get(cls.__name__) is not cls:
        raise UnknownStrategyError(
            f'{cls.__name__} is not a known serialization strategy: tether.faas reads only '
            f'its own ({", ".join(sorted(KNOWN_STRATEGIES))})'
        )
    if for_code is not None and cls.for_code != for_code:
        have, want = ('code', 'data') if cls.for_code else ('data', 'code')
        raise UnknownStrategyError(
            f'{cls.__name__} is a {have} serialization strategy, expected a {want} strategy'
        )
    instance = value if isinstance(value, SerializationStrategy) else cls()
    return ValidatedStrategylike(cls, instance, f'tether.faas.{cls.__name__}')


def _wildcard(value: Any) -> AllowlistWildcard | None:
    if isinstance(value, AllowlistWildcard):
        return value
    if isinstance(value, str):
        return _WILDCARDS.get(value)
    return None


def parse_allowlist(entries: Iterable[Any] | None) -> frozenset[type[SerializationStrategy]]:
    """The strategy classes an allowlist names (empty for ``None``: no restriction).

    Raises:
        UnknownStrategyError: an entry is no strategy tether knows, a wildcard is mixed
            with strategies of its kind, or the list lacks a code or a data strategy.
    """
    if entries is None:
        return frozenset()
    given = list(entries)
    chosen: set[type[SerializationStrategy]] = set()
    wildcards: list[AllowlistWildcard] = []
    for entry in given:
        wildcard = _wildcard(entry)
        if wildcard is None:
            chosen.add(validate_strategylike(entry).type_)
        else:
            wildcards.append(wildcard)
    for wildcard in wildcards:
        for_code = wildcard is AllowlistWildcard.CODE
        if any(cls.for_code == for_code for cls in chosen):
            raise UnknownStrategyError(
                f"Cannot mix '{wildcard}' with specific deserializers of its kind "
                f'(got {given!r}): use the wildcard or list the strategies'
            )
    for wildcard in wildcards:
        for_code = wildcard is AllowlistWildcard.CODE
        chosen.update(cls for cls in SELECTABLE_STRATEGIES if cls.for_code == for_code)
    if {cls.for_code for cls in chosen} != {True, False}:
        raise UnknownStrategyError(
            'an allowlist needs at least one code and one data strategy (or wildcard), '
            f'got {given!r}'
        )
    return frozenset(chosen)


def _ids_of(cls: type[SerializationStrategy]) -> set[str]:
    if issubclass(cls, ComboSerializationStrategy):
        return {sub.tether_id for sub in cls.strategies}
    return {cls.tether_id}


def allowed_ids(entries: Iterable[Any] | None) -> frozenset[str] | None:
    """tether serializer ids an endpoint's ``allowed_serializers`` lets in (``None``: all).

    Entries are strategy-likes, wildcards or tether's ids; the source strategies are one
    serializer (``'source'``), so allowing one of them allows them all.
    """
    if entries is None:
        return None
    ids: set[str] = set()
    rest = []
    for entry in entries:
        if entry in FUNCTION_SERIALIZERS or entry in DATA_SERIALIZERS:
            ids.add(entry)
        else:
            rest.append(entry)
    if rest:
        for wildcard in filter(None, map(_wildcard, rest)):
            for_code = wildcard is AllowlistWildcard.CODE
            ids.update(FUNCTION_SERIALIZERS if for_code else DATA_SERIALIZERS)
        for entry in rest:
            if _wildcard(entry) is None:
                ids.update(_ids_of(validate_strategylike(entry).type_))
    if not ids & set(FUNCTION_SERIALIZERS) or not ids & set(DATA_SERIALIZERS):
        raise UnknownStrategyError(
            'allowed_serializers needs at least one code and one data serializer '
            f'(got {list(entries)!r})'
        )
    return frozenset(ids)


def check_serializers(
    allowed: Iterable[Any] | None, function_serializer: str, data_serializer: str
) -> None:
    """Refuse a task whose function or data serializer ``allowed`` does not list.

    Raises:
        SerializerNotAllowedError: naming the serializer and what is allowed.
    """
    ids = allowed_ids(allowed)
    if ids is None:
        return
    for what, used in (('function was', function_serializer), ('arguments were', data_serializer)):
        if used not in ids:
            raise SerializerNotAllowedError(
                f"the task's {what} serialized with {used!r}, which this endpoint's "
                f'allowed_serializers does not list (allowed: {", ".join(sorted(ids))}): '
                'send it with an allowed strategy (Executor(serializer=ComputeSerializer(...)))'
            )


def check_task(config: Any, function_serializer: str, data_serializer: str) -> None:
    """An endpoint's check of one task against its config's ``allowed_serializers``."""
    allowed = getattr(config, 'allowed_serializers', None)
    check_serializers(allowed, function_serializer, data_serializer)
