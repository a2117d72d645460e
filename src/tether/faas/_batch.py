"""``Batch``: tasks to submit in one request, in both of the SDK's shapes.

* funcX's: ``batch.add(*args, endpoint_id=..., function_id=..., **kwargs)`` or
  ``batch.add(function_id, endpoint_id, *args, **kwargs)``, then ``client.batch_run(batch)``;
* Globus Compute's: ``Batch(task_group_id)`` (or ``client.create_batch()``), then
  ``batch.add(function_id, args=(...), kwargs={...})`` and
  ``client.batch_run(endpoint_id, batch)``.

A call is read in funcX's shape when it names ``endpoint_id=``, or when its second
positional argument is an endpoint id (a UUID); otherwise in Globus Compute's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from tether.faas._payload import pack_args

__all__ = ['Batch', 'as_optional_uuid', 'check_timeout', 'check_uuid']


def check_timeout(value: Any) -> float:
    """A task's time limit: a positive number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f'task_timeout must be a positive number of seconds, not {value!r}')
    return float(value)


def check_uuid(value: Any, what: str) -> str:
    """``value`` (a UUID or its text) as text; ``ValueError`` if it is not one."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise ValueError(f'{what} must be a UUID, not {value!r}')


def as_optional_uuid(value: Any) -> uuid.UUID | None:
    """An optional id as the SDK takes one: ``None``, ``''`` or ``0`` give ``None``; a
    :class:`uuid.UUID` or its text gives the UUID.

    Raises:
        ValueError: anything else (a number, a short or malformed text ...).
    """
    if value is None or value == '' or (value == 0 and not isinstance(value, bool)):
        return None
    return uuid.UUID(check_uuid(value, 'id'))


def _is_uuid(value: Any) -> bool:
    try:
        check_uuid(value, '')
    except ValueError:
        return False
    return True


class Batch:
    """Tasks to submit in one request (``Client.create_batch``, ``Client.batch_run``).

    Args:
        task_group_id: The task group the tasks join (``None``: the client's).
        resource_specification: Recorded with the batch (see ``docs/porting.md``).
        user_endpoint_config: Recorded with the batch (see ``docs/porting.md``).
        request_queue: Accepted for the SDK's signature (results always have a queue).
        data_serializer: ``'tether'`` or ``'json'`` for the arguments.
    """

    def __init__(
        self,
        task_group_id: str | uuid.UUID | None = None,
        resource_specification: dict[str, Any] | None = None,
        user_endpoint_config: dict[str, Any] | None = None,
        request_queue: bool = False,
        *,
        data_serializer: str = 'tether',
    ) -> None:
        self.tasks: list[dict[str, Any]] = []
        self.payloads: list[bytes] = []
        self.data_serializer = data_serializer
        self.task_group_id = task_group_id
        self.resource_specification = resource_specification
        self.user_endpoint_config = user_endpoint_config
        self.request_queue = request_queue

    @property
    def task_group_id(self) -> uuid.UUID | None:
        """The task group the tasks join (``None``: the client's)."""
        return self._task_group_id

    @task_group_id.setter
    def task_group_id(self, value: str | uuid.UUID | None) -> None:
        try:
            self._task_group_id = as_optional_uuid(value)
        except ValueError:
            raise ValueError(f'task_group_id must be a UUID or None, not {value!r}') from None

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f'Batch({len(self.tasks)} task(s), task_group_id={self.task_group_id!r})'

    def add(
        self,
        *args: Any,
        endpoint_id: str | uuid.UUID | None = None,
        function_id: str | uuid.UUID | None = None,
        task_timeout: float | None = None,
        **kwargs: Any,
    ) -> str:
        """Add a call; return its task id (shapes: see the module's docstring)."""
        funcx = endpoint_id is not None or (
            function_id is None and len(args) >= 2 and _is_uuid(args[1])
        )
        if funcx:
            if function_id is None and endpoint_id is None:
                function_id, endpoint_id, args = args[0], args[1], args[2:]
            elif function_id is None:
                raise TypeError('Batch.add() needs function_id= with endpoint_id=')
            return self.add_call(str(function_id), str(endpoint_id), args, kwargs, task_timeout)
        return self._add_compute(args, function_id, kwargs, task_timeout)

    def _add_compute(
        self,
        args: Sequence[Any],
        function_id: Any,
        options: dict[str, Any],
        task_timeout: float | None,
    ) -> str:
        """``add(function_id, args=(), kwargs={})`` (Globus Compute's shape)."""
        rest = list(args)
        if function_id is None:
            if not rest:
                raise TypeError('Batch.add() needs a function id')
            function_id = rest.pop(0)
        call_args = options.pop('args', rest.pop(0) if rest else None)
        call_kwargs = options.pop('kwargs', rest.pop(0) if rest else None)
        if rest or options:
            extra = [*rest, *options]
            raise TypeError(f'Batch.add(function_id, args, kwargs) got extra arguments {extra!r}')
        if call_args is None:
            call_args = ()
        if not isinstance(call_args, tuple | list):
            raise TypeError(f'args: expected `tuple`, got {type(call_args).__name__}')
        if call_kwargs is None:
            call_kwargs = {}
        if not isinstance(call_kwargs, Mapping):
            raise TypeError(f'kwargs: expected dict, got {type(call_kwargs).__name__}')
        for key in call_kwargs:
            if not isinstance(key, str):
                raise TypeError(
                    f'kwargs: expected kwargs with `str` keys, got {type(key).__name__}'
                )
        fid = check_uuid(function_id, 'function_id')
        return self.add_call(fid, None, tuple(call_args), dict(call_kwargs), task_timeout)

    def add_call(
        self,
        function_id: str,
        endpoint_id: str | None,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        task_timeout: float | None = None,
    ) -> str:
        """Add ``function_id(*args, **kwargs)`` on ``endpoint_id`` (``None``: the endpoint
        ``batch_run`` names); return its task id."""
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
        payload = pack_args(tuple(args), kwargs, self.data_serializer)
        self.tasks.append(task)
        self.payloads.append(payload)
        return task_id

    def for_endpoint(self, endpoint_id: str | uuid.UUID | None) -> list[dict[str, Any]]:
        """The tasks, those added without an endpoint sent to ``endpoint_id``."""
        default = None if endpoint_id is None else str(endpoint_id)
        out = []
        for one in self.tasks:
            task = one
            if task['endpoint_id'] is None:
                if default is None:
                    raise TypeError('these tasks name no endpoint: batch_run(endpoint_id, batch)')
                task = {**task, 'endpoint_id': default}
            out.append(task)
        return out
