"""TaPS's command-line entry as a function: ``parse_args_to_config(argv)`` -> a validated config.

The options are those of ``tether bench run`` (see :func:`parse_run_args`), with TaPS's
spellings taken as well: ``--engine.executor NAME`` (also ``.transformer`` and
``.filter``) for ``--executor NAME``, and dashes in dotted option names
(``--engine.transformer.file-dir``) for underscores.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tether.bench.run._options import ParsedRun, parse_run_args
from tether.bench.run.config import BenchmarkConfig
from tether.exceptions import InvalidArgumentError

__all__ = ['ParsedRun', 'normalize_args', 'parse_args_to_config', 'parse_run_args']

_PLUGIN_OPTIONS = {
    '--engine.executor': '--executor',
    '--engine.filter': '--filter',
    '--engine.transformer': '--transformer',
}


def _one(arg: str) -> str:
    if not arg.startswith('--') or '.' not in arg:
        return arg
    option, sep, value = arg.partition('=')
    option = '--' + option[2:].replace('-', '_')
    option = _PLUGIN_OPTIONS.get(option, option)
    return option + sep + value


def normalize_args(argv: Sequence[str]) -> list[str]:
    """Rewrite TaPS's option spellings to ``tether bench run``'s (values are left alone)."""
    return [_one(arg) for arg in argv]


def parse_args_to_config(argv: Sequence[str]) -> BenchmarkConfig:
    """Parse command-line arguments (and the TOML files they name) into a config.

    With no arguments, or ``--help``, prints the help to standard output and exits.

    Raises:
        SystemExit: after printing the help.
        InvalidArgumentError: no application is named (a ``ValueError``).
        ConfigError: for unreadable files, unknown options or invalid values.
    """
    args = normalize_args(argv)
    parsed = parse_run_args(args or ['--help'])
    if parsed.help is not None:
        sys.stdout.write(parsed.help)
        raise SystemExit(0)
    if not parsed.config.get('app', {}).get('name'):
        raise InvalidArgumentError(
            'App name option is required: pass --app NAME or set name in [app] of a config file'
        )
    return BenchmarkConfig.from_dict(parsed.config)
