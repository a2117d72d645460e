"""The ``tether bench run`` argument parser: two stages, options from the chosen plugins.

Stage one reads the config files and the plugin names (``--app``, ``--executor``,
``--transformer``, ``--filter``); stage two builds a parser whose groups are the fields
of exactly those plugins' configs (``--app.matrix_size``, ``--engine.executor.max_processes``,
``--engine.transformer.connector.kind`` ...), so ``--help`` shows only them.
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Sequence
from typing import Any

import pydantic

from tether.bench.registry import Kind, get_plugin, import_plugin_module, plugin_names
from tether.bench.run.config import (
    DEFAULT_EXECUTOR,
    LoggingConfig,
    RunConfig,
    load_toml,
    merge,
    set_dotted,
)
from tether.exceptions import ConfigError

__all__ = ['ParsedRun', 'parse_run_args']

_PROG = 'tether bench run'


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> typing.NoReturn:
        raise ConfigError(f'{self.prog}: {message} (see --help)')


class ParsedRun(typing.NamedTuple):
    """The outcome of parsing: the merged configuration, or the help text to print."""

    config: dict[str, Any]
    help: str | None
    progress: bool | None
    json_output: bool


def _stage_one() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=_PROG,
        add_help=False,
        description=(
            'Run a benchmark application. Options come from the config files (merged in '
            'order), then from this command line.'
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument('-h', '--help', action='store_true', help='show this help and exit')
    parser.add_argument(
        '-c',
        '--config',
        nargs='+',
        action='extend',
        default=[],
        metavar='TOML',
        help='configuration files, merged in order (later files win)',
    )
    parser.add_argument('--app', help=f'application: {", ".join(plugin_names("app"))}')
    parser.add_argument(
        '--executor',
        help=f'executor: {", ".join(plugin_names("executor"))} (default {DEFAULT_EXECUTOR})',
    )
    parser.add_argument(
        '--transformer',
        help=f'data transformer: {", ".join(plugin_names("transformer"))} (default none)',
    )
    parser.add_argument(
        '--filter',
        help=f'filter of the transformer: {", ".join(plugin_names("filter"))} (default all)',
    )
    parser.add_argument(
        '--import',
        dest='imports',
        action='append',
        default=[],
        metavar='MODULE',
        help='import a module that registers more plugins (repeatable)',
    )
    parser.add_argument(
        '--progress',
        action=argparse.BooleanOptionalAction,
        default=None,
        help='live progress display (default: when standard error is a terminal)',
    )
    parser.add_argument('--json', action='store_true', help='print the run summary as JSON')
    return parser


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        if len(members) == 1:
            return members[0], optional
        return annotation, optional
    return annotation, False


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _is_structured(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return origin in (list, dict, tuple, set, frozenset)


def _leaves(
    model: type[pydantic.BaseModel],
    prefix: str,
) -> list[tuple[str, pydantic.fields.FieldInfo, Any]]:
    out = []
    for name, field in model.model_fields.items():
        if name == 'name':
            continue
        annotation, _ = _strip_optional(field.annotation)
        if _is_model(annotation):
            out.extend(_leaves(annotation, f'{prefix}.{name}'))
        else:
            out.append((f'{prefix}.{name}', field, annotation))
    return out


def _help_of(field: pydantic.fields.FieldInfo) -> str:
    text = field.description or ''
    if field.is_required():
        return f'{text} (required)'.strip()
    if field.default_factory is not None:
        return text
    default = field.default
    default = getattr(default, 'value', default)
    return f'{text} (default: {default})'.strip()


def _add_group(
    parser: argparse.ArgumentParser,
    title: str,
    model: type[pydantic.BaseModel],
    prefix: str,
    kinds: dict[str, Any],
) -> None:
    group = parser.add_argument_group(
        title, model.__doc__.splitlines()[0] if model.__doc__ else None
    )
    for dotted, field, annotation in _leaves(model, prefix):
        metavar = 'JSON' if _is_structured(annotation) else dotted.rsplit('.', 1)[-1].upper()
        group.add_argument(
            f'--{dotted}',
            dest=dotted,
            default=argparse.SUPPRESS,
            metavar=metavar,
            help=_help_of(field),
        )
        kinds[dotted] = field.annotation


def _convert(raw: str, annotation: Any, option: str) -> Any:
    inner, optional = _strip_optional(annotation)
    if optional and raw.lower() in ('null', 'none'):
        return None
    if _is_structured(inner):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as e:
            raise ConfigError(
                f'--{option} takes JSON (for example [1, 2] or {{"a": 1}}): {e}'
            ) from e
    return raw


def parse_run_args(argv: Sequence[str]) -> ParsedRun:
    """Parse ``tether bench run`` arguments into a merged configuration dict.

    Raises:
        ConfigError: for unreadable files, unknown options or badly formed values.
    """
    first = _stage_one()
    known, _ = first.parse_known_args(list(argv))
    for module in known.imports:
        import_plugin_module(module)
    config = merge(load_toml(path) for path in known.config)
    for option, key in (
        ('app', 'app.name'),
        ('executor', 'engine.executor.name'),
        ('transformer', 'engine.transformer.name'),
        ('filter', 'engine.filter.name'),
    ):
        value = getattr(known, option)
        if value is not None:
            config = set_dotted(config, key, value)

    second = _Parser(
        prog=_PROG,
        parents=[first],
        add_help=False,
        allow_abbrev=False,
        description=first.description,
    )
    kinds: dict[str, Any] = {}
    app_name = config.get('app', {}).get('name')
    if app_name is not None:
        _add_group(second, f'app: {app_name}', get_plugin('app', app_name), 'app', kinds)
    engine = config.get('engine', {})
    _add_group(second, 'engine', _engine_fields(), 'engine', kinds)
    executor_name = engine.get('executor', {}).get('name', DEFAULT_EXECUTOR)
    _add_group(
        second,
        f'executor: {executor_name}',
        get_plugin('executor', executor_name),
        'engine.executor',
        kinds,
    )
    kind: Kind
    for kind in ('transformer', 'filter'):
        name = engine.get(kind, {}).get('name')
        if name is not None:
            _add_group(
                second,
                f'{kind}: {name}',
                get_plugin(kind, name),
                f'engine.{kind}',
                kinds,
            )
    _add_group(second, 'logging', LoggingConfig, 'logging', kinds)
    _add_group(second, 'run', RunConfig, 'run', kinds)

    if known.help:
        return ParsedRun(config, second.format_help(), known.progress, known.json)
    values = second.parse_args(list(argv))
    for dotted, raw in vars(values).items():
        if dotted in kinds:
            config = set_dotted(config, dotted, _convert(raw, kinds[dotted], dotted))
    return ParsedRun(config, None, known.progress, known.json)


class _EngineOptions(pydantic.BaseModel):
    """Engine options (the executor, transformer and filter have their own groups)."""

    task_record_file_name: str | None = pydantic.Field(
        default='tasks.jsonl',
        description='task records in the run directory (empty: none)',
    )


def _engine_fields() -> type[pydantic.BaseModel]:
    return _EngineOptions
