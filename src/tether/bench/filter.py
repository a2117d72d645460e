"""Filters: which task arguments and results a data transformer transforms.

A filter is any ``Callable[[object], bool]``; ``True`` means transform. Built in:
:class:`AllFilter`, :class:`NeverFilter`, :class:`ObjectSizeFilter` (``sys.getsizeof``),
:class:`PickleSizeFilter` (the length of the pickled object) and
:class:`ObjectTypeFilter` (by the qualified name of the type or any of its bases, so a
config names types without importing anything). Each has a registered config.
"""

from __future__ import annotations

import pickle
import re
import sys
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import pydantic

from tether.bench.registry import register
from tether.store.executor import ProxyAlways, ProxyNever

__all__ = [
    'AllFilter',
    'AllFilterConfig',
    'Filter',
    'FilterConfig',
    'NeverFilter',
    'NeverFilterConfig',
    'ObjectSizeFilter',
    'ObjectSizeFilterConfig',
    'ObjectTypeFilter',
    'ObjectTypeFilterConfig',
    'PickleSizeFilter',
    'PickleSizeFilterConfig',
]


@runtime_checkable
class Filter(Protocol):
    """Decides whether to transform an object."""

    def __call__(self, obj: Any) -> bool:
        """Return ``True`` to transform ``obj``."""
        ...


class AllFilter(ProxyAlways):
    """Transform every object."""


class NeverFilter(ProxyNever):
    """Transform nothing."""


class _SizeFilter:
    """Sizes in bytes: ``min_size``/``max_size``, or TaPS's ``min_bytes``/``max_bytes``."""

    def __init__(
        self,
        min_size: int = 0,
        max_size: float = float('inf'),
        *,
        min_bytes: int | None = None,
        max_bytes: float | None = None,
    ) -> None:
        min_size = min_size if min_bytes is None else min_bytes
        max_size = max_size if max_bytes is None else max_bytes
        if min_size < 0 or max_size < min_size:
            raise ValueError(f'need 0 <= min_size <= max_size, got {min_size}, {max_size}')
        self.min_size = min_size
        self.max_size = max_size

    @property
    def min_bytes(self) -> int:
        """TaPS's name for ``min_size``."""
        return self.min_size

    @property
    def max_bytes(self) -> float:
        """TaPS's name for ``max_size``."""
        return self.max_size

    def __repr__(self) -> str:
        return f'{type(self).__name__}(min_bytes={self.min_size}, max_bytes={self.max_size})'

    def _in_range(self, size: int) -> bool:
        return self.min_size <= size <= self.max_size


class ObjectSizeFilter(_SizeFilter):
    """Transform objects whose ``sys.getsizeof`` is within ``[min_size, max_size]`` bytes."""

    def __call__(self, obj: Any) -> bool:
        return self._in_range(sys.getsizeof(obj))


class PickleSizeFilter(_SizeFilter):
    """Transform objects whose pickle is within ``[min_size, max_size]`` bytes.

    Pickles the object to measure it (so it costs one extra pickle per argument).
    """

    def __call__(self, obj: Any) -> bool:
        try:
            size = len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:
            return False
        return self._in_range(size)


class ObjectTypeFilter:
    """Transform objects of the given types (or subclasses), or whose type name matches.

    Args:
        types: Classes (``isinstance``), or qualified type names, ``'numpy.ndarray'``,
            ``'builtins.bytes'``; a name without a dot matches a type of that name in
            any module (and its subclasses).
        patterns: Regular expressions searched (``re.search``) in the name of the
            object's type, as TaPS's filter does: ``'Foo'`` matches ``Foo`` and
            ``Foobar``, ``'Foo$'`` only ``Foo``.

    Raises:
        TypeError: an item of ``types`` is neither a class nor a string.
    """

    def __init__(self, *types: type | str, patterns: Sequence[str] | None = None) -> None:
        bad = [t for t in types if not isinstance(t, (type, str))]
        if bad:
            raise TypeError(f'ObjectTypeFilter takes classes or type names, not {bad!r}')
        self.classes = tuple(t for t in types if isinstance(t, type))
        self.types = frozenset(t for t in types if isinstance(t, str))
        self.patterns = tuple(patterns or ())
        self._compiled = tuple(re.compile(p) for p in self.patterns)

    def __repr__(self) -> str:
        names = [c.__qualname__ for c in self.classes] + sorted(self.types)
        return f'ObjectTypeFilter(types={names}, patterns={list(self.patterns)})'

    def __call__(self, obj: Any) -> bool:
        if self.classes and isinstance(obj, self.classes):
            return True
        if self.types:
            for cls in type(obj).__mro__:
                if cls.__qualname__ in self.types or (
                    f'{cls.__module__}.{cls.__qualname__}' in self.types
                ):
                    return True
        name = type(obj).__name__
        return any(p.search(name) for p in self._compiled)


class FilterConfig(pydantic.BaseModel):
    """Base of filter configs (``[engine.filter]`` in a run config)."""

    model_config = pydantic.ConfigDict(extra='forbid')

    name: str

    def get_filter(self) -> Filter:
        """Build the filter."""
        raise NotImplementedError


@register('filter')
class AllFilterConfig(FilterConfig):
    """Transform every argument and result."""

    name: str = 'all'

    def get_filter(self) -> Filter:
        """Build an :class:`AllFilter`."""
        return AllFilter()


@register('filter')
class NeverFilterConfig(FilterConfig):
    """Transform nothing (the transformer is configured but idle: its baseline)."""

    name: str = 'never'

    def get_filter(self) -> Filter:
        """Build a :class:`NeverFilter`."""
        return NeverFilter()


class _SizeConfig(FilterConfig):
    min_size: int = pydantic.Field(
        default=0, ge=0, description='smallest size transformed (bytes)'
    )
    max_size: float = pydantic.Field(
        default=float('inf'),
        ge=0,
        description='largest size transformed (bytes)',
    )


@register('filter')
class ObjectSizeFilterConfig(_SizeConfig):
    """Transform objects by ``sys.getsizeof``."""

    name: str = 'object-size'

    def get_filter(self) -> Filter:
        """Build an :class:`ObjectSizeFilter`."""
        return ObjectSizeFilter(self.min_size, self.max_size)


@register('filter')
class PickleSizeFilterConfig(_SizeConfig):
    """Transform objects by the size of their pickle."""

    name: str = 'pickle-size'

    def get_filter(self) -> Filter:
        """Build a :class:`PickleSizeFilter`."""
        return PickleSizeFilter(self.min_size, self.max_size)


@register('filter')
class ObjectTypeFilterConfig(FilterConfig):
    """Transform objects of the named types."""

    name: str = 'object-type'
    types: list[str] = pydantic.Field(
        default_factory=list,
        description="qualified type names, e.g. 'numpy.ndarray' (JSON list on the CLI)",
    )
    patterns: list[str] | None = pydantic.Field(
        default=None,
        description='regular expressions searched in the type name (TaPS)',
    )

    def get_filter(self) -> Filter:
        """Build an :class:`ObjectTypeFilter`."""
        return ObjectTypeFilter(*self.types, patterns=self.patterns)
