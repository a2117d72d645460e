"""The configuration of a benchmark run: ``[app]``, ``[engine]``, ``[logging]``, ``[run]``.

:meth:`BenchmarkConfig.from_dict` picks the plugin classes by their ``name`` keys and
validates each section with them; :func:`merge` combines TOML files (later files win,
key by key) and command-line values on top. The merged configuration is written to the
run directory as ``config.toml``, with secrets (passwords, tokens, secrets) replaced.
"""

from __future__ import annotations

import copy
import datetime
import os
import pathlib
import tomllib
from collections.abc import Iterable
from typing import Any

import pydantic

from tether.bench.apps import AppConfig
from tether.bench.engine.config import EngineConfig
from tether.bench.registry import Kind, get_plugin
from tether.exceptions import ConfigError

__all__ = [
    'BenchmarkConfig',
    'Config',
    'DEFAULT_EXECUTOR',
    'EngineConfig',
    'LoggingConfig',
    'RunConfig',
    'load_toml',
    'make_run_dir',
    'merge',
    'redact',
    'set_dotted',
]

DEFAULT_EXECUTOR = 'process-pool'
_SECRET_WORDS = ('password', 'secret', 'token', 'credential')


class LoggingConfig(pydantic.BaseModel):
    """``[logging]``: levels of the console and of the run's log file."""

    model_config = pydantic.ConfigDict(extra='forbid')

    level: str = pydantic.Field(default='INFO', description='console level')
    file_level: str = pydantic.Field(default='INFO', description='log file level')
    file_name: str = pydantic.Field(default='log.txt', description='log file in the run directory')


class RunConfig(pydantic.BaseModel):
    """``[run]``: where the run directory goes."""

    model_config = pydantic.ConfigDict(extra='forbid')

    dir_format: str = pydantic.Field(
        default='runs/{name}_{executor}_{timestamp}',
        description='run directory: {name} {executor} {transformer} {filter} {timestamp}',
    )


def _validate(cls: type[pydantic.BaseModel], data: dict[str, Any], where: str) -> Any:
    try:
        return cls.model_validate(data)
    except pydantic.ValidationError as e:
        problems = '; '.join(
            f'{where}.{".".join(str(p) for p in err["loc"])}: {err["msg"]}' for err in e.errors()
        )
        raise ConfigError(f'invalid configuration: {problems}') from e


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f'[{key}] must be a table, got {value!r}')
    return dict(value)


class BenchmarkConfig(pydantic.BaseModel):
    """A whole run: the app, the engine, logging and the run directory."""

    model_config = pydantic.ConfigDict(extra='forbid')

    app: pydantic.SerializeAsAny[AppConfig]
    engine: EngineConfig = pydantic.Field(default_factory=EngineConfig)
    logging: LoggingConfig = LoggingConfig()
    run: RunConfig = RunConfig()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkConfig:
        """Validate a (merged) configuration, choosing plugin classes by their names.

        Raises:
            ConfigError: if a section is invalid or names no plugin.
        """
        unknown = set(data) - {'app', 'engine', 'logging', 'run', 'version'}
        if unknown:
            raise ConfigError(f'unknown configuration sections: {", ".join(sorted(unknown))}')
        app = _section(data, 'app')
        if 'name' not in app:
            raise ConfigError('no application: pass --app NAME or set name in [app]')
        app_config = _validate(get_plugin('app', app['name']), app, 'app')
        engine = _section(data, 'engine')
        executor = dict(engine.pop('executor', None) or {})
        executor.setdefault('name', DEFAULT_EXECUTOR)
        parts: dict[str, Any] = {
            'executor': _validate(
                get_plugin('executor', executor['name']), executor, 'engine.executor'
            ),
        }
        kind: Kind
        for kind in ('transformer', 'filter'):
            section = engine.pop(kind, None)
            if section:
                if 'name' not in section:
                    raise ConfigError(f'[engine.{kind}] needs a name')
                parts[kind] = _validate(
                    get_plugin(kind, section['name']),
                    dict(section),
                    f'engine.{kind}',
                )
        engine_config = _validate(EngineConfig, {**engine, **parts}, 'engine')
        return cls(
            app=app_config,
            engine=engine_config,
            logging=_validate(LoggingConfig, _section(data, 'logging'), 'logging'),
            run=_validate(RunConfig, _section(data, 'run'), 'run'),
        )

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> BenchmarkConfig:
        """Read and validate one TOML configuration file (see :meth:`from_dict`)."""
        return cls.from_dict(load_toml(path))

    def to_dict(self) -> dict[str, Any]:
        """Return the configuration as plain data (enums as values, ``None`` left out)."""
        return self.model_dump(mode='json', exclude_none=True)

    def write_toml(self, path: str | os.PathLike[str]) -> None:
        """Write the configuration (secrets redacted) as TOML."""
        import tomli_w

        with open(path, 'wb') as f:
            tomli_w.dump(redact(self.to_dict()), f)


def redact(data: Any) -> Any:
    """Return ``data`` with the values of secret-looking keys replaced by ``'<redacted>'``."""
    if isinstance(data, dict):
        return {
            k: '<redacted>'
            if any(w in str(k).lower() for w in _SECRET_WORDS) and v not in (None, '')
            else redact(v)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [redact(v) for v in data]
    return data


def load_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one TOML configuration file.

    Raises:
        ConfigError: if it cannot be read or parsed.
    """
    try:
        with open(path, 'rb') as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f'cannot read configuration {os.fspath(path)!r}: {e}') from e


def _merge_into(base: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            if 'name' in value and value['name'] != base[key].get('name'):
                # Another plugin: the earlier plugin's options do not apply to it.
                base[key] = copy.deepcopy(value)
            else:
                _merge_into(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def merge(configs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Merge configurations key by key, later ones winning.

    A table whose ``name`` differs from the earlier table's (another app or plugin)
    replaces it instead of merging with it.
    """
    merged: dict[str, Any] = {}
    for config in configs:
        _merge_into(merged, config)
    return merged


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """Return ``{'a': {'b': value}}`` for ``'a.b'`` merged onto a copy of ``data``."""
    parts = dotted.split('.')
    update: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        update = {part: update}
    return merge([data, update])


Config = BenchmarkConfig
"""TaPS's name for :class:`BenchmarkConfig` (``taps.run.config.Config``)."""


def make_run_dir(
    config: BenchmarkConfig, base: str | os.PathLike[str] | None = None
) -> pathlib.Path:
    """Create the run directory named by ``[run] dir_format`` (made unique if it exists)."""
    engine = config.engine
    fields = {
        'name': config.app.name,
        'executor': engine.executor.name,
        'transformer': engine.transformer.name if engine.transformer else 'none',
        'filter': engine.filter.name if engine.filter else 'none',
        'timestamp': datetime.datetime.now().strftime('%Y-%m-%d-%H-%M-%S'),
    }
    try:
        relative = config.run.dir_format.format(**fields)
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(
            f'bad [run] dir_format {config.run.dir_format!r}: {e!r}; fields: {", ".join(fields)}',
        ) from e
    path = pathlib.Path(base or os.getcwd()) / relative
    candidate, n = path, 0
    while True:
        try:
            candidate.mkdir(parents=True)
            return candidate.resolve()
        except FileExistsError:
            n += 1
            candidate = path.with_name(f'{path.name}-{n}')
