"""The Executor's Globus Compute options: serializer, resource specification, user
endpoint configuration, and the functions registered through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from tether.faas._functions_env import check_environment_name
from tether.faas._serde import ComputeSerializer
from tether.faas._strategies import DillCodeSource, JSONData

if TYPE_CHECKING:
    from tether.faas._client import Client

__all__ = ['ComputeOptions', 'ExecutorOptions', 'check_dict', 'check_keywords']


def check_dict(value: Any, what: str) -> dict[str, Any] | None:
    """``value`` if it is a dict with string keys, or None; else ``TypeError``."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f'{what} must be a dict with string keys, or None, not {value!r}')
    return value


def check_keywords(cls: type, kwargs: dict[str, Any]) -> None:
    """``TypeError`` naming a keyword ``cls()`` does not take, and those it takes."""
    import inspect

    params = inspect.signature(getattr(cls, '__init__')).parameters  # noqa: B009 (mypy)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return  # a subclass taking any keyword checks its own
    known = [n for n, p in params.items() if p.kind is p.KEYWORD_ONLY or n == 'endpoint_id']
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise TypeError(
            f'{cls.__name__}() got an invalid argument {unknown[0]!r} '
            f'(it takes {", ".join(known)})'
        )


class ExecutorOptions:
    """What an Executor's options say (kept apart from its task machinery)."""

    def __init__(self, client: Client, serializer: Any) -> None:
        self.client = client
        self.resource_specification: dict[str, Any] | None = None
        self.user_endpoint_config: dict[str, Any] | None = None
        self.environment: str | None = None  # what functions registered here ask for
        self._functions: dict[Any, str] = {}
        self.set_serializer(serializer)

    def set_serializer(self, value: Any) -> None:
        if value is None:
            data = self.client.data_serializer
            code = DillCodeSource() if self.client.function_serializer == 'source' else None
            value = ComputeSerializer(code, JSONData() if data == 'json' else None)
        if not isinstance(value, ComputeSerializer):
            raise TypeError(f'serializer must be a tether.faas.ComputeSerializer, not {value!r}')
        self.serializer = value

    @property
    def data_serializer(self) -> str:
        return self.serializer.data_serializer_id

    def _key(self, fn: Callable[..., Any]) -> Any:
        try:
            hash(fn)
        except TypeError:  # an unhashable callable
            return ('id', id(fn))
        return fn

    def register(self, fn: Callable[..., Any], function_id: str | None = None) -> str:
        """Register ``fn`` (or take ``function_id`` as its id); return the id."""
        key = self._key(fn)
        if key in self._functions:
            raise ValueError(
                f'{getattr(fn, "__name__", fn)!r} is registered with this executor already '
                f'(function id {self._functions[key]})'
            )
        if function_id is None:
            method = self.serializer.function_serializer_id
            if method == self.client.function_serializer:
                # The client's cache: a function it registered already is not registered
                # again (that would need the service, which may be down for a while).
                function_id = self.client.function_id_for(fn, self.environment)
            else:
                function_id = self.client.register_function(
                    fn, function_serializer=method, environment=self.environment
                )
        self._functions[key] = str(function_id)
        return str(function_id)

    def forget_functions(self) -> None:
        """Register functions again on their next use (their environment changed)."""
        self._functions.clear()

    def function_id(self, fn: Callable[..., Any]) -> str:
        """The id of ``fn``, registering it on first use."""
        found = self._functions.get(self._key(fn))
        return found if found is not None else self.register(fn)


class _DictOption:
    """An attribute of :class:`ComputeOptions` that is the :class:`ExecutorOptions`
    attribute of the same name: a dict with string keys, or None (checked when set)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _DictOption: ...
    @overload
    def __get__(self, obj: ComputeOptions, owner: type) -> dict[str, Any] | None: ...
    def __get__(self, obj: ComputeOptions | None, owner: type) -> Any:
        return self if obj is None else getattr(obj._options, self.name)

    def __set__(self, obj: ComputeOptions, value: dict[str, Any] | None) -> None:
        setattr(obj._options, self.name, check_dict(value, self.name))


class ComputeOptions:
    """The option properties of :class:`~tether.faas.Executor` (Globus Compute's)."""

    _options: ExecutorOptions

    resource_specification = _DictOption()
    user_endpoint_config = _DictOption()

    @property
    def environment(self) -> str | None:
        """The Python environment on the endpoint that functions registered from now on
        ask for (settable; ``None``: the endpoint's own): see ``docs/faas.md``."""
        return self._options.environment

    @environment.setter
    def environment(self, value: str | None) -> None:
        value = check_environment_name(value)
        if value != self._options.environment:
            self._options.environment = value
            self._options.forget_functions()

    @property
    def serializer(self) -> Any:
        """The :class:`~tether.faas.ComputeSerializer` of this executor's tasks."""
        return self._options.serializer

    @serializer.setter
    def serializer(self, value: Any) -> None:
        self._options.set_serializer(value)

    def register_function(self, fn: Callable[..., Any], function_id: str | None = None) -> str:
        """Register ``fn`` now (``submit`` does it on first use); return its id. With
        ``function_id``, ``submit(fn)`` runs that registered function instead."""
        return self._options.register(fn, function_id)
