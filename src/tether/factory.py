"""Plain factories for :class:`~tether.proxy.Proxy`.

A proxy's factory is any zero-argument callable. These classes name the two common
cases, and pickle (so the proxies made from them do too) when what they hold pickles::

    p = Proxy(SimpleFactory([1, 2, 3]))         # the factory holds the object itself
    q = Proxy(LambdaFactory(range, 10))         # the factory calls range(10)

Store proxies use :class:`tether.store.factory.StoreFactory` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ['Factory', 'LambdaFactory', 'SimpleFactory']

T = TypeVar('T')


class Factory(Generic[T]):
    """Base of the factories here: calling one returns :meth:`resolve`'s result."""

    __slots__ = ()

    def __call__(self) -> T:
        return self.resolve()

    def resolve(self) -> T:
        """Return the target object (subclasses override this)."""
        raise NotImplementedError(f'{type(self).__name__} does not implement resolve()')


class SimpleFactory(Factory[T]):
    """A factory that holds its object and returns it.

    Args:
        obj: The object the factory returns.
    """

    __slots__ = ('_obj',)

    def __init__(self, obj: T) -> None:
        self._obj = obj

    def __repr__(self) -> str:
        return f'SimpleFactory({type(self._obj).__qualname__})'

    def __reduce__(self) -> tuple[Any, ...]:
        # Every pickle protocol, 0 and 1 included (slotted classes need this below 2).
        return (type(self), (self._obj,), getattr(self, '__dict__', None))

    def resolve(self) -> T:
        """Return the object."""
        return self._obj


class LambdaFactory(Factory[T]):
    """A factory that calls ``target(*args, **kwargs)`` each time it is called.

    Args:
        target: The callable (a module-level function, to pickle the factory).
        args: Positional arguments for ``target``.
        kwargs: Keyword arguments for ``target``.

    Raises:
        TypeError: if ``target`` is not callable.
    """

    __slots__ = ('_args', '_kwargs', '_target')

    def __init__(self, target: Callable[..., T], *args: Any, **kwargs: Any) -> None:
        if not callable(target):
            raise TypeError(f'LambdaFactory target must be callable, got {type(target).__name__}')
        self._target = target
        self._args = args
        self._kwargs = kwargs

    def __repr__(self) -> str:
        return f'LambdaFactory({self._target!r})'

    def __reduce__(self) -> tuple[Any, ...]:
        args = (type(self), self._target, self._args, self._kwargs)
        return (_rebuild_lambda, args, getattr(self, '__dict__', None))

    def resolve(self) -> T:
        """Call the target with the arguments given at construction and return its result."""
        return self._target(*self._args, **self._kwargs)


def _rebuild_lambda(
    cls: type[LambdaFactory[Any]],
    target: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> LambdaFactory[Any]:
    return cls(target, *args, **kwargs)
