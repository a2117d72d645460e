"""The worker process: runs one task at a time, keeps functions warm.

A worker (``python -m tether.faas.endpoint._worker FD``) receives tasks over a socket
from its endpoint (its parent), deserializes each
function once (then keeps it: the function is *warm* in this worker) and sends back the
serialized result or the error as text. Results above the task's threshold are stored in
the task's result store and sent as a proxy.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ['TaskMessage', 'run_parsl_task', 'run_task', 'worker_main']

TaskMessage = tuple[str, str, str, bytes | None, str, bytes, Any, Any]
"""``(task_id, function_id, function_serializer, function_body or None if warm,
data_serializer, payload, result_store config or None, result_threshold or None)``."""


def run_task(
    message: TaskMessage, functions: dict[str, Callable[..., Any]]
) -> tuple[str, str, str, bytes, dict[str, str] | None, float, float]:
    """Run one task; return ``(task_id, status, serializer, payload, error, start, end)``."""
    from tether.faas._payload import load_function, pack_result, unpack_args

    task_id, fid, fser, fbody, dser, payload, rstore, rthreshold = message
    start = time.time()
    try:
        fn = functions.get(fid)
        if fn is None:
            if fbody is None:
                raise RuntimeError(f'function {fid} is not loaded in this worker')
            fn = functions[fid] = load_function(fser, fbody)
        args, kwargs = unpack_args(dser, payload)
        value = fn(*args, **kwargs)
        data = pack_result(value, dser)
        if rstore is not None and rthreshold is not None and len(data) >= int(rthreshold):
            from tether.store import StoreConfig, get_or_create_store

            # The config came over the network with the task: rebuilt only from
            # allowlisted connector types (tether.store.allowlist), like stream events.
            store = get_or_create_store(StoreConfig.from_dict(rstore))
            data = pack_result(store.proxy(value, evict=True), dser)
        return task_id, 'success', dser, data, None, start, time.time()
    except BaseException as e:
        error = {
            'type': f'{type(e).__module__}.{type(e).__qualname__}'.removeprefix('builtins.'),
            'message': _clip(str(e), head=True),
            'traceback': _clip(traceback.format_exc(), head=False),
        }
        return task_id, 'failed', dser, b'', error, start, time.time()


# A result's error travels in the JSON header of messages that the service and clients
# accept up to 1 MiB: an exception's text is cut to its first, a traceback to its last,
# 64 KiB (where the exception was raised).
_ERROR_TEXT = 64 * 1024


def _clip(text: str, *, head: bool) -> str:
    if len(text) <= _ERROR_TEXT:
        return text
    cut = f'[... {len(text) - _ERROR_TEXT} characters cut ...]'
    return text[:_ERROR_TEXT] + cut if head else cut + text[-_ERROR_TEXT:]


def worker_main(conn: Any, env: dict[str, str]) -> None:
    """Loop of a worker process: ``None`` or a closed pipe stops it.

    A thread of its own reads the pipe, so the pool can always hand this worker its next
    (prefetched) task, however large, while the worker itself is blocked sending back a
    large result the pool has not read yet: with one thread doing both, each side waited
    for the other through full pipes.
    """
    import queue
    import threading

    os.environ.update(env)
    functions: dict[str, Callable[..., Any]] = {}
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            inbox.put(message)
            if message is None:
                return

    threading.Thread(target=read, name='tether-faas-worker-inbox', daemon=True).start()
    while True:
        message = inbox.get()
        if message is None:
            return
        try:
            conn.send(run_task(message, functions))
        except (EOFError, OSError):
            return


_WARM: dict[str, Callable[..., Any]] = {}


def run_parsl_task(
    message: TaskMessage,
) -> tuple[str, str, str, bytes, dict[str, str] | None, float, float]:
    """:func:`run_task` with this process's warm functions (the Parsl engine's app)."""
    if not _WARM:
        _extend_sys_path()
    return run_task(message, _WARM)


def _extend_sys_path() -> None:
    """Put the endpoint's ``sys.path`` entries into this worker's (to import functions
    pickled by reference from the endpoint's modules)."""
    import json
    import sys

    for entry in reversed(json.loads(os.environ.get('TETHER_FAAS_SYS_PATH', '[]'))):
        if entry not in sys.path:
            sys.path.insert(0, entry)


def _main() -> None:
    import multiprocessing.connection
    import sys

    _extend_sys_path()
    worker_main(multiprocessing.connection.Connection(int(sys.argv[1])), {})


if __name__ == '__main__':
    _main()
