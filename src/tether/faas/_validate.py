"""The service's checks of what a client sends, done once where it arrives.

Every field of a request (path parameters, JSON bodies, frame headers) is checked for its
type, length and nesting before anything is stored or published; a bad one is refused with
:class:`~tether.exceptions.FaasBadRequestError` (HTTP 400), whose message names the field.
The bounds also guarantee that what is accepted can be published later: a queue name is
``queue_prefix`` (at most :data:`MAX_PREFIX` characters), a word and an id (at most
:data:`MAX_ID`), well under AMQP's 255 bytes, and a task's header stays far below what a
broker message may carry.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tether.exceptions import FaasBadRequestError

__all__ = [
    'MAX_DEPTH',
    'MAX_ID',
    'MAX_IDS',
    'MAX_NAME',
    'MAX_PREFIX',
    'MAX_STORE_BYTES',
    'check_id',
    'check_ids',
    'check_name',
    'check_submission',
    'loads',
]

MAX_ID = 64
"""Longest id (task, task group, function, endpoint): UUIDs have 36 characters."""
MAX_IDS = 100_000
"""Most ids in one request (status or acknowledgement of many tasks)."""
MAX_NAME = 200
"""Longest endpoint or function name."""
MAX_PREFIX = 100
"""Longest ``queue_prefix`` of a service configuration."""
MAX_DEPTH = 32
"""Deepest nesting of a JSON value a client sends (a result store's configuration)."""
MAX_STORE_BYTES = 64 * 1024
"""Largest JSON of a task's ``result_store`` (a store configuration)."""
MAX_STAMPS = 64
"""Most client timestamps (``t``) on a task."""

_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9._:-]*')
_ID_FAST = re.compile(rf'[A-Za-z0-9][A-Za-z0-9._:-]{{0,{MAX_ID - 1}}}').fullmatch
_WORD = re.compile(r'[A-Za-z0-9_.-]{1,32}')


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f'{text[:37]}...'


def check_id(value: Any, what: str) -> str:
    """``value`` if it is an id: 1 to :data:`MAX_ID` letters, digits and ``-_.:``."""
    if type(value) is str and _ID_FAST(value) is not None:
        return value
    if not isinstance(value, str):
        raise FaasBadRequestError(f'{what} must be a string, not {type(value).__name__}')
    if not 0 < len(value) <= MAX_ID:
        raise FaasBadRequestError(
            f'{what} has {len(value)} characters: an id has 1 to {MAX_ID} (UUIDs have 36)'
        )
    if _ID.fullmatch(value) is None:
        raise FaasBadRequestError(
            f'{what} {_show(value)} is not an id: letters, digits and "-_.:" only'
        )
    return value


def check_ids(value: Any, what: str) -> list[str]:
    """A JSON list of ids (at most :data:`MAX_IDS`)."""
    if not isinstance(value, list):
        raise FaasBadRequestError(
            f'{what} must be a list of ids, not {type(value).__name__} {_show(value)}'
        )
    if len(value) > MAX_IDS:
        raise FaasBadRequestError(f'{what} has {len(value)} ids: at most {MAX_IDS} a request')
    for i, item in enumerate(value):
        check_id(item, f'{what}[{i}]')
    return value


def check_name(value: Any, what: str) -> str:
    """A non-empty name of at most :data:`MAX_NAME` characters, stripped."""
    if not isinstance(value, str) or not value.strip():
        raise FaasBadRequestError(f'{what} must be a non-empty string')
    if len(value) > MAX_NAME:
        raise FaasBadRequestError(f'{what} has {len(value)} characters: at most {MAX_NAME}')
    return value.strip()


def _depth(value: Any, limit: int, what: str) -> None:
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > limit:
            raise FaasBadRequestError(f'{what} nests deeper than {limit} levels')
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)


def loads(data: bytes, what: str) -> Any:
    """JSON from a request body; refused (not a 500) when nested too deeply to parse."""
    try:
        value = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FaasBadRequestError(f'{what} is not JSON: {e}') from e
    except RecursionError as e:
        raise FaasBadRequestError(f'{what} nests too deeply') from e
    _depth(value, MAX_DEPTH, what)
    return value


def _check_task(task: Any, i: int) -> None:
    where = f'tasks[{i}]'
    if not isinstance(task, dict):
        raise FaasBadRequestError(f'{where} must be an object, not {type(task).__name__}')
    for key in ('task_id', 'function_id', 'endpoint_id'):
        check_id(task.get(key), f'{where}.{key}')
    serializer = task.get('data_serializer', 'tether')
    if not isinstance(serializer, str) or _WORD.fullmatch(serializer) is None:
        raise FaasBadRequestError(
            f'{where}.data_serializer must be a serializer name (such as "tether" or "json")'
        )
    store = task.get('result_store')
    if store is not None:
        if not isinstance(store, dict):
            raise FaasBadRequestError(f'{where}.result_store must be an object or null')
        _depth(store, MAX_DEPTH, f'{where}.result_store')
        size = len(json.dumps(store))
        if size > MAX_STORE_BYTES:
            raise FaasBadRequestError(
                f'{where}.result_store has {size} bytes of JSON: at most {MAX_STORE_BYTES}'
            )
    threshold = task.get('result_threshold')
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0
    ):
        raise FaasBadRequestError(f'{where}.result_threshold must be a whole number >= 0')
    stamps = task.get('t')
    if stamps is not None:
        if not isinstance(stamps, dict) or len(stamps) > MAX_STAMPS:
            raise FaasBadRequestError(
                f'{where}.t must be an object of at most {MAX_STAMPS} timestamps'
            )
        for key, value in stamps.items():
            if len(key) > MAX_ID or isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FaasBadRequestError(
                    f'{where}.t must map names (at most {MAX_ID} characters) to numbers'
                )


def check_submission(header: dict[str, Any], payload_count: int) -> None:
    """A SUBMIT frame's header: ``task_group_id`` (an id or null) and ``tasks``, one
    object per payload, each with valid ids and options."""
    group = header.get('task_group_id')
    if group not in (None, ''):
        check_id(group, 'task_group_id')
    tasks = header.get('tasks')
    if not isinstance(tasks, list):
        raise FaasBadRequestError(
            f'"tasks" must be a list of task objects, not {type(tasks).__name__}'
        )
    if len(tasks) != payload_count:
        raise FaasBadRequestError(
            f'a submission needs one payload per entry of "tasks" ({len(tasks)} tasks, '
            f'{payload_count} payloads)'
        )
    for i, task in enumerate(tasks):
        _check_task(task, i)
