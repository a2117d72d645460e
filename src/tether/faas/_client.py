"""The SDK's ``Client``: register functions and endpoints, run tasks, read results.

Call shapes follow the funcX SDK (the seeds' listings): ``register_function(fn)`` returns
a UUID string; ``run(function_id, endpoint_id, *args, **kwargs)`` as the funcX paper's
listing 1 shows it, or ``run(*args, endpoint_id=..., function_id=..., **kwargs)`` as
today's SDK spells it, returns a task id; ``get_result(task_id)`` raises
:class:`~tether.exceptions.TaskPending` until the task is done.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from tether.exceptions import (
    EndpointDeletedError,
    FaasPayloadTooLargeError,
    TaskCancelledError,
    TaskExecutionFailed,
    TaskPending,
    TaskTimeoutError,
    WorkerLostError,
)
from tether.faas import _frames
from tether.faas._http import locate, request_with_retry
from tether.faas._payload import pack_args, pack_function, unpack_result

__all__ = ['Batch', 'Client', 'outcome']


# Failures that the service or the endpoint report (not raised by the function).
_ERRORS: dict[str, type[TaskExecutionFailed]] = {
    'WorkerLostError': WorkerLostError,
    'EndpointDeletedError': EndpointDeletedError,
    'TaskTimeoutError': TaskTimeoutError,
    'TaskCancelledError': TaskCancelledError,
}


def outcome(header: dict[str, Any], payload: bytes | memoryview) -> Any:
    """The value of a result message, or raise the task's error."""
    if header.get('status') == 'success':
        return unpack_result(str(header.get('result_serializer', 'tether')), payload)
    error = header.get('error') or {}
    cls = _ERRORS.get(str(error.get('type')), TaskExecutionFailed)
    raise cls(
        str(error.get('type', 'Error')),
        str(error.get('message', 'the task failed')),
        str(error.get('traceback', '')),
    )


@dataclasses.dataclass
class Batch:
    """Tasks to submit in one request (``Client.create_batch``, ``Client.batch_run``)."""

    tasks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    payloads: list[bytes] = dataclasses.field(default_factory=list)
    data_serializer: str = 'tether'

    def add(
        self,
        *args: Any,
        endpoint_id: str | None = None,
        function_id: str | None = None,
        task_timeout: float | None = None,
        **kwargs: Any,
    ) -> str:
        """Add a call (same shapes as :meth:`Client.run`); return its task id."""
        function_id, endpoint_id, rest = _ids(function_id, endpoint_id, args)
        task_id = str(uuid.uuid4())
        task: dict[str, Any] = {
            'task_id': task_id,
            'function_id': function_id,
            'endpoint_id': endpoint_id,
            'data_serializer': self.data_serializer,
            't': {'client_submit': time.time()},
        }
        if task_timeout is not None:
            task['timeout'] = check_timeout(task_timeout)
        self.tasks.append(task)
        self.payloads.append(pack_args(tuple(rest), kwargs, self.data_serializer))
        return task_id


