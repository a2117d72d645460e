"""Benchmark applications: an :class:`AppConfig` (registered) and the :class:`App` it builds.

An application is two classes (the seed's figure 2.3)::

    @register('app')
    class FooAppConfig(AppConfig):
        name: str = 'foo'
        count: int = Field(1, description='...')

        def get_app(self) -> FooApp:
            return FooApp(count=self.count)

    class FooApp:
        def run(self, engine: Engine, run_dir: Path) -> None: ...
        def close(self) -> None: ...

``App.run`` may contain any code, provided its tasks go through the engine. The fields
of the config become command-line options (``--app.count``) and TOML keys (``[app]``).
Built in: ``cholesky``, ``docking``, ``failures``, ``fedlearn``, ``mapreduce``,
``moldesign``, ``montage``, ``physics``, ``synthetic`` (see ``docs/bench.md``).
"""

from __future__ import annotations

import pathlib
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import pydantic

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = ['App', 'AppConfig']


@runtime_checkable
class App(Protocol):
    """A benchmark application."""

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the app, submitting its tasks to ``engine``; write outputs to ``run_dir``."""
        ...

    def close(self) -> None:
        """Release what the application holds."""
        ...


class AppConfig(pydantic.BaseModel):
    """Base of application configs (``[app]`` in a run config)."""

    model_config = pydantic.ConfigDict(extra='forbid', validate_default=True)

    @pydantic.model_validator(mode='after')
    def _absolute_paths(self) -> Self:
        # Path fields are made absolute when the config is made, as in TaPS: the app
        # runs with the run directory as its working directory.
        for field in type(self).model_fields:
            value = getattr(self, field)
            if isinstance(value, pathlib.Path) and not value.is_absolute():
                self.__dict__[field] = value.absolute()
        return self

    @pydantic.model_serializer(mode='wrap')
    def _paths_as_strings(self, handler: pydantic.SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            return {k: str(v) if isinstance(v, pathlib.PurePath) else v for k, v in data.items()}
        return data

    name: str

    def get_app(self) -> App:
        """Build the application."""
        raise NotImplementedError

    def _app_arguments(self, *, exclude: Collection[str] = ()) -> dict[str, Any]:
        """The fields but ``name`` and ``exclude``, as keyword arguments of the app."""
        return {
            field: getattr(self, field)
            for field in type(self).model_fields
            if field != 'name' and field not in exclude
        }
