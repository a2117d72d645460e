"""The worker process: runs one task at a time, keeps functions warm.

A worker (``python -m tether.faas.endpoint._worker FD``) receives tasks over a socket
from its endpoint (its parent), deserializes each
function once (then keeps it: the function is *warm* in this worker) and sends back the
serialized result or the error as text. Results above the task's threshold are stored in
the task's result store and sent as a proxy.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = [
    'Result',
    'TaskMessage',
    'max_result_bytes',
    'result_too_large',
    'run_parsl_task',
    'run_task',
    'worker_main',
]

TaskMessage = tuple[str, str, str, bytes | None, str, bytes, Any, Any]
"""``(task_id, function_id, function_serializer, function_body or None if warm,
data_serializer, payload, result_store config or None, result_threshold or None)``."""


Result = tuple[str, str, str, bytes, dict[str, str] | None, float, float, dict[str, str] | None]
"""``(task_id, status, serializer, payload, error, start, end, output)``: ``output`` has
the task's ``stdout`` and ``stderr`` (only those it wrote to; ``None``: neither)."""


def run_task(message: TaskMessage, functions: dict[str, Callable[..., Any]]) -> Result:
    """Run one task, its stdout and stderr captured (:mod:`._output`)."""
    global _capture
    if _capture is None:
        from tether.faas.endpoint._output import DEFAULT_MAX_OUTPUT, OutputCapture

        limit = os.environ.get('TETHER_FAAS_MAX_OUTPUT_BYTES')
        _capture = OutputCapture(DEFAULT_MAX_OUTPUT if limit is None else int(limit))
    if threading.current_thread() is not threading.main_thread():
        return (*_run_task(message, functions), None)  # descriptors are the process's
    _capture.start()
    try:
        result = _run_task(message, functions)
    finally:
        output = _capture.stop()
    return (*result, output)


_capture: Any = None


def _run_task(
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
        if len(data) > max_result_bytes():
            raise result_too_large(len(data), max_result_bytes())
        return task_id, 'success', dser, data, None, start, time.time()
    except BaseException as e:
        error = {
            'type': f'{type(e).__module__}.{type(e).__qualname__}'.removeprefix('builtins.'),
            'message': _clip(_import_hint(e) or str(e), head=True),
            'traceback': _clip(traceback.format_exc(), head=False),
        }
        return task_id, 'failed', dser, b'', error, start, time.time()


def _import_hint(error: BaseException) -> str | None:
    """For a module that does not import here (raised, or the cause of a function that
    does not unpickle): which module, in which environment, and what to do."""
    import sys

    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, ImportError):
        cause = cause.__cause__
    if cause is None:
        return None
    module = getattr(cause, 'name', None) or 'a module'
    where = os.environ.get('TETHER_FAAS_ENVIRONMENT') or 'default'
    return (
        f'{error}: module {module!r} cannot be imported in environment {where!r} '
        f'({sys.executable}, Python {sys.version.split()[0]}): install it there, or '
        'register the function with environment= naming one that has it'
    )


DEFAULT_MAX_RESULT = 10 * 2**20
_max_result: int | None = None


def max_result_bytes() -> int:
    """The largest result this worker sends back (``$TETHER_FAAS_MAX_RESULT_BYTES``, set
    from the endpoint's ``max_result_bytes``; 10 MiB by default)."""
    global _max_result
    if _max_result is None:
        _max_result = int(os.environ.get('TETHER_FAAS_MAX_RESULT_BYTES') or DEFAULT_MAX_RESULT)
    return _max_result


def result_too_large(size: int, limit: int) -> Exception:
    """The error of a result above the endpoint's (or the service's) limit."""
    from tether.exceptions import FaasPayloadTooLargeError

    return FaasPayloadTooLargeError(
        f"the result is {size} bytes, above the limit of {limit} bytes (the endpoint's "
        "max_result_bytes, at most the service's max_payload_bytes): return it by "
        'reference instead. Give the task a result_store (Executor(endpoint_id, '
        'store=store) does: results above its proxy_threshold come back as proxies of that '
        'store), or return store.proxy(value) from the function'
    )


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

    cancelled: set[str] = set()

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            if message is not None and len(message) == 2 and message[0] == 'cancel':
                cancelled.add(message[1])  # a prefetched task: skipped when its turn comes
                continue
            inbox.put(message)
            if message is None:
                return

    threading.Thread(target=read, name='tether-faas-worker-inbox', daemon=True).start()
    try:
        conn.send(None)  # up: the pool counts time limits from here, not from the spawn
    except (EOFError, OSError):
        return
    while True:
        message = inbox.get()
        if message is None:
            return
        if message[0] in cancelled:
            cancelled.discard(message[0])
            if message[3] is not None and message[1] not in functions:
                # The pool counts the function warm here from now on: load it all the same.
                from tether.faas._payload import load_function

                with contextlib.suppress(Exception):  # its next task reports the error
                    functions[message[1]] = load_function(message[2], message[3])
            now = time.time()
            error = {'type': 'TaskCancelledError', 'message': 'cancelled', 'traceback': ''}
            reply: Any = (message[0], 'cancelled', message[4], b'', error, now, now, None)
        else:
            reply = run_task(message, functions)
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return


_WARM: dict[str, Callable[..., Any]] = {}


def run_parsl_task(message: TaskMessage, timeout: float | None = None) -> Result:
    """:func:`run_task` with this process's warm functions (the Parsl engine's app).

    With ``timeout``, a timer signal interrupts the function past it (Parsl cannot stop
    its worker): the task fails with ``TaskTimeoutError`` and the worker is free again,
    unless the function blocks the signal (stuck in C code)."""
    if not _WARM:
        _extend_sys_path()
    if timeout is None:
        return run_task(message, _WARM)
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return run_task(message, _WARM)

    class _Expired(BaseException):
        pass

    def expire(signum: int, frame: Any) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        result = run_task(message, _WARM)
    except _Expired:  # between the function's end and the timer's reset
        result = (message[0], 'failed', message[4], b'', None, 0.0, 0.0, None)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    error = result[4]
    if result[1] == 'failed' and (error is None or error.get('type', '').endswith('_Expired')):
        error = {
            'type': 'TaskTimeoutError',
            'message': f'the task ran longer than its time limit of {timeout:g} s '
            '(task_timeout): it was interrupted',
            'traceback': '',
        }
        result = (result[0], 'failed', result[2], b'', error, result[5], result[6], result[7])
    return result


def _extend_sys_path() -> None:
    """Put the endpoint's ``sys.path`` entries into this worker's (to import functions
    pickled by reference from the endpoint's modules)."""
    import json
    import sys

    entries = json.loads(os.environ.get('TETHER_FAAS_SYS_PATH', '[]'))
    if os.environ.get('TETHER_FAAS_ENVIRONMENT'):  # another environment: its own first
        sys.path.extend(e for e in entries if e not in sys.path)
        return
    for entry in reversed(entries):
        if entry not in sys.path:
            sys.path.insert(0, entry)


def _main() -> None:
    import multiprocessing.connection
    import sys

    _extend_sys_path()
    worker_main(multiprocessing.connection.Connection(int(sys.argv[1])), {})


if __name__ == '__main__':
    _main()
