"""``Executor``: a ``concurrent.futures.Executor`` over the function service.

``submit`` returns at once with a :class:`TaskFuture`. A background thread holds a
WebSocket on the task group's result stream: it sends the queued submissions on it in
batches (everything queued while one batch awaits the service's ``SUBMITTED`` goes in the
next; a batch not confirmed when the connection drops is sent again, which the service
ignores for tasks it has), and completes futures as results arrive: nothing polls. A
result is acknowledged to the service once its future is set; results not acknowledged
(the client was killed, the connection dropped) are delivered again on the next
connection, and duplicates are ignored. ``Executor(endpoint_id, task_group_id=...)``
plus :meth:`Executor.reload_tasks` reattaches to an earlier task group.

``TaskFuture.cancel()`` cancels the task at the service (removed if queued, stopped on
its worker if running); ``task_timeout=`` gives every task a time limit on its worker.

With ``store=``, arguments whose serialized size reaches ``proxy_threshold`` travel as
proxies through that store (outside the service) and are evicted when their task
completes; results above the threshold come back the same way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tether import _tracing
from tether._clock import SYSTEM_CLOCK, Clock
from tether._serve.loop import new_event_loop
from tether._serve.tls import client_context
from tether.exceptions import (
    ConfigError,
    FaasAuthenticationError,
    FaasConnectionError,
    FaasError,
    FaasNotFoundError,
)
from tether.faas import _frames
from tether.faas._client import Client, check_timeout, outcome
from tether.faas._future import TaskFuture, cancel_local
from tether.faas._http import error_from, ws_url
from tether.faas._options import ComputeOptions, ExecutorOptions, check_keywords
from tether.faas._payload import pack_args

__all__ = ['Executor', 'TaskFuture']

# Close codes of a result stream the service accepted, then refused: what each means.
_REFUSALS = {
    4429: (
        "this user's WebSockets are at the service's per-user limit (the service's "
        'max_websockets_per_user setting): close other Executors or result streams, or '
        'raise the setting'
    ),
    4503: (
        "the service's broker channels are used up (its broker_channel_budget setting, "
        'within the channel_max RabbitMQ grants): raise the budget, or wait for streams '
        'to close'
    ),
}

logger = logging.getLogger(__name__)

_NO_ENDPOINT = (
    'this Executor has no endpoint: pass Executor(endpoint_id) or set executor.endpoint_id '
    '(or run `tether faas dev`)'
)

# Payload bytes from which a submission is split (the service's request limit is larger).
_BATCH_BYTES = 8 * 2**20


class Executor(ComputeOptions, concurrent.futures.Executor):
    """Run functions on an endpoint of a tether function service.

    Args:
        endpoint_id: Where tasks run. Default: the endpoint of the running
            ``tether faas dev``, else none until ``endpoint_id`` is set (``submit``
            raises :class:`~tether.exceptions.ConfigError` until then).
        client: A :class:`Client` (default: ``Client(service_url, token, ...)``).
        task_group_id: Reattach to this task group (see :meth:`reload_tasks`).
        store: A tether Store for large arguments and results.
        proxy_threshold: Serialized size (bytes) from which an argument or result is
            proxied through ``store``.
        batch_size: Most tasks in one submission request.
        service_url: As for :class:`Client`.
        token: As for :class:`Client`.
        data_serializer: ``'tether'`` or ``'json'``.
        task_timeout: Seconds each task may run on its worker: past it, the task fails
            with :class:`~tether.exceptions.TaskTimeoutError` and the worker is replaced
            (``None``: no limit).
        clock: What the result stream's reconnection backoff and ``retry_deadline``
            are measured on (tests pass a :class:`tether.testing.FakeClock`).
        serializer: A :class:`~tether.faas.ComputeSerializer` (Globus Compute's):
            its strategies choose the function and data serializers.
        resource_specification: Recorded and validated (a dict); see ``docs/porting.md``.
        user_endpoint_config: Recorded and validated (a dict); see ``docs/porting.md``.
        label: A label for this executor (in its ``repr``).
        environment: The Python environment its functions ask for (``register_function``).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Executor:
        check_keywords(cls, kwargs)  # a clear TypeError before __init__'s own
        return super().__new__(cls)

    def __init__(
        self,
        endpoint_id: str | None = None,
        *,
        client: Client | None = None,
        task_group_id: str | None = None,
        store: Any = None,
        proxy_threshold: int = 100_000,
        batch_size: int = 1024,
        service_url: str | None = None,
        token: str | None = None,
        data_serializer: str = 'tether',
        task_timeout: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
        serializer: Any = None,
        resource_specification: dict[str, Any] | None = None,
        user_endpoint_config: dict[str, Any] | None = None,
        label: str = '',
        environment: str | None = None,
    ) -> None:
        self._own_client = client is None
        self.clock = clock
        self.task_timeout = None if task_timeout is None else check_timeout(task_timeout)
        self.client = client or Client(service_url, token, data_serializer=data_serializer)
        self._options = ExecutorOptions(self.client, serializer)
        self.resource_specification = resource_specification
        self.user_endpoint_config = user_endpoint_config
        self.label = label
        self.environment = environment
        self.endpoint_id = endpoint_id or self.client.dev_endpoint_id
        self.store = store
        self.proxy_threshold = proxy_threshold
        self.batch_size = batch_size
        self._task_group = task_group_id
        self._futures: dict[str, TaskFuture] = {}
        self._keys: dict[str, list[Any]] = {}
        self._queue: list[tuple[dict[str, Any], bytes]] = []
        self._cond = threading.Condition()
        self._shutdown = False
        self._wake_pending = False
        # The stream loop's own state (touched only on that loop):
        self._ws: Any = None
        self._synced: asyncio.Event | None = None
        self._inflight: dict[int, list[tuple[dict[str, Any], bytes]]] = {}
        self._requests = itertools.count(1)
        self._retry: asyncio.TimerHandle | None = None
        self._retry_delay = 0.0
        self._unavailable_since: float | None = None
        self._sending: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stream_thread: threading.Thread | None = None
        self._stream_task: asyncio.Task[None] | None = None
        self._fatal: BaseException | None = None

    def __repr__(self) -> str:
        label = f', label={self.label!r}' if self.label else ''
        return f'Executor({self.endpoint_id!r}, service={self.client.service_url!r}{label})'

    @property
    def endpoint_id(self) -> str | None:
        """Where the next tasks run (settable; ``None`` until set)."""
        return self._endpoint_id

    @endpoint_id.setter
    def endpoint_id(self, value: Any) -> None:
        self._endpoint_id = None if not value else str(value)

    @property
    def task_group_id(self) -> str:
        """The task group of this executor's tasks (created on first use)."""
        if self._task_group is None:
            self._task_group = self.client.create_task_group()
        return self._task_group

    # Submitting ------------------------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> TaskFuture:
        """Run ``fn(*args, **kwargs)`` on the endpoint; registers ``fn`` on first use."""
        self._check_open()
        if self._endpoint_id is None:
            raise ConfigError(_NO_ENDPOINT)
        return self.submit_to_registered_function(self._options.function_id(fn), args, kwargs)

    def submit_to_registered_function(
        self,
        function_id: str,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> TaskFuture:
        """Run an already registered function."""
        self._check_open()
        if self._endpoint_id is None:
            raise ConfigError(_NO_ENDPOINT)
        self.client.environment_checks.check(function_id, self._endpoint_id)
        task_id = str(uuid.uuid4())
        args, kwargs, keys = self._proxy_args(tuple(args), dict(kwargs or {}))
        data_serializer = self._options.data_serializer
        payload = pack_args(args, kwargs, data_serializer)
        limit = self.client._payload_limit()
        if len(payload) > limit:
            from tether.exceptions import FaasPayloadTooLargeError

            raise FaasPayloadTooLargeError(
                f'arguments of {len(payload)} bytes exceed the service limit of {limit} '
                'bytes: pass large objects by reference (Executor(endpoint_id, store=store) '
                'proxies them through a tether Store, or pass store.proxy(obj))',
            )
        task: dict[str, Any] = {
            'task_id': task_id,
            'function_id': function_id,
            'endpoint_id': self._endpoint_id,
            'data_serializer': data_serializer,
            't': {'client_submit': time.time()},
        }
        if self.store is not None:
            task['result_store'] = self.store.config().model_dump(mode='json')
            task['result_threshold'] = self.proxy_threshold
        if self.task_timeout is not None:
            task['timeout'] = self.task_timeout
        future = TaskFuture(task_id, self)
        self._start(self.task_group_id)
        with self._cond:
            self._futures[task_id] = future
            if keys:
                self._keys[task_id] = keys
            self._queue.append((task, payload))
            wake = not self._wake_pending
            self._wake_pending = True
        if wake:
            assert self._loop is not None
            with contextlib.suppress(RuntimeError):  # the loop stopped: shutdown fails it
                self._loop.call_soon_threadsafe(self._send_next)
        return future

    def _cancel_remote(self, task_ids: list[str]) -> set[str]:
        """Cancel tasks at the service (those still queued here are just dropped);
        return the ids cancelled (the others had finished)."""
        ids = set(task_ids)
        keys: list[Any] = []
        with self._cond:
            local = {t['task_id'] for t, _ in self._queue if t['task_id'] in ids}
            if local:
                self._queue = [e for e in self._queue if e[0]['task_id'] not in local]
                for task_id in local:  # never sent: nothing will come for them
                    self._futures.pop(task_id, None)
                    keys.extend(self._keys.pop(task_id, []))
        for key in keys:
            with contextlib.suppress(Exception):
                self.store.evict(key)
        rest = [t for t in task_ids if t not in local]
        if not rest:
            return local
        outcome = self.client.batch_cancel(rest)
        return local | {t for t in rest if outcome.get(t) in ('cancelled', 'unknown')}

    def _check_open(self) -> None:
        if self._shutdown:
            raise RuntimeError('cannot schedule new futures after shutdown')

    def _proxy_args(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], list[Any]]:
        if self.store is None:
            return args, kwargs, []
        from tether.proxy import Proxy
        from tether.serialize import serialize_parts
        from tether.store.utils import get_key

        keys: list[Any] = []

        def one(obj: Any) -> Any:
            if isinstance(obj, Proxy) or obj is None or isinstance(obj, bool | int | float):
                return obj
            if self.store.serializer is None:
                parts = serialize_parts(obj)
                if sum(memoryview(p).nbytes for p in parts) < self.proxy_threshold:
                    return obj
                proxy = self.store.proxy_serialized(obj, parts)
            else:
                if len(self.store.serialize(obj)) < self.proxy_threshold:
                    return obj
                proxy = self.store.proxy(obj)
            keys.append(get_key(proxy))
            return proxy

        return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}, keys

    def _start(self, group: str) -> None:
        with self._cond:
            if self._stream_thread is None:
                ready = threading.Event()
                self._stream_thread = threading.Thread(
                    target=self._stream_main,
                    args=(group, ready),
                    name='tether-faas-results',
                    daemon=True,
                )
                self._stream_thread.start()
                ready.wait()

    # Sending (on the result stream's loop) ----------------------------------------------

    def _send_next(self) -> None:
        """Send the next batch if the stream is up and no batch awaits its answer."""
        with self._cond:
            self._wake_pending = False
            if self._ws is None or self._inflight or self._retry is not None or not self._queue:
                return
            batch: list[tuple[dict[str, Any], bytes]] = []
            size = 0
            while self._queue and len(batch) < self.batch_size:
                n = len(self._queue[0][1])
                if batch and size + n > _BATCH_BYTES:
                    break
                batch.append(self._queue.pop(0))
                size += n
        request = next(self._requests)
        while True:
            frame = _frames.encode(
                _frames.SUBMIT,
                {'request': request, 'tasks': [t for t, _ in batch]},
                [p for _, p in batch],
            )
            # Tasks with large headers (a result store's settings each): fewer per
            # request, so that the service accepts the request's header.
            if len(batch) == 1 or _frames.header_length(frame) <= _frames.HEADER_BUDGET:
                break
            half = len(batch) // 2
            with self._cond:
                self._queue[:0] = batch[half:]
            del batch[half:]
        self._inflight[request] = batch
        ws = self._ws
        self._sending = asyncio.ensure_future(self._send_frame(ws, frame))

    async def _send_frame(self, ws: Any, frame: bytes) -> None:
        try:
            await ws.send(frame)
        except Exception as e:  # the connection dropped: resent after reconnecting
            logger.debug('submission not sent (%r); resent after reconnecting', e)

    def _answered(self, frame: Any) -> None:
        """``SUBMITTED`` or ``SUBMIT_FAILED`` for a batch."""
        request = frame.header.get('request')
        batch = self._inflight.pop(request, None) if isinstance(request, int) else None
        if batch is None:
            logger.warning('ignoring an answer to no pending submission: %.200r', frame.header)
            return
        if frame.type == _frames.SUBMITTED:
            self._unavailable_since = None
            self._retry_delay = 0.0
            self._send_next()
            return
        header = frame.header
        status = header.get('status')
        status = status if isinstance(status, int) else 500
        body = json.dumps({'error': header.get('error'), 'message': header.get('message')})
        error = error_from(status, body.encode(), f'submitting {len(batch)} task(s)')
        now = self.clock.monotonic()
        if status == 503:  # the service's broker or database is down: retried
            self._unavailable_since = self._unavailable_since or now
            if now - self._unavailable_since < self.client.retry_deadline:
                self._requeue(batch)
                self._retry_delay = min(max(self._retry_delay * 2, 0.05), 2.0)
                assert self._loop is not None
                self._retry = self._loop.call_later(self._retry_delay, self._retry_now)
                return
        for task, _ in batch:
            self._fail(task['task_id'], error)
        self._send_next()

    def _retry_now(self) -> None:
        self._retry = None
        self._send_next()

    def _requeue(self, batch: list[tuple[dict[str, Any], bytes]]) -> None:
        with self._cond:
            self._queue[:0] = batch

    def _disconnected(self) -> None:
        """Batches not answered go first when the stream is back."""
        self._ws = None
        for request in sorted(self._inflight, reverse=True):
            self._requeue(self._inflight.pop(request))

    def _fail_queued(self, error: BaseException) -> None:
        with self._cond:
            batch, self._queue = self._queue, []
        for task, _ in batch:
            self._fail(task['task_id'], error)

    def _fail(self, task_id: str, error: BaseException) -> None:
        with self._cond:
            future = self._futures.pop(task_id, None)
            self._keys.pop(task_id, None)
        if future is not None and not future.done():
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                future.set_exception(error)

    # Results ---------------------------------------------------------------------------

    def reload_tasks(self) -> list[TaskFuture]:
        """Futures for the task group's tasks whose results this client has not taken
        (reattaching to ``task_group_id`` after a restart)."""
        group = self.task_group_id
        futures = []
        for task in self.client.task_group_tasks(group):
            if task['acknowledged']:
                continue
            with self._cond:
                future = self._futures.get(task['task_id'])
                if future is None:
                    future = self._futures[task['task_id']] = TaskFuture(task['task_id'], self)
            futures.append(future)
        self._start(group)
        return futures

    def _stream_main(self, group: str, ready: threading.Event) -> None:
        # The runner's close ends what the stream left (a shutdown's sync), not left pending
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            loop = self._loop = runner.get_loop()
            self._stream_task = loop.create_task(self._stream(group))
            ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(self._stream_task)

    async def _stream(self, group: str) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake

        path = f'/v1/task_groups/{group}/results'
        url = ws_url(self.client.service_url, path)
        headers = {'Authorization': f'Bearer {self.client.token}'}
        context = None
        if url.startswith('wss://'):
            verify = self.client.verify
            context = client_context(
                verify if isinstance(verify, str) else None, verify=verify is not False
            )
        delay = 0.05
        down_since = self.clock.monotonic()
        refusal = ''  # why the service last refused the stream, if it did
        while True:
            served = False  # a stream the service accepted and did not refuse
            try:
                async with connect(
                    url,
                    additional_headers=headers,
                    max_size=None,
                    compression=None,
                    ping_interval=10,
                    ping_timeout=30,
                    open_timeout=10,
                    ssl=context,
                ) as ws:
                    served = True
                    self._ws = ws
                    self._send_next()
                    try:
                        async for message in ws:
                            if isinstance(message, str):
                                continue
                            frame = _frames.decode(message)
                            if frame.type in (_frames.SUBMITTED, _frames.SUBMIT_FAILED):
                                self._answered(frame)
                                continue
                            if frame.type == _frames.ACKED:
                                if self._synced is not None:
                                    self._synced.set()
                                continue
                            ids = self._deliver(frame)
                            await ws.send(_frames.encode(_frames.ACK, {'task_ids': ids}))
                    finally:
                        self._disconnected()
            except ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd is not None else 0
                reason = e.rcvd.reason if e.rcvd is not None else ''
                if code in (4401, 4404):
                    cls = FaasAuthenticationError if code == 4401 else FaasNotFoundError
                    self._fail_all(cls(f'result stream of task group {group}: {reason}'))
                    return
                if code in _REFUSALS:  # accepted, then refused: not a stream that served
                    served = False
                    refusal = f'{_REFUSALS[code]} ({reason})' if reason else _REFUSALS[code]
                logger.debug('result stream closed (%s); reconnecting', e)
            except (TimeoutError, OSError, InvalidHandshake) as e:
                refusal = ''
                logger.debug('result stream unavailable (%r); retrying', e)
            if served:
                delay = 0.05
                down_since = self.clock.monotonic()
                refusal = ''
            elif self.clock.monotonic() - down_since > self.client.retry_deadline:
                self._fail_queued(FaasConnectionError(self._down_message(refusal)))
            if not served:  # another replica of the service, if the client has several
                self.client.failover()
                url = ws_url(self.client.service_url, path)
            await self.clock.asleep(delay)
            delay = min(delay * 2, 2.0)

    def _down_message(self, refusal: str) -> str:
        deadline, url = self.client.retry_deadline, self.client.service_url
        why = f'refused the result stream for {deadline} s: {refusal}'
        why = why if refusal else f'was unreachable for {deadline} s'
        return f'submitting: the service at {url} {why}'

    def _deliver(self, frame: Any) -> list[str]:
        received = time.time()
        ids = []
        for header, payload in zip(frame.header.get('results', []), frame.payloads, strict=False):
            task_id = str(header.get('task_id'))
            ids.append(task_id)
            with self._cond:
                future = self._futures.pop(task_id, None)
                keys = self._keys.pop(task_id, [])
            for key in keys:
                with contextlib.suppress(Exception):
                    self.store.evict(key)
            if future is None or future.done():
                continue  # a duplicate, or a future cancelled here
            future.timings = {**header.get('t', {}), 'client_received': received}
            if _tracing.on:  # the task's lifetime, from the stages' stamps
                _tracing.task_trace('tether.faas.task', future.timings, {'tether.task': task_id})
            future.output = out if isinstance(out := header.get('output'), dict) else {}
            if header.get('status') == 'cancelled':  # cancelled elsewhere (Client.cancel)
                cancel_local(future)
                continue
            try:
                value = outcome(header, payload)
            except BaseException as e:
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    future.set_exception(e)
            else:
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    future.set_result(value)
        return ids

    def _fail_all(self, error: FaasError) -> None:
        with self._cond:
            ids = list(self._futures)
        for task_id in ids:
            self._fail(task_id, error)

    # Shutdown --------------------------------------------------------------------------

    def _sync_acknowledgements(self, timeout: float = 10.0) -> None:
        """Wait until the service has stored every acknowledgement this stream sent, so
        that results taken here are not listed again (``reload_tasks``) once this returns.
        Best effort: without a stream, or past ``timeout``, the service delivers them
        again to whoever reattaches (they are then taken twice, never lost)."""
        loop, ws = self._loop, self._ws
        if loop is None or ws is None or loop.is_closed():
            return

        async def sync() -> None:
            synced = self._synced = asyncio.Event()
            await ws.send(_frames.encode(_frames.ACK, {'task_ids': [], 'sync': 'shutdown'}))
            await synced.wait()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(sync(), loop).result(timeout)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting tasks; with ``wait``, return once every future is done."""
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
            futures = list(self._futures.values())
        if cancel_futures:
            pending = [f for f in futures if not f.done()]
            with contextlib.suppress(FaasError):  # unreachable: their results still come
                cancelled = self._cancel_remote([f.task_id for f in pending]) if pending else set()
                for f in pending:
                    if f.task_id in cancelled:
                        cancel_local(f)
        if wait:
            concurrent.futures.wait(futures)
            self._sync_acknowledgements()
        if self._loop is not None and self._stream_task is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stream_task.cancel)
            if self._stream_thread is not None and wait:
                self._stream_thread.join(30)
        if self._own_client:
            self.client.close()
