"""Functions that write to stdout and stderr (module level: workers import them)."""

from __future__ import annotations

import os
import sys


def chatty(x: int) -> int:
    print(f'working on {x}')
    print('a warning', file=sys.stderr)
    return x + 1


def chatty_then_fail(message: str) -> None:
    print('before the failure')
    sys.stderr.write('about to fail\n')
    raise ValueError(message)


def shell(command: str) -> int:
    """Output of a subprocess (file descriptors 1 and 2, not sys.stdout)."""
    sys.stdout.flush()
    return os.system(command)


def lots(n: int) -> int:
    sys.stdout.write('BEGIN' + 'x' * n + 'END')
    return n


def quiet() -> int:
    return 7


def print_then_block() -> None:
    """Print, then wait for a signal (the time limit's): a task that runs too long."""
    import signal

    print('started, then stuck', flush=True)
    signal.pause()
