"""The endpoint agent: one outbound WebSocket to the service, tasks to an engine.

The agent opens no port. It connects to the service (``Authorization: Bearer`` with the
endpoint's token; TLS when the URL is ``https``), says which tasks it still holds, and
then:

* receives batches of tasks, checks each against the allowlist, fetches (once) and caches
  each function body, checks that the environment the function asks for can read it
  (:mod:`._environments`: refused with ``VersionMismatch`` or ``ConfigError`` before
  anything runs), and gives the tasks to its engine;
* reports tasks handed to workers (``ACK``: only then does the service acknowledge them
  to the broker), except those whose results it sends at the same time (a result implies
  its hand-off);
* sends results in batches and keeps each until the service confirms it stored it
  (``RESULTS_OK``), resending the unconfirmed ones after a reconnect;
* sends a heartbeat with its engine's workers, idle workers and queue every
  ``heartbeat_s``.

When the connection drops (service restarted, network cut) it reconnects with backoff;
tasks keep running meanwhile. A task the service sends again (after a broker
redelivery) while the agent still holds it is not run twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import ssl
import threading
import time
from typing import Any

from tether._serve.tls import client_context
from tether.exceptions import FaasAuthenticationError, FaasNotFoundError
from tether.faas import _frames
from tether.faas._allow import check_task
from tether.faas._config import ComputeEndpointConfig
from tether.faas._functions_env import open_envelope
from tether.faas._http import error_from, split_urls, ws_url
from tether.faas.endpoint._environments import Environments
from tether.faas.endpoint._metrics import agent_metrics
from tether.faas.endpoint._worker import result_too_large
from tether.faas.endpoint.engine import (
    Engine,
    OnHandoff,
    OnResult,
    Task,
    cancelled_error,
    create_engine,
    result_header,
)

__all__ = ['Agent', 'make_engine']

logger = logging.getLogger(__name__)


def make_engine(
    config: ComputeEndpointConfig, on_handoff: OnHandoff, on_result: OnResult
) -> Engine:
    """The engine ``config.engine`` names (see :func:`.engine.create_engine`)."""
    return create_engine(config, on_handoff, on_result)


class Agent:
    """An endpoint's agent (see the module docstring).

    Args:
        config: The endpoint's configuration.
        token: The endpoint's token (from its private token file).
        engine: An engine to use instead of the one ``config.engine`` names.
    """

    def __init__(
        self, config: ComputeEndpointConfig, token: str, engine: Engine | None = None
    ) -> None:
        self.config = config
        self._token = token
        self._engine = engine
        self.loop: asyncio.AbstractEventLoop | None = None
        self.connected = asyncio.Event()
        self._ws: Any = None
        self._holding: dict[str, bool] = {}  # task id -> handed to a worker
        self._unconfirmed: dict[str, tuple[dict[str, Any], bytes]] = {}
        self._outbox: list[str] = []
        self._handed: list[str] = []
        self._functions: dict[str, tuple[str, bytes]] = {}
        # Each function's envelope, then (once a task of it passed the allowlists) its
        # environment: its key, or why it cannot run here.
        self._function_metas: dict[str, dict[str, Any] | None] = {}
        self._function_envs: dict[str, str | Exception] = {}
        self.environments = Environments(config.environments, config.engine)
        self._timings: dict[str, dict[str, float]] = {}
        self._flush_task: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()
        # Results and hand-offs from the engine's thread, taken by the loop in batches
        # (one wake-up of the loop for all that arrived meanwhile).
        self._inbox: list[tuple[str, Any, Any]] = []
        self._inbox_lock = threading.Lock()
        self.fatal: BaseException | None = None
        self._cancelled: collections.OrderedDict[str, None] = collections.OrderedDict()
        # Results above this fail (the endpoint's max_result_bytes, lowered to the
        # service's max_payload_bytes once the service said it).
        self._max_result = config.max_result_bytes
        self.results_made = 0
        self.metrics = agent_metrics(self)

    @property
    def engine(self) -> Engine:
        assert self._engine is not None
        return self._engine

    # Callbacks from the engine's thread -------------------------------------------------

    def _on_handoff(self, ids: list[str]) -> None:
        self._post(('handoff', ids, None))

    def _on_result(self, header: dict[str, Any], payload: bytes) -> None:
        self._post(('result', header, payload))

    def _post(self, item: tuple[str, Any, Any]) -> None:
        assert self.loop is not None
        with self._inbox_lock:
            self._inbox.append(item)
            if len(self._inbox) > 1:
                return  # the loop is already called
        with contextlib.suppress(RuntimeError):  # the loop is closed: the agent stopped
            self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._inbox_lock:
            items, self._inbox = self._inbox, []
        for kind, a, b in items:
            if kind == 'handoff':
                self._handoff(a)
            else:
                self._result(a, b)

    def _handoff(self, ids: list[str]) -> None:
        for task_id in ids:
            if task_id in self._holding:
                self._holding[task_id] = True
        self._handed.extend(ids)
        self._schedule_flush()

    def _result(self, header: dict[str, Any], payload: bytes) -> None:
        task_id = str(header['task_id'])
        if len(payload) > self._max_result:
            # An engine that did not enforce the limit (or the service's is lower): the
            # result would be refused on its way, again after every reconnect.
            error = result_too_large(len(payload), self._max_result)
            header['status'] = 'failed'
            header['error'] = {
                'type': 'tether.exceptions.FaasPayloadTooLargeError',
                'message': str(error),
                'traceback': '',
            }
            payload = b''
        self._holding.pop(task_id, None)
        header['t'] = {**self._timings.pop(task_id, {}), **header.get('t', {})}
        self._unconfirmed[task_id] = (header, payload)
        self.results_made += 1
        self._outbox.append(task_id)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.ensure_future(self._flush())

    async def _flush(self) -> None:
        # One turn of the loop lets what arrived together share a message; what arrives
        # while a message is being sent goes in the next one. Nothing waits on a timer.
        await asyncio.sleep(0)
        while self._ws is not None and (self._handed or self._outbox):
            ws = self._ws
            handed, self._handed = self._handed, []
            out, self._outbox = self._outbox, []
            if handed and out:
                # A result stands for its task's hand-off: no ACK for tasks whose results
                # go now (the service counts them handed when it stores the results).
                finished = set(out)
                handed = [t for t in handed if t not in finished]
            try:
                if handed:
                    await self._send(ws, _frames.encode(_frames.ACK, {'task_ids': handed}))
                if out:
                    await self._send_results(ws, out)
            except Exception as e:
                logger.debug('send failed (%r): will resend after reconnecting', e)
                return

    async def _send(self, ws: Any, data: bytes) -> None:
        async with self._send_lock:
            await ws.send(data)

    async def _send_results(self, ws: Any, ids: list[str]) -> None:
        entries = []
        now = time.time()
        for task_id in ids:
            item = self._unconfirmed.get(task_id)
            if item is None:
                continue
            header, payload = item
            header.setdefault('t', {})['endpoint_sent'] = now
            entries.append((header, payload))
        # Split by payload bytes and by header length, so the service accepts each.
        for message in _frames.pack(_frames.RESULTS, 'results', entries):
            await self._send(ws, message)

    # Connection ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set (or the service refuses the token)."""
        import httpx

        self.loop = asyncio.get_running_loop()
        if self._engine is None:
            self._engine = make_engine(self.config, self._on_handoff, self._on_result)
        else:
            self._engine.on_handoff = self._on_handoff
            self._engine.on_result = self._on_result
        await asyncio.get_running_loop().run_in_executor(None, self.environments.probe_declared)
        await asyncio.get_running_loop().run_in_executor(None, self.engine.start)
        self.metrics.open()
        verify: bool | str = self.config.ca_file or True
        urls = split_urls(self.config.service_url)  # replicas: tried in turn
        self._url = urls[0]
        http = httpx.AsyncClient(
            base_url=self._url,
            headers={'Authorization': f'Bearer {self._token}'},
            verify=verify,
            timeout=60,
        )
        stopper = asyncio.ensure_future(stop.wait())
        try:
            delay = 0.05
            while not stop.is_set():
                session = asyncio.ensure_future(self._session(http))
                await asyncio.wait({session, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if not session.done():
                    session.cancel()
                    with contextlib.suppress(BaseException):
                        await session
                    break
                error = session.exception()
                if isinstance(error, FaasAuthenticationError | FaasNotFoundError):
                    self.fatal = error
                    logger.error('the service refused this endpoint: %s', error)
                    break
                if error is None:
                    delay = 0.05
                else:
                    logger.info('connection to the service lost (%r); reconnecting', error)
                    self._url = urls[(urls.index(self._url) + 1) % len(urls)]
                    http.base_url = self._url
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(stopper), delay)
                delay = min(delay * 2, 2.0)
        finally:
            stopper.cancel()
            self.metrics.close()
            await http.aclose()
            await asyncio.get_running_loop().run_in_executor(None, self.engine.stop)

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.config.service_url.startswith('https://'):
            return None
        return client_context(self.config.ca_file)

    async def _session(self, http: Any) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed

        url = ws_url(self._url, '/v1/endpoint/connect')
        with contextlib.suppress(Exception):  # the service's payload limit, if it says
            health = (await http.get('/health')).json()
            limit = int(health.get('max_payload_bytes') or self.config.max_result_bytes)
            self._max_result = min(self.config.max_result_bytes, limit)
        try:
            async with connect(
                url,
                additional_headers={'Authorization': f'Bearer {self._token}'},
                max_size=None,
                compression=None,
                ping_interval=10,
                ping_timeout=30,
                open_timeout=10,
                ssl=self._ssl(),
            ) as ws:
                hello = {
                    'held': [*self._holding, *self._unconfirmed],
                    'engine': self.config.engine,
                    'min_workers': self.config.min_workers,
                    'max_workers': self.config.max_workers,
                    'allowed_functions': self.config.allowed_functions,
                    **self._stats(),
                }
                await self._send(ws, _frames.encode(_frames.HELLO, hello))
                self._ws = ws
                self._handed = [t for t, handed in self._holding.items() if handed]
                self._outbox = list(self._unconfirmed)
                self._schedule_flush()
                beat = asyncio.ensure_future(self._heartbeat(ws))
                try:
                    async for message in ws:
                        if isinstance(message, bytes):
                            await self._handle(http, ws, _frames.decode(message))
                finally:
                    beat.cancel()
                    self._ws = None
                    self.connected.clear()
        except ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd is not None else 0
            if code in (4401, 4404):
                reason = e.rcvd.reason if e.rcvd is not None else ''
                raise (FaasAuthenticationError if code == 4401 else FaasNotFoundError)(
                    f'endpoint {self.config.endpoint_id}: {reason}'
                ) from e
            raise

    def _stats(self) -> dict[str, Any]:
        stats = self.engine.stats()
        stats['warm'] = len(stats.get('warm', {}))
        stats['environments'] = self.environments.summary()
        return stats

    async def _heartbeat(self, ws: Any) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_s)
            await self._send(ws, _frames.encode(_frames.HEARTBEAT, self._stats()))

    async def _handle(self, http: Any, ws: Any, frame: Any) -> None:
        if frame.type == _frames.WELCOME:  # the service stored the HELLO: connected
            self.connected.set()
        elif frame.type == _frames.RESULTS_OK:
            for task_id in _frames.decode_task_ids(frame.header):
                self._unconfirmed.pop(task_id, None)
        elif frame.type == _frames.TASKS:
            await self._tasks(http, frame)
        elif frame.type == _frames.CANCEL:
            ids = _frames.decode_task_ids(frame.header)
            held = [t for t in ids if t in self._holding]
            if held:
                self.engine.cancel(held)
            # Not here yet (its function is being fetched, its message is on its way):
            # dropped when it comes.
            for t in ids:
                if t not in self._holding:
                    self._cancelled[t] = None
            while len(self._cancelled) > 10_000:
                self._cancelled.popitem(last=False)
        else:
            logger.warning('ignoring message type %s from the service', frame.type)

    async def _tasks(self, http: Any, frame: Any) -> None:
        received = time.time()
        tasks = []
        for message, payload in _frames.decode_tasks(frame):
            task_id, fid, _, serializer, store, threshold, timeout, t = message
            if task_id in self._holding:
                if self._holding[task_id]:
                    self._handed.append(task_id)  # redelivered: already with a worker
                continue
            if task_id in self._unconfirmed:
                self._handed.append(task_id)
                continue
            stamps = t  # the frame's own dict, as the header's was
            stamps['endpoint_received'] = received
            refusal = self._refuse(message)
            function = None
            environment = ''
            if refusal is None:
                try:
                    function = await self._function(http, fid)
                    check_task(self.config, function[0], serializer)
                    environment = await self._environment(fid)
                except Exception as e:
                    refusal = {'type': type(e).__name__, 'message': str(e), 'traceback': ''}
            if self._cancelled and self._cancelled.pop(task_id, 0) is None:
                refusal, function = cancelled_error(), None
            if refusal is not None or function is None:
                self._holding[task_id] = True
                self._handed.append(task_id)
                now = time.time()
                result = result_header(task_id, 'failed', serializer, refusal, now, now)
                self._timings[task_id] = stamps
                self._result(result, b'')
                continue
            self._holding[task_id] = False
            tasks.append(
                Task(
                    task_id=task_id,
                    function_id=fid,
                    function_serializer=function[0],
                    function_body=function[1],
                    data_serializer=serializer,
                    payload=bytes(payload),
                    result_store=store,
                    result_threshold=threshold,
                    timeout=timeout,
                    environment=environment,
                ),
            )
            self._timings[task_id] = stamps
        if tasks:
            self.engine.submit(tasks)
        self._schedule_flush()

    def _refuse(self, message: _frames.TaskMessage) -> dict[str, str] | None:
        allowed = self.config.allowed_functions
        fid = message.function_id
        if allowed is not None and fid not in allowed:
            return {
                'type': 'FunctionNotAllowedError',
                'message': f'endpoint {self.config.endpoint_id} does not allow function {fid}',
                'traceback': '',
            }
        store = message.result_store
        if allowed is not None and store is not None:
            ctype = str(store.get('connector_type', ''))
            if not ctype.startswith('tether.connectors.'):
                return {
                    'type': 'FunctionNotAllowedError',
                    'message': f'result store connector {ctype!r} is not a tether connector',
                    'traceback': '',
                }
        return None

    async def _function(self, http: Any, fid: str) -> tuple[str, bytes]:
        found = self._functions.get(fid)
        if found is None:
            response = await http.get(f'/v1/endpoint/functions/{fid}')
            if response.status_code != 200:
                raise error_from(response.status_code, response.content, f'function {fid}')
            serializer = response.headers.get('x-tether-serializer', 'pickle')
            meta, body = open_envelope(bytes(response.content))
            found = self._functions[fid] = (serializer, body)
            if meta is not None:
                meta.setdefault('serializer', serializer)
            self._function_metas[fid] = meta
        return found

    async def _environment(self, fid: str) -> str:
        """The environment function ``fid`` runs in, checked (an interpreter named by its
        path probed) the first time a task of it passed the allowlists."""
        found = self._function_envs.get(fid)
        if found is None:
            meta = self._function_metas.get(fid)
            found = self._function_envs[fid] = await self._check_environment(meta)
        if isinstance(found, Exception):
            raise found
        return found

    async def _check_environment(self, meta: dict[str, Any] | None) -> str | Exception:
        """The environment a function's envelope asks for, or why it cannot run there."""
        if meta is None:
            return ''  # no envelope (an older client): the default, unchecked
        envs = self.environments
        try:
            key = envs.key_of(meta)
            if envs.must_probe(key):
                await asyncio.get_running_loop().run_in_executor(None, envs.probe_path, key)
            envs.check(meta, key)
        except Exception as e:
            return e
        return key
