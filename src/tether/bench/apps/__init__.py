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
Built in: ``cholesky``, ``failures``, ``fedlearn``, ``mapreduce``, ``moldesign``,
``physics``, ``synthetic`` (see ``docs/bench.md`` for ``docking`` and ``montage``).
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Protocol, runtime_checkable

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

    name: str

    def get_app(self) -> App:
        """Build the application."""
        raise NotImplementedError