def check_timeout(value: Any) -> float:
    """A task's time limit: a positive number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f'task_timeout must be a positive number of seconds, not {value!r}')
    return float(value)


def _ids(
    function_id: str | None, endpoint_id: str | None, args: Sequence[Any]
) -> tuple[str, str, Sequence[Any]]:
    if function_id is None and endpoint_id is None:
        if len(args) < 2:
            raise TypeError('run() needs function_id and endpoint_id')
        return str(args[0]), str(args[1]), args[2:]
    if function_id is None or endpoint_id is None:
        raise TypeError('run() needs both function_id= and endpoint_id=')
    return str(function_id), str(endpoint_id), args


class Client:
    """A connection to a tether function service.

    Args:
        service_url: Base URL (``http(s)://host:port``). Default: ``$TETHER_FAAS_URL``, else
            the running ``tether faas dev`` of this user.
        token: A user token. Default: ``$TETHER_FAAS_TOKEN``, else the dev service's.
        data_serializer: ``'tether'`` (default) or ``'json'`` for arguments and results.
        function_serializer: ``'pickle'`` (default; ``'source'`` when data is JSON).
        retry_deadline: Seconds to keep retrying while the service is unreachable.
        timeout: Seconds for one HTTP request.
        verify: TLS verification (``True``, ``False`` or a CA bundle path).
    """

    def __init__(
        self,
        service_url: str | None = None,
        token: str | None = None,
        *,
        data_serializer: str = 'tether',
        function_serializer: str | None = None,
        retry_deadline: float = 60.0,
        timeout: float = 60.0,
        verify: bool | str = True,
    ) -> None:
        import httpx

        self.service_url, self._token, self._dev = locate(service_url, token)
        self.data_serializer = data_serializer
        self.function_serializer = function_serializer or (
            'source' if data_serializer == 'json' else 'pickle'
        )
        self.retry_deadline = retry_deadline
        self.verify = verify
        self._http = httpx.Client(
            base_url=self.service_url,
            headers={'Authorization': f'Bearer {self._token}'},
            timeout=timeout,
            verify=verify,
        )
        self._task_group: str | None = None
        self._limit: int | None = None
        self._functions: dict[Any, str] = {}

    def __repr__(self) -> str:
        return f'Client({self.service_url!r})'

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    @property
    def token(self) -> str:
        """The user token (for the Executor's result stream of this client)."""
        return self._token

    @property
    def dev_endpoint_id(self) -> str | None:
        """The endpoint of the running ``tether faas dev``, if that is the service used."""
        return self._dev.get('endpoint_id') if self._dev.get('url') == self.service_url else None

    def _request(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        return request_with_retry(self._http, method, path, what, self.retry_deadline, **kwargs)

    # Functions and endpoints -----------------------------------------------------------

    def register_function(
        self, function: Callable[..., Any], function_name: str | None = None, **_: Any
    ) -> str:
        """Register ``function``; return its id (a UUID string)."""
        body = pack_function(function, self.function_serializer)
        name = function_name or getattr(function, '__name__', 'function')
        frame = _frames.encode(
            _frames.FUNCTION, {'name': name, 'serializer': self.function_serializer}, [body]
        )
        response = self._request(
            'POST',
            '/v1/functions',
            f'registering {name}',
            content=frame,
            headers={'content-type': _frames.CONTENT_TYPE},
        )
        return str(response.json()['function_id'])

    def function_id_for(self, function: Callable[..., Any]) -> str:
        """The id of ``function``, registering it the first time (cached per client)."""
        try:
            key: Any = function
            found = self._functions.get(key)
        except TypeError:  # unhashable callable
            key, found = id(function), self._functions.get(id(function))
        if found is None:
            found = self._functions[key] = self.register_function(function)
        return found

    def register_endpoint(self, name: str) -> tuple[str, str]:
        """Register a new endpoint; return ``(endpoint_id, endpoint_token)``."""
        data = self._request(
            'POST', '/v1/endpoints', 'registering an endpoint', json={'name': name}
        )
        return str(data.json()['endpoint_id']), str(data.json()['token'])

    def get_endpoint_status(self, endpoint_id: str) -> dict[str, Any]:
        """An endpoint's status: ``online``, ``info`` (workers, idle ...), ``queued``."""
        result: dict[str, Any] = self._request(
            'GET', f'/v1/endpoints/{endpoint_id}', f'endpoint {endpoint_id}'
        ).json()
        return result

    def list_endpoints(self) -> list[dict[str, Any]]:
        """This user's endpoints."""
        result: list[dict[str, Any]] = self._request('GET', '/v1/endpoints', 'endpoints').json()[
            'endpoints'
        ]
        return result

    def delete_endpoint(self, endpoint_id: str) -> None:
        self._request('DELETE', f'/v1/endpoints/{endpoint_id}', f'endpoint {endpoint_id}')

    # Tasks -----------------------------------------------------------------------------

    def create_task_group(self) -> str:
        return str(self._request('POST', '/v1/task_groups', 'task group').json()['task_group_id'])

    @property
    def task_group_id(self) -> str:
        """The task group of tasks started by :meth:`run` and :meth:`batch_run`."""
        if self._task_group is None:
            self._task_group = self.create_task_group()
        return self._task_group

    def create_batch(self) -> Batch:
        """An empty :class:`Batch` (add calls to it, then :meth:`batch_run`)."""
        return Batch(data_serializer=self.data_serializer)

    def run(
        self,
        *args: Any,
        endpoint_id: str | None = None,
        function_id: str | None = None,
        task_timeout: float | None = None,
        **kwargs: Any,
    ) -> str:
        """Run a registered function on an endpoint; return the task id.

        ``task_timeout`` (seconds; not passed to the function) limits how long the task
        may run on its worker: past it, the task fails with
        :class:`~tether.exceptions.TaskTimeoutError` and the worker is replaced.
        """
        batch = self.create_batch()
        batch.add(
            *args,
            endpoint_id=endpoint_id,
            function_id=function_id,
            task_timeout=task_timeout,
            **kwargs,
        )
        return self.batch_run(batch)[0]

    def cancel(self, task_id: str) -> bool:
        """Cancel a task: removed from its queue if it has not started, stopped on its
        worker if it runs (the endpoint replaces the worker). True if it was cancelled
        now (or before it was submitted); False if it had finished (its result stays)."""
        return self.batch_cancel([task_id])[task_id] in ('cancelled', 'unknown')

    def batch_cancel(self, task_ids: Sequence[str]) -> dict[str, str]:
        """Cancel tasks in one request; each id's outcome: ``'cancelled'``, the status it
        had finished with (``'success'``, ``'failed'``, ``'cancelled'``), or ``'unknown'``
        (the service has no such task yet: it is cancelled when it comes)."""
        if not task_ids:
            return {}
        response = self._request(
            'POST',
            '/v1/tasks/cancel',
            f'cancelling {len(task_ids)} task(s)',
            json={'task_ids': list(task_ids)},
        )
        result: dict[str, str] = response.json()['tasks']
        return result

    def batch_run(self, batch: Batch, task_group_id: str | None = None) -> list[str]:
        """Submit a batch in one request; return the task ids in order."""
        self.submit_raw(batch.tasks, batch.payloads, task_group_id or self.task_group_id)
        return [t['task_id'] for t in batch.tasks]

    def submit_raw(
        self, tasks: list[dict[str, Any]], payloads: Sequence[bytes], task_group_id: str
    ) -> dict[str, Any]:
        """Send prepared tasks (used by the Executor)."""
        for i, payload in enumerate(payloads):
            if len(payload) > self._payload_limit():
                raise FaasPayloadTooLargeError(
                    f'task {tasks[i]["task_id"]} has {len(payload)} bytes of arguments, above '
                    f'the limit of {self._payload_limit()} bytes: pass large objects by '
                    'reference (Executor(endpoint_id, store=store), or store.proxy(obj))',
                )
        frame = _frames.encode(
            _frames.SUBMIT, {'task_group_id': task_group_id, 'tasks': tasks}, payloads
        )
        result: dict[str, Any] = self._request(
            'POST',
            '/v1/submit',
            f'submitting {len(tasks)} task(s)',
            content=frame,
            headers={'content-type': _frames.CONTENT_TYPE},
        ).json()
        return result

    def _payload_limit(self) -> int:
        if self._limit is None:
            health = self._request('GET', '/health', 'service limits').json()
            self._limit = int(health.get('max_payload_bytes', 1 << 62))
        return self._limit

    def get_task(self, task_id: str) -> dict[str, Any]:
        """A task's status: ``status``, ``pending``, ``error``, ``timings`` ..."""
        data: dict[str, Any] = self._request(
            'GET', f'/v1/tasks/{task_id}', f'task {task_id}'
        ).json()
        data['pending'] = data['status'] not in ('success', 'failed', 'cancelled')
        return data

    def get_result(self, task_id: str) -> Any:
        """The task's result (then acknowledged: the service deletes it).

        Raises:
            TaskPending: the task has not finished.
            TaskExecutionFailed: the function raised on the endpoint.
        """
        response = self._request('GET', f'/v1/tasks/{task_id}/result', f'result of task {task_id}')
        frame = _frames.decode(response.content)
        try:
            return outcome(frame.header, frame.payloads[0] if frame.payloads else b'')
        finally:
            self._request('POST', '/v1/tasks/ack', 'acknowledging', json={'task_ids': [task_id]})

    def get_batch_result(self, task_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Status and, for finished tasks, result or exception of many tasks."""
        statuses = self._request(
            'POST', '/v1/tasks/status', 'task status', json={'task_ids': list(task_ids)}
        ).json()['tasks']
        out: dict[str, dict[str, Any]] = {}
        for st in statuses:
            entry: dict[str, Any] = {'status': st['status'], 'pending': True}
            if st['status'] in ('success', 'failed', 'cancelled') and not st['acknowledged']:
                entry['pending'] = False
                try:
                    entry['result'] = self.get_result(st['task_id'])
                except (TaskExecutionFailed, TaskPending) as e:
                    entry['exception'] = e
            out[st['task_id']] = entry
        return out

    def task_group_tasks(self, task_group_id: str) -> list[dict[str, Any]]:
        """Task ids and status of a task group."""
        response = self._request(
            'GET', f'/v1/task_groups/{task_group_id}', f'task group {task_group_id}'
        )
        tasks: list[dict[str, Any]] = response.json()['tasks']
        return tasks
