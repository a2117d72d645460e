"""The SDK's ``Client``: register functions and endpoints, run tasks, read results.

Call shapes follow the funcX SDK (the seeds' listings): ``register_function(fn)`` returns
a UUID string; ``run(function_id, endpoint_id, *args, **kwargs)`` as the funcX paper's
listing 1 shows it, or ``run(*args, endpoint_id=..., function_id=..., **kwargs)`` as
today's SDK spells it, returns a task id; ``get_result(task_id)`` raises
:class:`~tether.exceptions.TaskPending` until the task is done.
"""

from __future__ import annotations

import weakref
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
from tether.faas._batch import Batch, check_timeout
from tether.faas._functions_env import (
    SubmissionChecks,
    check_environment_name,
    function_meta,
    wrap,
)
from tether.faas._http import locate, request_with_retry, split_urls
from tether.faas._payload import pack_function, unpack_result
from tether.faas._serde import code_serializer_of, data_serializer_of

__all__ = ['Batch', 'Client', 'check_timeout', 'outcome']


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
        service_url: Base URL (``http(s)://host:port``), or the URLs of several replicas
            of one service (a list, or one string with commas): requests go to the first,
            and move to the next (in order, round the list) when the one in use is
            unreachable or answers 503. Default: ``$TETHER_FAAS_URL`` (commas allowed),
            else the running ``tether faas dev`` of this user.
        token: A user token. Default: ``$TETHER_FAAS_TOKEN``, else the dev service's.
        data_serializer: ``'tether'`` (default) or ``'json'`` for arguments and results.
        function_serializer: ``'pickle'`` (default; ``'source'`` when data is JSON).
        retry_deadline: Seconds to keep retrying while the service is unreachable.
        timeout: Seconds for one HTTP request.
        verify: TLS verification (``True``, ``False`` or a CA bundle path).
        code_serialization_strategy: A Globus Compute strategy for functions (see
            :mod:`tether.faas` ``DillCode`` ...), instead of ``function_serializer``.
        data_serialization_strategy: A Globus Compute strategy for data (``JSONData``,
            ``DillDataBase64``), instead of ``data_serializer``.
    """

    def __init__(
        self,
        service_url: str | Sequence[str] | None = None,
        token: str | None = None,
        *,
        data_serializer: str = 'tether',
        function_serializer: str | None = None,
        retry_deadline: float = 60.0,
        timeout: float = 60.0,
        verify: bool | str = True,
        code_serialization_strategy: Any = None,
        data_serialization_strategy: Any = None,
    ) -> None:
        import httpx

        data_serializer = data_serializer_of(data_serialization_strategy) or data_serializer
        function_serializer = code_serializer_of(code_serialization_strategy) or (
            code_serializer_of(function_serializer)
        )

        given = None if service_url is None else ','.join(split_urls(service_url))
        url, self._token, self._dev = locate(given, token)
        self.service_urls = split_urls(url)
        """The replicas' URLs, in the order they are tried."""
        self.service_url = self.service_urls[0]
        """The URL in use."""
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
        # A Client dropped without close() (as Globus Compute programs do) still closes
        # its connections when it is collected.
        self._closer = weakref.finalize(self, self._http.close)
        self._task_group: str | None = None
        self._limit: int | None = None
        self._functions: dict[Any, str] = {}
        # One request, not retried: a check never holds a submission up.
        self.environment_checks = SubmissionChecks(
            lambda eid: self._http.get(f'/v1/endpoints/{eid}').raise_for_status().json()
        )

    def __repr__(self) -> str:
        return f'Client({self.service_url!r})'

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closer()

    @property
    def token(self) -> str:
        """The user token (for the Executor's result stream of this client)."""
        return self._token

    @property
    def dev_endpoint_id(self) -> str | None:
        """The endpoint of the running ``tether faas dev``, if that is the service used."""
        return self._dev.get('endpoint_id') if self._dev.get('url') == self.service_url else None

    def failover(self) -> None:
        """Move to the next of :attr:`service_urls` (after the last, the first again)."""
        if len(self.service_urls) < 2:
            return
        i = (
            self.service_urls.index(self.service_url)
            if self.service_url in self.service_urls
            else -1
        )
        self.service_url = self.service_urls[(i + 1) % len(self.service_urls)]
        self._http.base_url = self.service_url

    def _request(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        return request_with_retry(
            self._http, method, path, what, self.retry_deadline, failover=self.failover, **kwargs
        )

    # Functions and endpoints -----------------------------------------------------------

    def register_function(
        self,
        function: Callable[..., Any],
        function_name: str | None = None,
        *,
        function_serializer: str | None = None,
        environment: str | None = None,
        container_uuid: str | None = None,
        **_: Any,
    ) -> str:
        """Register ``function``; return its id (a UUID string). The same function
        registered again, here or by ``Executor.submit``, has the same id.

        ``environment`` names the Python environment the function needs on the endpoint:
        a name its ``[environments]`` table declares, or an absolute path of an
        interpreter or virtual environment there (``None``: the endpoint's own). The
        Python and tether versions serializing it are recorded with it, so that an
        environment that cannot read it refuses it (``VersionMismatch``) instead of
        losing workers; see ``docs/faas.md``. ``container_uuid`` (Globus Compute's) is
        taken as the name of an environment when ``environment`` is not given.

        Raises:
            ConfigError: ``environment`` is neither a plain name nor an absolute path.
        """
        method = function_serializer or self.function_serializer
        wanted = environment if environment is not None else container_uuid
        meta = function_meta(check_environment_name(str(wanted) if wanted else None), method)
        body = wrap(pack_function(function, method), meta)
        name = function_name or getattr(function, '__name__', 'function')
        frame = _frames.encode(_frames.FUNCTION, {'name': name, 'serializer': method}, [body])
        response = self._request(
            'POST',
            '/v1/functions',
            f'registering {name}',
            content=frame,
            headers={'content-type': _frames.CONTENT_TYPE},
        )
        function_id = str(response.json()['function_id'])
        self.environment_checks.meta[function_id] = meta
        return function_id

    def function_id_for(self, function: Callable[..., Any], environment: str | None = None) -> str:
        """The id of ``function`` (asking for ``environment``), registering it the first
        time (cached per client)."""
        try:
            key: Any = function if environment is None else (function, environment)
            found = self._functions.get(key)
        except TypeError:  # unhashable callable
            key = id(function) if environment is None else (id(function), environment)
            found = self._functions.get(key)
        if found is None:
            found = self._functions[key] = self.register_function(
                function, environment=environment
            )
        return found

    def register_endpoint(self, name: str) -> tuple[str, str]:
        """Register a new endpoint; return ``(endpoint_id, endpoint_token)``."""
        data = self._request(
            'POST', '/v1/endpoints', 'registering an endpoint', json={'name': name}
        )
        return str(data.json()['endpoint_id']), str(data.json()['token'])

    def get_function(self, function_id: str) -> dict[str, Any]:
        """A registered function: ``function_id``, ``function_name``, ``serializer``."""
        fid = str(function_id)
        data: dict[str, Any] = self._request(
            'GET', f'/v1/functions/{fid}', f'function {fid}'
        ).json()
        data['function_name'] = data.get('name')
        return data

    def delete_function(self, function_id: str) -> None:
        """Delete a registered function (tasks of it not yet run then fail)."""
        fid = str(function_id)
        self._request('DELETE', f'/v1/functions/{fid}', f'function {fid}')

    def get_endpoint_status(self, endpoint_id: str) -> dict[str, Any]:
        """An endpoint's status: ``status`` (``'online'`` or ``'offline'``), ``online``,
        ``info`` (workers, idle ...), ``queued``, ``running``, ``last_seen``."""
        eid = str(endpoint_id)
        result: dict[str, Any] = self._request(
            'GET', f'/v1/endpoints/{eid}', f'endpoint {eid}'
        ).json()
        result['status'] = 'online' if result.get('online') else 'offline'
        return result

    def get_endpoint_metadata(self, endpoint_id: str) -> dict[str, Any]:
        """What an endpoint said of itself when it connected: ``endpoint_id``, ``name``,
        ``engine``, ``min_workers``, ``max_workers``, ``allowed_functions`` ..."""
        status = self.get_endpoint_status(endpoint_id)
        info = status.get('info') or {}
        return {**info, 'endpoint_id': status['endpoint_id'], 'name': status['name']}

    def get_endpoints(self, role: str | None = None) -> list[dict[str, Any]]:
        """This user's endpoints (``role``: only ``None``, ``'owner'`` or ``'any'``:
        a tether user sees the endpoints it owns)."""
        if role not in (None, 'owner', 'any'):
            raise ValueError(f"role must be None, 'owner' or 'any', not {role!r}")
        endpoints = self.list_endpoints()
        for ep in endpoints:
            ep['uuid'] = ep['endpoint_id']
            ep['status'] = 'online' if ep.get('online') else 'offline'
        return endpoints

    def get_allowed_functions(self, endpoint_id: str) -> dict[str, Any]:
        """The functions an endpoint accepts: ``{'endpoint_id', 'functions'}``, where
        ``functions`` is ``None`` for an endpoint that runs any function of its owner
        (and, for an endpoint that has never connected, what is known: ``None``)."""
        info = self.get_endpoint_metadata(endpoint_id)
        allowed = info.get('allowed_functions')
        return {
            'endpoint_id': info['endpoint_id'],
            'functions': None if allowed is None else list(allowed),
        }

    def stop_endpoint(self, endpoint_id: str) -> None:
        """Stop an endpoint: its connection is closed and its agent exits (it is not
        deleted: started again, it serves its queue, which kept the tasks it had not
        taken)."""
        eid = str(endpoint_id)
        self._request('POST', f'/v1/endpoints/{eid}/stop', f'stopping endpoint {eid}')

    def list_endpoints(self) -> list[dict[str, Any]]:
        """This user's endpoints."""
        result: list[dict[str, Any]] = self._request('GET', '/v1/endpoints', 'endpoints').json()[
            'endpoints'
        ]
        return result

    def delete_endpoint(self, endpoint_id: str) -> None:
        self._request('DELETE', f'/v1/endpoints/{endpoint_id}', f'endpoint {endpoint_id}')

    # Sharing ---------------------------------------------------------------------------

    def set_group(self, name: str, members: Sequence[str]) -> list[str]:
        """Create the group ``name`` of users (by name), or replace its members (only
        the user who created it may); return its members."""
        body = {'members': list(members)}
        data = self._request('PUT', f'/v1/groups/{name}', f'group {name}', json=body).json()
        return list(data['members'])

    def share_function(
        self, function_id: str, *, users: Sequence[str] = (), groups: Sequence[str] = ()
    ) -> dict[str, list[str]]:
        """Let the named users and groups run this function of yours (replacing the
        previous share: a name left out loses access). Returns the share."""
        return self._share(f'/v1/functions/{function_id}/sharing', users, groups)

    def share_endpoint(
        self, endpoint_id: str, *, users: Sequence[str] = (), groups: Sequence[str] = ()
    ) -> dict[str, list[str]]:
        """Let the named users and groups run tasks on this endpoint of yours (replacing
        the previous share: a name left out loses access). Returns the share."""
        return self._share(f'/v1/endpoints/{endpoint_id}/sharing', users, groups)

    def get_sharing(
        self, *, function_id: str | None = None, endpoint_id: str | None = None
    ) -> dict[str, list[str]]:
        """Who one of your functions or endpoints is shared with."""
        if (function_id is None) == (endpoint_id is None):
            raise TypeError('get_sharing() needs one of function_id= and endpoint_id=')
        path = (
            f'/v1/functions/{function_id}/sharing'
            if function_id is not None
            else f'/v1/endpoints/{endpoint_id}/sharing'
        )
        result: dict[str, list[str]] = self._request('GET', path, 'sharing').json()
        return result

    def _share(
        self, path: str, users: Sequence[str], groups: Sequence[str]
    ) -> dict[str, list[str]]:
        if isinstance(users, str) or isinstance(groups, str):
            raise TypeError('users= and groups= are lists of names, not one string')
        body = {'users': list(users), 'groups': list(groups)}
        result: dict[str, list[str]] = self._request('PUT', path, 'sharing', json=body).json()
        return result

    # Tasks -----------------------------------------------------------------------------

    def create_task_group(self) -> str:
        return str(self._request('POST', '/v1/task_groups', 'task group').json()['task_group_id'])

    @property
    def task_group_id(self) -> str:
        """The task group of tasks started by :meth:`run` and :meth:`batch_run`."""
        if self._task_group is None:
            self._task_group = self.create_task_group()
        return self._task_group

    def create_batch(
        self,
        task_group_id: str | None = None,
        resource_specification: dict[str, Any] | None = None,
        user_endpoint_config: dict[str, Any] | None = None,
        create_websocket_queue: bool = False,
    ) -> Batch:
        """An empty :class:`Batch` (add calls to it, then :meth:`batch_run`)."""
        return Batch(
            task_group_id,
            resource_specification,
            user_endpoint_config,
            create_websocket_queue,
            data_serializer=self.data_serializer,
        )

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
        fid, eid, rest = _ids(function_id, endpoint_id, args)
        batch = self.create_batch()
        batch.add_call(fid, eid, rest, kwargs, task_timeout)
        return str(self.batch_run(batch)[0])

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

    def batch_run(self, *args: Any, task_group_id: str | None = None) -> Any:
        """Submit a batch in one request.

        ``batch_run(batch)`` (funcX) returns the task ids in order; ``batch_run(endpoint_id,
        batch)`` (Globus Compute; tasks added without an endpoint go to ``endpoint_id``)
        returns ``{'request_id', 'task_group_id', 'endpoint_id', 'tasks': {function_id:
        [task_id, ...]}}``.
        """
        if len(args) == 1 and isinstance(args[0], Batch):
            batch, endpoint_id = args[0], None
        elif len(args) == 2 and isinstance(args[1], Batch):
            endpoint_id, batch = str(args[0]), args[1]
        else:
            raise TypeError('batch_run(batch) or batch_run(endpoint_id, batch)')
        tasks = batch.for_endpoint(endpoint_id)
        group = str(task_group_id or batch.task_group_id or self.task_group_id)
        answer = self.submit_raw(tasks, batch.payloads, group)
        if endpoint_id is None:
            return [t['task_id'] for t in tasks]
        by_function: dict[str, list[str]] = {}
        for t in tasks:
            by_function.setdefault(t['function_id'], []).append(t['task_id'])
        return {
            'request_id': answer.get('request_id'),
            'task_group_id': group,
            'endpoint_id': endpoint_id,
            'tasks': by_function,
        }

    def submit_raw(
        self, tasks: list[dict[str, Any]], payloads: Sequence[bytes], task_group_id: str
    ) -> dict[str, Any]:
        """Send prepared tasks (used by the Executor).

        Raises:
            VersionMismatch: a task's function cannot be read by the environment it asks
                for on its endpoint (as the endpoint reported it).
        """
        for fid, eid in {(t.get('function_id'), t.get('endpoint_id')) for t in tasks}:
            if fid and eid:
                self.environment_checks.check(str(fid), str(eid))
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
        """A task's record: ``status``, ``pending``, ``error``, ``timings`` ... and, when the
        finished task wrote to them, its ``stdout`` and ``stderr`` (the endpoint's
        ``max_output_bytes`` of each: ``docs/faas.md``)."""
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
