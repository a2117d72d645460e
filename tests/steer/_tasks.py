"""Task functions for the steering tests (module level, so workers can import them)."""

from __future__ import annotations

import os
import pathlib
import signal
from typing import Any


def add(x: int, y: int = 0) -> int:
    return x + y


def echo(x: Any) -> Any:
    return x


def nbytes(x: Any) -> int:
    return len(x)


def make_bytes(n: int) -> bytes:
    return b'x' * n


def fail(message: str) -> None:
    raise ValueError(message)


def fail_once(marker: str) -> str:
    """Fail the first time (creating ``marker``), succeed after."""
    path = pathlib.Path(marker)
    if not path.exists():
        path.write_text('tried')
        raise RuntimeError('first attempt fails')
    return 'second attempt'


def die_once(marker: str) -> str:
    """Kill this worker process the first time (creating ``marker``), succeed after."""
    path = pathlib.Path(marker)
    if not path.exists():
        path.write_text('died')
        os.kill(os.getpid(), signal.SIGKILL)
    return 'survived'


def die_always() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def is_proxy_resolving(x: Any) -> bool:
    """True if ``x`` arrived as a proxy already resolving (or resolved) when the task ran."""
    from tether.proxy import Proxy, is_resolved

    if Proxy not in type(x).__mro__:
        return False
    pending = Proxy.__proxy_pending__.__get__(x)  # type: ignore[attr-defined]
    return bool(is_resolved(x) or pending is not None)


def append_line(path: str) -> int:
    """Append a line to ``path``; return how many lines it has (how often this ran)."""
    with open(path, 'a') as f:
        f.write('ran\n')
    with open(path) as f:
        return len(f.readlines())


def is_cached(box: list[Any]) -> bool:
    """Whether this worker's store cache holds the object behind the proxy in ``box``."""
    from tether.proxy import get_factory

    factory: Any = get_factory(box[0])
    store = factory.current_store()
    return store is not None and bool(store.is_cached(factory.key))


def wait_for(marker: str) -> str:
    """Block until ``marker`` exists (at most a minute), then say so."""
    import time

    path = pathlib.Path(marker)
    for _ in range(6000):
        if path.exists():
            return 'released'
        time.sleep(0.01)
    raise TimeoutError(f'{marker} never appeared')


def pid() -> int:
    return os.getpid()


def log_run(log: str, tag: str, gate: str | None = None) -> str:
    """Append ``tag`` to ``log`` (one line per run); with ``gate``, first write
    ``<gate>.started`` and block until ``gate`` exists (at most a minute)."""
    import time

    with open(log, 'a') as f:
        f.write(f'{tag}\n')
    if gate is not None:
        pathlib.Path(f'{gate}.started').write_text('started')
        for _ in range(6000):
            if pathlib.Path(gate).exists():
                break
            time.sleep(0.01)
        else:
            raise TimeoutError(f'{gate} never appeared')
    return tag


def start_sleeper(pidfile: str) -> int:
    """Start a ``sleep`` process of its own, write its pid to ``pidfile`` and wait for it."""
    import subprocess

    child = subprocess.Popen(['sleep', '600'])
    pathlib.Path(pidfile).write_text(str(child.pid))
    return child.wait()


def first_item_resolving(items: Any) -> bool:
    """``is_proxy_resolving`` of the first item of a list or of a dict's ``'x'``."""
    return is_proxy_resolving(items['x'] if isinstance(items, dict) else items[0])
