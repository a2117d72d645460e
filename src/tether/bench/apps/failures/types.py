"""Failure types as TaPS names them: an enum and the functions that raise the simple ones.

The failures application itself takes the type as a string (see
:mod:`tether.bench.apps.failures`); ``FailureType(value).value`` is that string.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable

from tether.bench.apps.failures import inject

__all__ = ['FAILURE_FUNCTIONS', 'FailureType', 'InjectedFailureError']


class FailureType(enum.Enum):
    """A failure the application can inject (``RANDOM`` picks another per task)."""

    DEPENDENCY = 'dependency'
    FAILURE = 'failure'
    IMPORT = 'import'
    MEMORY = 'memory'
    RANDOM = 'random'
    ULIMIT = 'ulimit'
    WALLTIME = 'walltime'
    WORKER_KILL = 'worker-kill'
    ZERO_DIVISION = 'zero-division'

    @classmethod
    def random(cls) -> FailureType:
        """One failure type other than ``RANDOM``, chosen uniformly."""
        return random.choice([kind for kind in cls if kind is not cls.RANDOM])


class InjectedFailureError(Exception):
    """A generic injected failure (``FailureType.FAILURE``)."""


def _failure() -> None:
    raise InjectedFailureError('Failure injection error: a generic exception was injected')


def _in_process(kind: str) -> Callable[[], None]:
    def raise_it() -> None:
        try:
            inject(kind, client_pid=-1)
        except OSError as exc:
            raise OSError(exc.errno, f'Failure injection error: {exc.strerror}') from exc
        except Exception as exc:
            raise type(exc)(f'Failure injection error: {exc}') from exc

    raise_it.__name__ = f'inject_{kind.replace("-", "_")}'
    return raise_it


FAILURE_FUNCTIONS: dict[FailureType, Callable[[], None]] = {
    FailureType.FAILURE: _failure,
    FailureType.IMPORT: _in_process('import'),
    FailureType.MEMORY: _in_process('memory'),
    FailureType.ULIMIT: _in_process('ulimit'),
    FailureType.ZERO_DIVISION: _in_process('zero-division'),
}
"""The failures raised in the calling process, each by a function of no arguments."""
