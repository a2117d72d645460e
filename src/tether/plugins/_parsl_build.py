"""Parsl configurations on any provider: providers and launchers by short name, a
HighThroughputExecutor over one, and the shell lines that make its processes run this
interpreter. Re-exported by :mod:`tether.plugins.parsl` (the one Parsl integration).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from tether.exceptions import ConfigError

__all__ = [
    'LAUNCHERS',
    'PROVIDERS',
    'config_of',
    'htex_config',
    'interchange_command',
    'make_launcher',
    'make_provider',
    'worker_init',
]

PROVIDERS: Mapping[str, str] = {
    'aws': 'AWSProvider',
    'condor': 'CondorProvider',
    'googlecloud': 'GoogleCloudProvider',
    'kubernetes': 'KubernetesProvider',
    'local': 'LocalProvider',
    'lsf': 'LSFProvider',
    'pbspro': 'PBSProProvider',
    'slurm': 'SlurmProvider',
}
"""tether's name of each Parsl provider it builds -> its class in ``parsl.providers``."""

LAUNCHERS: Mapping[str, str] = {
    'aprun': 'AprunLauncher',
    'gnu_parallel': 'GnuParallelLauncher',
    'jsrun': 'JsrunLauncher',
    'mpiexec': 'MpiExecLauncher',
    'mpirun': 'MpiRunLauncher',
    'simple': 'SimpleLauncher',
    'single_node': 'SingleNodeLauncher',
    'srun': 'SrunLauncher',
    'srun_mpi': 'SrunMPILauncher',
}
"""tether's name of each Parsl launcher -> its class in ``parsl.launchers``."""

# What each provider needs beyond parsl itself (said when building one fails).
_EXTRAS = {
    'aws': 'boto3 (pip install "parsl[aws]") and AWS credentials',
    'googlecloud': 'google-api-python-client (pip install "parsl[google_cloud]") and a key file',
    'kubernetes': 'kubernetes (pip install "parsl[kubernetes]") and a kube config',
}


def worker_init(extra: str | None = None) -> str:
    """The ``worker_init`` shell line that puts this interpreter's scripts first on PATH.

    Parsl starts its workers with a shell command (``process_worker_pool.py``); ``extra``
    (a provider's own ``worker_init``) runs after.
    """
    line = f'export PATH={os.path.dirname(sys.executable)}:$PATH'
    return f'{line}; {extra}' if extra else line


def interchange_command() -> list[str]:
    """HTEX's ``interchange_launch_cmd`` run by this interpreter (found whatever the PATH)."""
    return [sys.executable, '-m', 'parsl.executors.high_throughput.interchange']


def _parsl_class(module: str, table: Mapping[str, str], name: str, what: str) -> Any:
    if name not in table:
        raise ConfigError(f'unknown Parsl {what} {name!r}: the {what}s are {", ".join(table)}')
    return getattr(importlib.import_module(module), table[name])


def make_launcher(name: str, **options: Any) -> Any:
    """A Parsl launcher by its name in :data:`LAUNCHERS` (``options``: its arguments,
    ``overrides`` for most).

    Raises:
        ConfigError: an unknown name, or options the launcher does not take.
    """
    cls = _parsl_class('parsl.launchers', LAUNCHERS, name, 'launcher')
    try:
        return cls(**options)
    except TypeError as e:
        raise ConfigError(f'the {name} launcher ({cls.__name__}) refused {options}: {e}') from e


@functools.cache
def _polled_every(cls: type, seconds: float) -> type:
    """``cls`` whose block states are polled every ``seconds`` (Parsl fixes it per
    provider: 60 s for Slurm, PBS and LSF)."""
    return type(
        cls.__name__,
        (cls,),
        {'status_polling_interval': property(lambda self: seconds), '__module__': __name__},
    )


