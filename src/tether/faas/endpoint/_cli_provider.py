"""The ``[provider]`` options of ``tether faas endpoint configure``, and the check of the
configuration they make (before the endpoint is registered with the service)."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from typing import Any, TypeVar

import click
import pydantic

from tether.exceptions import ConfigError
from tether.faas._config import ComputeEndpointConfig, validation_message

__all__ = ['checked', 'provider_options', 'provider_table']

F = TypeVar('F', bound=Callable[..., Any])

# (option, the provider's key, type, help): each one given goes into the [provider] table.
_OPTIONS: list[tuple[str, str, Any, str]] = [
    ('--partition', 'partition', str, 'Slurm partition.'),
    ('--queue', 'queue', str, 'PBS Pro or LSF queue.'),
    ('--account', 'account', str, 'Slurm or PBS Pro account charged for the blocks.'),
    ('--walltime', 'walltime', str, "A block's walltime, HH:MM:SS."),
    ('--nodes-per-block', 'nodes_per_block', int, 'Nodes of each block.'),
    ('--init-blocks', 'init_blocks', int, 'Blocks requested at start.'),
    ('--min-blocks', 'min_blocks', int, 'Blocks kept even when idle.'),
    ('--max-blocks', 'max_blocks', int, 'Most blocks at once.'),
    ('--launcher', 'launcher', str, 'single_node, srun, mpiexec, aprun, jsrun ...'),
    ('--worker-init', 'worker_init', str, 'Shell lines run in a block before its workers.'),
    ('--scheduler-options', 'scheduler_options', str, 'Extra #SBATCH/#PBS/#BSUB lines.'),
]


def provider_options(fn: F) -> F:
    """Add ``--provider``, the common provider settings and ``--provider-option KEY=VALUE``
    to a click command (their values reach it as keyword arguments)."""
    fn = click.option(
        '--provider-option',
        'provider_option',
        multiple=True,
        metavar='KEY=VALUE',
        help='Any other setting of the provider (repeatable; VALUE is read as TOML when '
        'it parses, e.g. exclusive=false, else as text).',
    )(fn)
    for flag, key, kind, text in reversed(_OPTIONS):
        fn = click.option(flag, key, type=kind, default=None, help=text)(fn)
    return click.option(
        '--provider',
        'provider_type',
        default=None,
        help='Where the parsl engine gets its nodes: slurm, pbspro, lsf, condor, kubernetes, '
        'aws, googlecloud or local.',
    )(fn)


def _value(text: str) -> Any:
    try:
        return tomllib.loads(f'v = {text}')['v']
    except tomllib.TOMLDecodeError:
        return text


def provider_table(values: dict[str, Any]) -> dict[str, Any] | None:
    """The ``[provider]`` table the options give (``None``: no ``--provider``).

    Raises:
        ConfigError: provider settings without ``--provider``, or a malformed
            ``--provider-option``.
    """
    kind = values.pop('provider_type', None)
    extra = values.pop('provider_option', ()) or ()
    table = {key: value for key, value in values.items() if value is not None}
    for item in extra:
        key, sep, text = item.partition('=')
        if not sep or not key.strip():
            raise ConfigError(f'--provider-option takes KEY=VALUE, not {item!r}')
        table[key.strip()] = _value(text.strip())
    if kind is None:
        if table:
            raise ConfigError(
                f'provider settings ({", ".join(sorted(table))}) need --provider '
                '(slurm, pbspro, lsf, condor, kubernetes, aws, googlecloud or local)'
            )
        return None
    return {'type': kind, **table}


def checked(fields: dict[str, Any], **more: Any) -> ComputeEndpointConfig:
    """The endpoint configuration of ``fields``, or a :class:`ConfigError` saying which
    settings are wrong."""
    try:
        return ComputeEndpointConfig(**fields, **more)
    except pydantic.ValidationError as e:
        raise ConfigError(f'invalid endpoint configuration: {validation_message(e)}') from e