def make_provider(
    name: str,
    options: Mapping[str, Any],
    *,
    launcher: Any = None,
    status_polling_interval: float | None = None,
) -> Any:
    """A Parsl execution provider by its name in :data:`PROVIDERS`.

    Args:
        name: ``'slurm'``, ``'pbspro'``, ``'lsf'``, ``'condor'``, ``'kubernetes'``,
            ``'aws'``, ``'googlecloud'`` or ``'local'``.
        options: The provider's arguments, as Parsl names them (``partition``,
            ``walltime``, ``nodes_per_block``, ``worker_init`` ...).
        launcher: A launcher (:func:`make_launcher`) for providers that take one.
        status_polling_interval: Seconds between polls of the blocks' states (how soon
            a block the scheduler ended is noticed and replaced); ``None``: Parsl's.

    Raises:
        ConfigError: an unknown name, options the provider does not take, or a provider
            whose packages are missing.
    """
    cls = _parsl_class('parsl.providers', PROVIDERS, name, 'provider')
    if status_polling_interval is not None:
        if status_polling_interval <= 0:
            raise ConfigError(
                f'status_polling_interval must be > 0 seconds, not {status_polling_interval}'
            )
        cls = _polled_every(cls, float(status_polling_interval))
    kwargs = dict(options)
    if launcher is not None:
        kwargs['launcher'] = launcher
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise ConfigError(
            f'the {name} provider ({PROVIDERS[name]}) refused its options: {e}'
        ) from e
    except Exception as e:
        needs = _EXTRAS.get(name, 'its scheduler commands on PATH')
        raise ConfigError(
            f'the {name} provider ({PROVIDERS[name]}) could not be built: '
            f'{type(e).__name__}: {e} (it needs {needs})'
        ) from e


def htex_config(
    provider: Any,
    *,
    label: str = 'htex',
    workers_per_node: int | None = None,
    address: str | None = None,
    encrypted: bool = True,
    retries: int = 0,
    retry_handler: Callable[[Exception, Any], float] | None = None,
    strategy: str | None = 'htex_auto_scale',
    strategy_period: float | None = 5.0,
    max_idletime: float | None = 120.0,
    run_dir: str | None = None,
    run_dir_prefix: str = 'tether-parsl-',
    initialize_logging: bool = False,
    **htex: Any,
) -> Any:
    """A ``parsl.config.Config``: one HighThroughputExecutor over ``provider``.

    The interchange runs this interpreter; ``address`` is where the workers reach it
    (``None``: Parsl tries every address of this host). ``strategy`` scales blocks out
    while tasks wait and in after ``max_idletime`` idle seconds (``htex_auto_scale`` only
    ends blocks with no task); ``None`` for any of the three keeps Parsl's default.
    ``run_dir`` defaults to a new temporary directory, which the caller removes; ``htex``
    adds any other HighThroughputExecutor option (``heartbeat_period``,
    ``cores_per_worker`` ...).
    """
    from parsl.executors import HighThroughputExecutor

    try:
        with warnings.catch_warnings():
            # Without an address, Parsl lists this host's addresses with sockets it never
            # closes (a ResourceWarning each, raised as they are dropped, in this call).
            warnings.simplefilter('ignore', ResourceWarning)
            executor = HighThroughputExecutor(
                label=label,
                address=address,
                max_workers_per_node=workers_per_node,
                provider=provider,
                encrypted=encrypted,
                interchange_launch_cmd=interchange_command(),
                **htex,
            )
    except TypeError as e:
        raise ConfigError(f'HighThroughputExecutor refused its options: {e}') from e
    scaling = {
        'strategy': strategy,
        'strategy_period': strategy_period,
        'max_idletime': max_idletime,
    }
    return config_of(
        executor,
        run_dir,
        run_dir_prefix,
        retries=retries,
        retry_handler=retry_handler,
        initialize_logging=initialize_logging,
        **{name: value for name, value in scaling.items() if value is not None},
    )


def config_of(executor: Any, run_dir: str | None, run_dir_prefix: str, **options: Any) -> Any:
    """A ``parsl.config.Config`` of ``executor`` alone with Parsl's ``options``.

    ``run_dir`` defaults to a new temporary directory (named from ``run_dir_prefix``),
    which the caller removes.
    """
    from parsl.config import Config

    run_dir = run_dir if run_dir is not None else tempfile.mkdtemp(prefix=run_dir_prefix)
    return Config(executors=[executor], run_dir=run_dir, **options)
